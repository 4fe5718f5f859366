import { CSRF_HEADER, SESSION_COOKIE } from "../../server/http/session-cookies";
import fs from "node:fs";
import path from "node:path";
import type { TestStack } from "./gateway";
import { ContractChecker } from "./openapi";

let contract: ContractChecker | undefined;
/**
 * Every answer a session gets on a path the API document declares is checked against it
 * (docs/openapi.json): the chain-backed routes' real successes (claims, withdrawals, sweeps, card
 * top-ups, receipts) are exercised by the tests that start a chain, and they check here that the
 * document declares what those routes answer. A path the document does not declare is not checked.
 */
export function assertDeclared(method: string, url: string, reply: Reply): void {
  contract ??= new ContractChecker(JSON.parse(fs.readFileSync(path.join(__dirname, "../../docs/openapi.json"), "utf8")));
  const problems = contract
    .problems(method, url, { status: reply.status, contentType: reply.headers.get("content-type"), body: reply.body })
    .filter((problem) => !problem.endsWith("no path of the document matches"));
  if (problems.length > 0) throw new Error(`the answer is not what docs/openapi.json declares: ${problems.join("; ")}`);
}

export interface Reply {
  status: number;
  headers: Headers;
  body: any;
}

/** A dashboard session of one account, and requests made with it (cookie and CSRF header). */
export interface TestSession {
  accountId: string;
  cookie: string;
  csrfToken: string;
  /** A JSON request with the session's cookie and CSRF token; `{ csrf: false }` leaves the token out. */
  request(method: string, path: string, body?: unknown, options?: { csrf?: boolean }): Promise<Reply>;
}

/** Sends a request to the stack and parses its JSON answer. */
export async function send(url: string, method: string, headers: Record<string, string>, body?: unknown): Promise<Reply> {
  const res = await fetch(url, {
    method,
    headers: body === undefined ? headers : { "content-type": "application/json", ...headers },
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    /* left as text */
  }
  return { status: res.status, headers: res.headers, body: parsed as any };
}

/** Wraps an existing session token of an account. */
export function sessionFor(stack: TestStack, accountId: string, token: string, csrfToken: string): TestSession {
  const cookie = `${SESSION_COOKIE}=${token}`;
  return {
    accountId,
    cookie,
    csrfToken,
    request: async (method, path, body, options = {}) => {
      const reply = await send(stack.url + path, method, { cookie, ...(options.csrf === false ? {} : { [CSRF_HEADER]: csrfToken }) }, body);
      assertDeclared(method, stack.url + path, reply);
      return reply;
    },
  };
}

/**
 * The header a browser adds to a POST from the dashboard's own page: its Origin. Sign-in
 * POSTs are refused without it (or Sec-Fetch-Site: same-origin), so a test that signs in
 * over HTTP sends it as a browser would.
 */
export function sameOrigin(stack: Pick<TestStack, "url">): Record<string, string> {
  return { origin: new URL(stack.url).origin };
}

/** Signs a person in by e-mail (the identity is taken as verified) and opens a session for them. */
export async function signedIn(stack: TestStack, email: string): Promise<TestSession> {
  const result = await stack.gw.sessions.signIn("email", email);
  if (!result.ok) throw new Error(`could not sign ${email} in: ${result.reason}`);
  const session = await stack.gw.sessions.issue(result.accountId);
  return sessionFor(stack, result.accountId, session.token, session.csrfToken);
}
