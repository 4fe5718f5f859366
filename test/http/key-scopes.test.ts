import { expect } from "chai";
import { keyOperation } from "../../server/http/auth";
import { OPERATIONS } from "../../server/http/contract/document";
import { SELF, takesApiKey } from "../../server/http/contract/common";
import { KEY_SCOPES, type KeyScope } from "../../server/identity/scopes";
import { type TestStack, startStack } from "../helpers/gateway";
import { assertDeclared, send as sendRaw } from "../helpers/session";

/** A request that reaches an operation: its path with ids filled in, and a body of the right kind (valid or not). */
function requestOf(op: { method: string; path: string }): { path: string; body: unknown } {
  const path = op.path
    .replace("{skillId}", "echo")
    .replace("{callId}", "0190a000-0000-7000-8000-000000000000")
    .replace("{id}", "0190a000-0000-7000-8000-000000000001");
  if (op.path === "/mcp") return { path, body: { jsonrpc: "2.0", id: 1, method: "tools/list" } };
  if (op.path === "/v1/call") return { path, body: { skill_id: "echo", input: {} } };
  if (op.method === "patch") return { path, body: { name: "renamed" } };
  return { path, body: op.method === "get" || op.method === "delete" ? undefined : {} };
}

/**
 * Every operation that takes an API key, against every scope: a key without the scope the operation declares is
 * refused with 403 scope_missing naming it, and a key with only that scope is not; an operation about the key itself
 * (`self`: GET /v1/key) is refused to no key, whatever scope it holds alone. One loop over the declared operations
 * (server/http/contract/), so a route added with a key is in this table as soon as it is declared.
 */
describe("API key scopes, on every operation that takes a key", () => {
  let stack: TestStack;
  const keys = new Map<string, string>();
  /** A key of the funded buyer's account holding exactly `scopes`. */
  const keyWith = async (scopes: readonly KeyScope[]): Promise<string> => {
    const name = [...scopes].sort().join(" ");
    if (!keys.has(name)) keys.set(name, (await stack.gw.keys.create(stack.buyerId, { scopes })).key);
    return keys.get(name)!;
  };
  before(async () => {
    stack = await startStack();
  });
  after(async () => {
    await stack.close();
  });

  const keyed = OPERATIONS.filter(takesApiKey);

  it("finds the operations that take a key, each declaring a scope of the vocabulary, or self", () => {
    expect(keyed.length).to.be.greaterThan(10);
    for (const op of keyed) expect([...KEY_SCOPES, SELF], `${op.method} ${op.path}`).to.include(op.scope);
    // Only a key has a self: an operation a session may call too names a scope.
    for (const op of keyed.filter((o) => o.scope === SELF)) expect(op.auth, `${op.method} ${op.path}`).to.equal("api_key");
    expect(keyed.filter((op) => op.scope === SELF).map((op) => `${op.method} ${op.path}`)).to.deep.equal(["get /v1/key"]);
  });

  it("refuses to make the key check of a route that is not declared, or declared without a key", () => {
    expect(() => keyOperation("GET /v1/not-declared")).to.throw(/not declared/);
    expect(() => keyOperation("GET /v1/me")).to.throw(/without an API key/);
    expect(keyOperation("GET /v1/keys").scope).to.equal("keys:manage");
    expect(keyOperation("GET /v1/balance").scope).to.equal("usage:read");
    expect(keyOperation("GET /v1/key").scope).to.equal(SELF);
  });

  for (const op of keyed) {
    const route = `${op.method.toUpperCase()} ${op.path}`;
    if (op.scope === SELF) {
      it(`${route} is about the key itself: a key holding any one scope alone is not refused it`, async () => {
        const { path, body } = requestOf(op);
        for (const scope of KEY_SCOPES) {
          const res = await send(stack, op.method, path, body, await keyWith([scope]));
          expect(res.status, `${scope}: ${JSON.stringify(res.body)}`).to.equal(200);
        }
      });
      continue;
    }
    // What a key lacking the scope holds: every other scope, less calls where calls alone reads the key's own calls.
    const lacking = KEY_SCOPES.filter((scope) => scope !== op.scope && !(op.ownCalls && scope === "calls"));

    it(`${route} needs ${op.scope}: 403 scope_missing without it, naming it; not refused with it alone`, async () => {
      const { path, body } = requestOf(op);
      const refused = await send(stack, op.method, path, body, await keyWith(lacking));
      expect(refused.status, JSON.stringify(refused.body)).to.equal(403);
      expect(refused.body).to.include({ success: false, code: "scope_missing" });
      expect(refused.body.error).to.include(op.scope);

      const allowed = await send(stack, op.method, path, body, await keyWith([op.scope]));
      expect(allowed.status, JSON.stringify(allowed.body)).to.not.equal(403);
      expect(allowed.body?.code).to.not.equal("scope_missing");
      if (op.ownCalls) {
        const own = await send(stack, op.method, path, body, await keyWith(["calls"]));
        expect(own.status, `calls alone reads its own calls: ${JSON.stringify(own.body)}`).to.not.equal(403);
      }
    });
  }
});

async function send(stack: TestStack, method: string, path: string, body: unknown, key: string) {
  if (method === "get") return stack.get(path, key);
  // /mcp answers a client that accepts both JSON and an event stream.
  const headers = path === "/mcp" ? { accept: "application/json, text/event-stream" } : undefined;
  if (method === "post") return stack.post(path, body, { key, headers });
  if (method === "patch" || method === "delete") {
    const reply = await sendRaw(stack.url + path, method.toUpperCase(), { authorization: `Bearer ${key}` }, body);
    assertDeclared(method.toUpperCase(), stack.url + path, reply);
    return reply;
  }
  throw new Error(`no ${method} route takes a key yet: teach this table to send one`);
}

describe("a key with calls alone reads its own calls, not its account's", () => {
  let stack: TestStack;
  let own: string;
  let ownId: string;
  let otherId: string;
  before(async () => {
    stack = await startStack();
    const created = await stack.gw.keys.create(stack.buyerId, { scopes: ["calls"] });
    own = created.key;
    ownId = created.record.id;
    const other = await stack.gw.keys.create(stack.buyerId, { scopes: ["calls"] });
    otherId = other.record.id;
    expect((await stack.post("/v1/call", { skill_id: "echo", input: {} }, { key: own })).status).to.equal(200);
    expect((await stack.post("/v1/call", { skill_id: "echo", input: {} }, { key: other.key })).status).to.equal(200);
  });
  after(async () => {
    await stack.close();
  });

  it("lists only its own calls on GET /v1/usage, and its own line on /v1/usage/keys", async () => {
    const usage = await stack.get("/v1/usage", own);
    expect(usage.status).to.equal(200);
    expect(usage.body.data.calls.map((c: { api_key_id: string }) => c.api_key_id)).to.deep.equal([ownId]);
    const byKey = await stack.get("/v1/usage/keys", own);
    expect(byKey.body.data.keys.map((k: { api_key_id: string }) => k.api_key_id)).to.deep.equal([ownId]);
    const daily = await stack.get("/v1/usage/daily?days=1", own);
    expect(daily.body.data.total.calls).to.equal(1);
    // The account's other key sees the two calls with usage:read.
    const reader = await stack.gw.keys.create(stack.buyerId, { scopes: ["usage:read"] });
    expect((await stack.get("/v1/usage", reader.key)).body.data.calls).to.have.length(2);
  });

  it("is refused another key's calls, and the account's balance and history, with 403 scope_missing naming usage:read", async () => {
    for (const path of [`/v1/usage?api_key_id=${otherId}`, `/v1/usage.csv?api_key_id=${otherId}`, "/v1/balance", "/v1/history"]) {
      const res = await stack.get(path, own);
      expect(res.status, path).to.equal(403);
      expect(res.body.code, path).to.equal("scope_missing");
      expect(res.body.error, path).to.include("usage:read");
    }
    expect((await stack.get(`/v1/usage?api_key_id=${ownId}`, own)).status).to.equal(200);
  });

  it("a keys:manage key never calls a skill", async () => {
    const manager = await stack.gw.keys.create(stack.buyerId, { scopes: ["keys:manage"] });
    const before = await stack.available();
    const res = await stack.post("/v1/call", { skill_id: "echo", input: {} }, { key: manager.key });
    expect(res.status).to.equal(403);
    expect(res.body).to.include({ code: "scope_missing" });
    expect(res.body.error).to.include("calls");
    expect(await stack.available()).to.equal(before);
  });
});
