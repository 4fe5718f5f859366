import { expect } from "chai";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { usdToMicros } from "../../server/ledger/money";
import { assertBalanced } from "../../server/ledger/invariants";
import { KEY_SCOPES } from "../../server/identity/scopes";
import { describeEachEngine } from "../helpers/engines";
import { type TestStack, startStack } from "../helpers/gateway";
import { type TestSession, signedIn } from "../helpers/session";

/** 12:00 UTC on a Sunday; the gateway's clock for spending periods. */
const NOON = Date.parse("2026-11-22T12:00:00.000Z");

/**
 * Budgets an agent can see (issue 24, section 2): GET /v1/key, the budget headers of every paid call (read in the
 * capture's transaction), and the numbers of a 402 in `details`, on both engines.
 */
describeEachEngine("budgets an agent can see", (engine) => {
  let stack: TestStack;
  let ada: TestSession;

  beforeEach(async () => {
    stack = await startStack({ engine: engine.name, gateway: { now: () => NOON } });
    ada = await signedIn(stack, "ada@example.com");
    await stack.gw.ledger.credit(ada.accountId, 10_000_000n, "dev_credit", "test");
    await stack.gw.db.durable();
  });
  afterEach(async () => {
    await stack.close();
  });

  /** A key of Ada's, made through the dashboard's API with `body`. */
  const createKey = async (body: Record<string, unknown>) => {
    const created = await ada.request("POST", "/v1/keys", { name: "agent", ...body });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    return created.body.data as { key: string; id: string } & Record<string, unknown>;
  };
  /** Ada's balance as GET /v1/balance answers it, in base units. */
  const balanceRead = async () => BigInt((await ada.request("GET", "/v1/balance")).body.data.available_base_units);

  describe("GET /v1/key", () => {
    it("answers the calling key's own record as GET /v1/keys lists it, what remains of its limit and the account's balance", async () => {
      const expiresAt = "2027-01-31T00:00:00.000Z";
      const { key, id } = await createKey({
        spend_limit_usd: "0.0025",
        spend_limit_period: "day",
        scopes: ["calls"],
        allowed_skills: ["echo"],
        expires_at: expiresAt,
      });
      expect((await stack.post("/v1/call", { skill_id: "echo", input: {} }, { key })).status).to.equal(200);

      const own = await stack.get("/v1/key", key);
      expect(own.status, JSON.stringify(own.body)).to.equal(200);
      expect(own.headers.get("cache-control")).to.equal("no-store");
      const listed = ((await ada.request("GET", "/v1/keys")).body.data as { id: string }[]).find((k) => k.id === id)!;
      const { remaining_usd, remaining_base_units, available_usd, available_base_units, ...record } = own.body.data;
      expect(record).to.deep.equal(listed);
      expect(record).to.deep.include({
        id,
        name: "agent",
        scopes: ["calls"],
        allowed_skills: ["echo"],
        expires_at: expiresAt,
        spend_limit_usd: 0.0025,
        spend_limit_period: "day",
        spent_usd: 0.001,
        resets_at: "2026-11-23T00:00:00.000Z",
      });
      expect(key.startsWith(record.prefix)).to.equal(true);
      expect({ remaining_usd, remaining_base_units }).to.deep.equal({ remaining_usd: 0.0015, remaining_base_units: "1500" });
      expect(available_base_units).to.equal((await balanceRead()).toString());
      expect(available_usd).to.equal(9.999);
    });

    it("is read by a key whatever its scopes, and says nothing of another key", async () => {
      const other = await createKey({ spend_limit_usd: "1", spend_limit_period: "total" });
      for (const scope of KEY_SCOPES) {
        const { key, id } = await createKey({ scopes: [scope] });
        const own = await stack.get("/v1/key", key);
        expect(own.status, `${scope}: ${JSON.stringify(own.body)}`).to.equal(200);
        expect(own.body.data).to.deep.include({ id, scopes: [scope], spend_limit_usd: null, remaining_usd: null, resets_at: null });
        expect(JSON.stringify(own.body)).to.not.contain(other.id);
      }
    });

    it("says 0 remains under a limit lowered below what was spent, never less", async () => {
      const { key, id } = await createKey({ spend_limit_usd: "0.002", spend_limit_period: "month" });
      for (let i = 0; i < 2; i++) expect((await stack.post("/v1/call", { skill_id: "echo", input: {} }, { key })).status).to.equal(200);
      expect((await ada.request("PATCH", `/v1/keys/${id}`, { spend_limit_usd: "0.001" })).status).to.equal(200);
      expect((await stack.get("/v1/key", key)).body.data).to.deep.include({
        spent_usd: 0.002,
        remaining_usd: 0,
        remaining_base_units: "0",
      });
    });

    it("refuses no key, a wrong key and an expired key with 401, and a dashboard session without a key", async () => {
      expect((await stack.get("/v1/key", null)).status).to.equal(401);
      expect((await stack.get("/v1/key", "atom_11111111111111111111111111111111")).body.code).to.equal("unauthorized");
      const expired = await stack.gw.keys.create(ada.accountId, { expiresAtMs: NOON - 1 });
      expect((await stack.get("/v1/key", expired.key)).body.code).to.equal("key_expired");
      expect((await ada.request("GET", "/v1/key")).status).to.equal(401);
    });
  });

  describe("the budget headers of a paid call", () => {
    for (const [endpoint, send] of [
      ["POST /v1/call", (s: TestStack, key: string) => s.post("/v1/call", { skill_id: "echo", input: { n: 1 } }, { key })],
      ["POST /v1/skills/:skillId/call", (s: TestStack, key: string) => s.post("/v1/skills/echo/call", { n: 1 }, { key })],
    ] as const) {
      it(`${endpoint}: X-Balance-Available and X-Key-Spend-Remaining say what a balance read and GET /v1/key say after it`, async () => {
        const { key } = await createKey({ spend_limit_usd: "0.005", spend_limit_period: "day" });
        for (const expected of [
          { available: "9.999", remaining: "0.004" },
          { available: "9.998", remaining: "0.003" },
        ]) {
          const res = await send(stack, key);
          expect(res.status).to.equal(200);
          expect(res.headers.get("x-balance-available")).to.equal(expected.available);
          expect(res.headers.get("x-key-spend-remaining")).to.equal(expected.remaining);
          expect(usdToMicros(res.headers.get("x-balance-available")!)).to.equal(await balanceRead());
          const own = (await stack.get("/v1/key", key)).body.data;
          expect(usdToMicros(res.headers.get("x-key-spend-remaining")!).toString()).to.equal(own.remaining_base_units);
          expect(usdToMicros(res.headers.get("x-balance-available")!).toString()).to.equal(own.available_base_units);
        }
      });
    }

    it("has no X-Key-Spend-Remaining for a key without a limit, and neither header on a call that charged nothing", async () => {
      const { key } = await createKey({});
      const paid = await stack.post("/v1/call", { skill_id: "echo", input: {} }, { key });
      expect(paid.headers.get("x-balance-available")).to.equal("9.999");
      expect(paid.headers.has("x-key-spend-remaining")).to.equal(false);
      const failed = await stack.post("/v1/call", { skill_id: "fail", input: {} }, { key });
      expect(failed.status).to.equal(502);
      expect(failed.headers.has("x-balance-available")).to.equal(false);
      await stack.addSkill("free", "/echo", { priceMicros: 0n });
      const free = await stack.post("/v1/call", { skill_id: "free", input: {} }, { key });
      expect(free.status).to.equal(200);
      expect(free.headers.has("x-balance-available")).to.equal(false);
    });

    it("puts the same numbers in a hosted MCP tool result's _meta", async () => {
      const { key } = await createKey({ spend_limit_usd: "1", spend_limit_period: "total" });
      const client = await connect(stack, key);
      try {
        const result = (await client.callTool({ name: "echo", arguments: { n: 1 } })) as CallToolResult;
        expect(result.isError).to.equal(undefined);
        expect(result._meta).to.deep.equal({ balance_available: "9.999", key_spend_remaining: "0.999" });
        expect(usdToMicros(result._meta!.balance_available as string)).to.equal(await balanceRead());
      } finally {
        await client.close();
      }
    });
  });

  describe("the numbers of a 402, in details", () => {
    it("insufficient_balance: the price and what is available, on both endpoints and on MCP", async () => {
      const poor = await stack.addBuyer("0.0005");
      const details = { price: 0.001, available: 0.0005 };
      const general = await stack.post("/v1/call", { skill_id: "echo", input: {} }, { key: poor.key });
      expect(general.status).to.equal(402);
      expect(general.body).to.deep.include({ success: false, code: "insufficient_balance", details });
      expect(general.body.error).to.equal("Insufficient balance: this call costs $0.001 and $0.0005 is available. Add funds.");
      const perSkill = await stack.post("/v1/skills/echo/call", {}, { key: poor.key });
      expect(perSkill.body).to.deep.include({ code: "insufficient_balance", details });
      const client = await connect(stack, poor.key);
      try {
        const result = (await client.callTool({ name: "echo", arguments: {} })) as CallToolResult;
        expect(result.isError).to.equal(true);
        expect(result.structuredContent).to.deep.include({ code: "insufficient_balance", details });
      } finally {
        await client.close();
      }
      expect(await stack.available(poor.accountId)).to.equal(500n);
    });

    it("key_spend_limit_reached: the price, what is available, the limit, what is spent, its period and when it resets", async () => {
      const { key } = await createKey({ spend_limit_usd: "0.0015", spend_limit_period: "day" });
      expect((await stack.post("/v1/call", { skill_id: "echo", input: {} }, { key })).status).to.equal(200);
      const refused = await stack.post("/v1/skills/echo/call", {}, { key });
      expect(refused.status).to.equal(402);
      expect(refused.body).to.deep.include({
        success: false,
        code: "key_spend_limit_reached",
        details: { price: 0.001, available: 9.999, limit: 0.0015, spent: 0.001, period: "day", resets_at: "2026-11-23T00:00:00.000Z" },
      });
      expect(refused.body.metadata).to.deep.equal({
        skillId: "echo",
        cost: 0,
        responseTime: refused.body.metadata.responseTime,
        callId: refused.headers.get("x-call-id"),
      });

      const { key: forever } = await createKey({ spend_limit_usd: "0.0005", spend_limit_period: "total" });
      const never = await stack.post("/v1/call", { skill_id: "echo", input: {} }, { key: forever });
      expect(never.body.details).to.deep.equal({
        price: 0.001,
        available: 9.999,
        limit: 0.0005,
        spent: 0,
        period: "total",
        resets_at: null,
      });
      await assertBalanced(stack.gw.db);
    });
  });
});

/** The official MCP SDK's client, connected to the hosted MCP server with `key`. */
async function connect(stack: TestStack, key: string): Promise<Client> {
  const client = new Client({ name: "budgets-test", version: "1.0.0" });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${stack.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${key}` } } }),
  );
  return client;
}
