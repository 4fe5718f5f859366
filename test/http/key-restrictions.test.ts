import { expect } from "chai";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { ApiKeys } from "../../server/identity/api-keys";
import { assertBalanced } from "../../server/ledger/invariants";
import { type TestStack, startStack } from "../helpers/gateway";
import { type TestSession, signedIn } from "../helpers/session";

/** Checks that `action` held, charged and logged nothing for the buyer. */
async function expectNothingHeldOrCharged(stack: TestStack, action: () => Promise<unknown>): Promise<void> {
  const count = (sql: string) => stack.gw.db.value<bigint>(sql, [stack.buyerId]);
  const before = [await stack.available(), await stack.earned(), await stack.fees()];
  const holds = await count("SELECT COUNT(*) FROM holds WHERE account_id = ?");
  const calls = await count("SELECT COUNT(*) FROM calls WHERE account_id = ?");
  await action();
  await stack.gw.db.durable();
  expect([await stack.available(), await stack.earned(), await stack.fees()]).to.deep.equal(before);
  expect(await count("SELECT COUNT(*) FROM holds WHERE account_id = ?")).to.equal(holds);
  expect(await count("SELECT COUNT(*) FROM calls WHERE account_id = ?")).to.equal(calls);
  await assertBalanced(stack.gw.db);
}

describe("a key's allowed_skills", () => {
  let stack: TestStack;
  let echoOnly: string;
  let client: Client | undefined;
  before(async () => {
    stack = await startStack();
    echoOnly = (await stack.gw.keys.create(stack.buyerId, { allowedSkills: ["echo"] })).key;
  });
  afterEach(async () => {
    await client?.close();
    client = undefined;
  });
  after(async () => {
    await stack.close();
  });

  const connect = async (query = "") => {
    client = new Client({ name: "allowed-skills-test", version: "1.0.0" });
    const transport = new StreamableHTTPClientTransport(new URL(`${stack.url}/mcp${query}`), {
      requestInit: { headers: { authorization: `Bearer ${echoOnly}` } },
    });
    await client.connect(transport);
    return client;
  };

  it("calls the skills it names, by slug or by UUID", async () => {
    expect((await stack.post("/v1/call", { skill_id: "echo", input: {} }, { key: echoOnly })).status).to.equal(200);
    const echo = stack.gw.skills.resolve("echo")!;
    expect((await stack.post(`/v1/skills/${echo.id}/call`, {}, { key: echoOnly })).status).to.equal(200);
  });

  it("refuses another skill with 403 skill_not_allowed on POST /v1/call, holding and charging nothing", async () => {
    await expectNothingHeldOrCharged(stack, async () => {
      const res = await stack.post("/v1/call", { skill_id: "fail", input: {} }, { key: echoOnly });
      expect(res.status).to.equal(403);
      expect(res.body).to.include({ success: false, code: "skill_not_allowed" });
      expect(res.body.error).to.include('"fail"');
    });
  });

  it("refuses another skill with 403 skill_not_allowed on POST /v1/skills/:id/call, holding and charging nothing", async () => {
    await expectNothingHeldOrCharged(stack, async () => {
      const res = await stack.post("/v1/skills/fail/call", {}, { key: echoOnly });
      expect(res.status).to.equal(403);
      expect(res.body.code).to.equal("skill_not_allowed");
    });
  });

  it("lists exactly the allowed skills on MCP, refuses tools/call of another, and lets ?skills= narrow but never widen", async () => {
    const mcp = await connect();
    expect((await mcp.listTools()).tools.map((t) => t.name)).to.deep.equal(["echo"]);
    await expectNothingHeldOrCharged(stack, async () => {
      const result = (await mcp.callTool({ name: "fail", arguments: {} })) as CallToolResult;
      expect(result.isError).to.equal(true);
      expect(result.structuredContent).to.include({ code: "skill_not_allowed" });
    });
    const widened = await stack.post("/mcp?skills=echo,fail", { jsonrpc: "2.0", id: 1, method: "tools/list" }, { key: echoOnly });
    expect(widened.status).to.equal(403);
    expect(widened.body.code).to.equal("skill_not_allowed");
    await client!.close();
    const narrowed = await connect("?skills=echo");
    expect((await narrowed.listTools()).tools.map((t) => t.name)).to.deep.equal(["echo"]);
  });
});

describe("a key's expires_at", () => {
  let stack: TestStack;
  before(async () => {
    stack = await startStack();
  });
  after(async () => {
    await stack.close();
  });

  it("answers 401 key_expired once it has passed, on the call path and the read routes", async () => {
    const expired = (await stack.gw.keys.create(stack.buyerId, { expiresAtMs: Date.now() - 1, scopes: ["calls", "usage:read"] })).key;
    for (const res of [
      await stack.post("/v1/call", { skill_id: "echo", input: {} }, { key: expired }),
      await stack.get("/v1/balance", expired),
    ]) {
      expect(res.status).to.equal(401);
      expect(res.body).to.include({ success: false, code: "key_expired" });
    }
  });

  it("stops a key that expires while its authentication is cached, at its expiry", async () => {
    const expiresAtMs = Date.now() + 1_500;
    const key = (await stack.gw.keys.create(stack.buyerId, { expiresAtMs })).key;
    // This call caches the key (for 5 s by default), well past its expiry.
    expect((await stack.post("/v1/call", { skill_id: "echo", input: {} }, { key })).status).to.equal(200);
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, expiresAtMs - Date.now()) + 50));
    const before = await stack.available();
    const res = await stack.post("/v1/call", { skill_id: "echo", input: {} }, { key });
    expect(res.status).to.equal(401);
    expect(res.body.code).to.equal("key_expired");
    expect(await stack.available()).to.equal(before);
  });

  it("ApiKeys.check reads the expiry on every use, cached or not", async () => {
    const keys = new ApiKeys(stack.gw.db, 60_000);
    const t0 = Date.now();
    const { key } = await keys.create(stack.buyerId, { expiresAtMs: t0 + 10_000 });
    expect((await keys.check(key, t0)).kind).to.equal("valid");
    expect((await keys.check(key, t0 + 9_999)).kind).to.equal("valid");
    expect((await keys.check(key, t0 + 10_000)).kind).to.equal("expired");
    expect(await keys.authenticate(key, t0 + 10_000)).to.equal(undefined);
  });
});

describe("POST /v1/keys with scopes, allowed_skills and expires_at", () => {
  let stack: TestStack;
  let ada: TestSession;
  before(async () => {
    stack = await startStack();
    ada = await signedIn(stack, "ada@example.com");
  });
  after(async () => {
    await stack.close();
  });

  it("creates a key with what it asks for, shows it, and lists it", async () => {
    const expiresAt = new Date(Date.now() + 86_400_000).toISOString();
    const created = await ada.request("POST", "/v1/keys", {
      name: "agent",
      scopes: ["calls", "usage:read"],
      allowed_skills: ["echo", stack.gw.skills.resolve("fail")!.id.toUpperCase()],
      expires_at: expiresAt,
    });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const expected = {
      scopes: ["calls", "usage:read"],
      allowed_skills: ["echo", stack.gw.skills.resolve("fail")!.id],
      expires_at: expiresAt,
    };
    expect(created.body.data).to.deep.include(expected);
    const listed = (await ada.request("GET", "/v1/keys")).body.data.find((k: { id: string }) => k.id === created.body.data.id);
    expect(listed).to.deep.include(expected);
  });

  it("holds the dashboard's try-it form to the key it picks: its scope, its allowed skills, its expiry", async () => {
    await stack.gw.ledger.credit(ada.accountId, 1_000_000n, "dev_credit", "test");
    const make = async (body: Record<string, unknown>) => (await ada.request("POST", "/v1/keys", body)).body.data.id as string;
    const manager = await make({ scopes: ["keys:manage"] });
    const echoOnly = await make({ allowed_skills: ["echo"] });
    const soon = await stack.gw.keys.create(ada.accountId, { expiresAtMs: Date.now() - 1 });
    const tried = (skill: string, keyId: string) => ada.request("POST", `/v1/skills/${skill}/try`, { key_id: keyId, input: {} });
    const before = await stack.available(ada.accountId);
    expect((await tried("echo", manager)).body.code).to.equal("scope_missing");
    expect((await tried("fail", echoOnly)).body.code).to.equal("skill_not_allowed");
    expect((await tried("echo", soon.record.id)).body.code).to.equal("key_expired");
    expect(await stack.available(ada.accountId)).to.equal(before);
    expect((await tried("echo", echoOnly)).status).to.equal(200);
  });

  const refused: Array<[string, Record<string, unknown>, string]> = [
    ["an unknown scope", { scopes: ["calls", "admin"] }, "scopes"],
    ["a scope twice", { scopes: ["calls", "calls"] }, "scopes"],
    ["no scope", { scopes: [] }, "scopes"],
    ["scopes that are not a list", { scopes: "calls" }, "scopes"],
    ["a skill ref of the wrong shape", { allowed_skills: ["Not A Slug"] }, "allowed_skills"],
    ["a skill that is not listed", { allowed_skills: ["no-such-skill"] }, "no-such-skill"],
    ["one skill named twice", { allowed_skills: ["echo", "echo"] }, "allowed_skills"],
    ["too many skills", { allowed_skills: Array.from({ length: 101 }, (_, i) => `s${i}`) }, "allowed_skills"],
    ["an empty list of skills", { allowed_skills: [] }, "allowed_skills"],
    ["an expiry in the past", { expires_at: "2020-01-01T00:00:00Z" }, "future"],
    ["an expiry too far away", { expires_at: new Date(Date.now() + 400 * 86_400_000).toISOString() }, "366 days"],
    ["an expiry that is not a time", { expires_at: "tomorrow" }, "expires_at"],
  ];
  for (const [what, body, mention] of refused) {
    it(`refuses ${what} with 400 invalid_request, and makes no key`, async () => {
      const before = (await stack.gw.keys.listForAccount(ada.accountId)).length;
      const res = await ada.request("POST", "/v1/keys", body);
      expect(res.status, JSON.stringify(res.body)).to.equal(400);
      expect(res.body.code).to.equal("invalid_request");
      expect(res.body.error).to.include(mention);
      expect(await stack.gw.keys.listForAccount(ada.accountId)).to.have.length(before);
    });
  }
});
