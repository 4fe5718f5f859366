import { expect } from "chai";
import { OPERATIONS } from "../../server/http/contract/document";
import type { Operation } from "../../server/http/contract/common";
import { type TestStack, startStack } from "../helpers/gateway";
import { type Reply, type TestSession, send, signedIn } from "../helpers/session";

/**
 * One loop over every operation the contract declares (server/http/contract/document.ts OPERATIONS), not a test per
 * route: whatever credential an operation needs, a request without it, or with a wrong one, is refused before the
 * route does anything, in the spec's envelope.
 *   - a session route: 401 without a session; a state-changing one (not GET): 403 with the session but without its
 *     CSRF token;
 *   - a key route: 401 for a wrong key and for none;
 *   - an account route (a key or a session): 401 for a wrong key and for nothing; a state-changing one: 403 with a
 *     session but without its CSRF token.
 * Path parameters are filled with an id nobody has: a route that looked anything up before checking the credential
 * would answer 404 instead, and fail here.
 */

/** A well-formed id (a UUID) that names nothing. */
const NOBODY = "00000000-0000-7000-8000-000000000000";
const WRONG_KEY = "atom_thisKeyDoesNotExist1234567890";

const pathOf = (op: Operation) => op.path.replace(/\{[^}]+\}/g, NOBODY);
const changesState = (op: Operation) => op.method !== "get";
const label = (op: Operation) => `${op.method.toUpperCase()} ${op.path}`;

/** A body every JSON route parses without complaint before the credential is checked, or none for a GET. */
const bodyOf = (op: Operation) => (op.method === "get" || op.method === "delete" ? undefined : {});

function expectRefused(reply: Reply, status: 401 | 403): void {
  expect(reply.status, JSON.stringify(reply.body)).to.equal(status);
  expect(reply.body.success).to.equal(false);
  expect(reply.body.error).to.be.a("string").and.not.equal("");
}

describe("every operation refuses a missing or wrong credential (one loop over the contract)", function () {
  this.timeout(120_000);
  let stack: TestStack;
  let person: TestSession;

  const request = (op: Operation, headers: Record<string, string>) =>
    send(stack.url + pathOf(op), op.method.toUpperCase(), { accept: "application/json", ...headers }, bodyOf(op));

  before(async () => {
    // Refusals for missing credentials are not what this suite is about: a generous per-address budget.
    stack = await startStack({ config: { rateLimitPerMin: 1_000_000 } });
    person = await signedIn(stack, "credentials@example.com");
  });
  after(async () => stack?.close());

  const byAuth = (auth: Operation["auth"]) => OPERATIONS.filter((op) => op.auth === auth);

  it("covers operations of each kind of credential", () => {
    expect(byAuth("session").length).to.be.greaterThan(5);
    expect(byAuth("api_key").length).to.be.greaterThan(2);
    expect(byAuth("account").length).to.be.greaterThan(5);
  });

  describe("routes that need a dashboard session", () => {
    for (const op of byAuth("session")) {
      it(`${label(op)}: 401 without a session${changesState(op) ? ", 403 without the CSRF token" : ""}`, async () => {
        expectRefused(await request(op, {}), 401);
        if (changesState(op)) expectRefused(await request(op, { cookie: person.cookie }), 403);
      });
    }
  });

  describe("routes that need an API key", () => {
    for (const op of byAuth("api_key")) {
      it(`${label(op)}: 401 for a wrong key and for none`, async () => {
        expectRefused(await request(op, { authorization: `Bearer ${WRONG_KEY}` }), 401);
        expectRefused(await request(op, {}), 401);
      });
    }
  });

  describe("routes that take a key or a session", () => {
    for (const op of byAuth("account")) {
      it(`${label(op)}: 401 for a wrong key and for nothing${changesState(op) ? ", 403 for a session without the CSRF token" : ""}`, async () => {
        expectRefused(await request(op, { authorization: `Bearer ${WRONG_KEY}` }), 401);
        expectRefused(await request(op, {}), 401);
        if (changesState(op)) expectRefused(await request(op, { cookie: person.cookie }), 403);
      });
    }
  });
});
