import { expect } from "chai";
import type { TestStack } from "./gateway";
import { type Reply, type TestSession, assertDeclared, send } from "./session";

/**
 * Keys made by code (docs/keys.md): requests to the API made with an `atom_` key as the bearer (a keys:manage key on
 * /v1/keys, a made key on /v1/call), each answer checked against docs/openapi.json like a session's.
 */
export function withKey(stack: Pick<TestStack, "url">, key: string) {
  return async (method: string, path: string, body?: unknown): Promise<Reply> => {
    const reply = await send(stack.url + path, method, { authorization: `Bearer ${key}` }, body);
    assertDeclared(method, stack.url + path, reply);
    return reply;
  };
}

/** A key made by `session` with `body` (POST /v1/keys): its whole key and its view as listed. */
export async function sessionKey(
  session: TestSession,
  body: Record<string, unknown>,
): Promise<{ key: string; id: string } & Record<string, any>> {
  const created = await session.request("POST", "/v1/keys", body);
  expect(created.status, JSON.stringify(created.body)).to.equal(201);
  return created.body.data;
}

/** The account's live keys as the session lists them, by id. */
export async function listedKeys(session: TestSession): Promise<Map<string, Record<string, any>>> {
  const listed = await session.request("GET", "/v1/keys");
  expect(listed.status).to.equal(200);
  return new Map((listed.body.data as { id: string }[]).map((k) => [k.id, k]));
}

/** An ISO time `ms` from now. */
export const fromNow = (ms: number) => new Date(Date.now() + ms).toISOString();
export const DAY_MS = 86_400_000;
