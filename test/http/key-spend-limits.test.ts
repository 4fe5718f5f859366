import { expect } from "chai";
import { assertBalanced } from "../../server/ledger/invariants";
import { type TestStack, startStack } from "../helpers/gateway";
import { type TestSession, signedIn } from "../helpers/session";

/** 12:00 UTC on a Sunday; the gateway's clock for spending periods is `clock`, moved by the tests. */
const NOON = Date.parse("2026-11-22T12:00:00.000Z");
const MIDNIGHT = Date.parse("2026-11-23T00:00:00.000Z");

describe("API keys' spending limits (/v1/keys, and calls under them)", () => {
  let stack: TestStack;
  let ada: TestSession;
  let clock = NOON;

  beforeEach(async () => {
    clock = NOON;
    stack = await startStack({ gateway: { now: () => clock } });
    ada = await signedIn(stack, "ada@example.com");
    await stack.gw.ledger.credit(ada.accountId, 10_000_000n, "dev_credit", "test");
    await stack.gw.db.durable();
  });
  afterEach(async () => {
    await stack.close();
  });

  /** A key of Ada's made through the API with `body`; its whole key and its id. */
  const createKey = async (body: Record<string, unknown>) => {
    const created = await ada.request("POST", "/v1/keys", { name: "agent", ...body });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    return created.body.data as { key: string; id: string } & Record<string, unknown>;
  };
  /** The echo skill (0.001 USD a call) called with `key`. */
  const callEcho = (key: string, skill = "echo") => stack.post("/v1/call", { skill_id: skill, input: { n: 1 } }, { key });
  const listed = async (id: string) => ((await ada.request("GET", "/v1/keys")).body.data as { id: string }[]).find((k) => k.id === id)!;
  const limitFields = (view: Record<string, unknown>) => {
    const { spend_limit_usd, spend_limit_base_units, spend_limit_period, spent_usd, spent_base_units, resets_at } = view;
    return { spend_limit_usd, spend_limit_base_units, spend_limit_period, spent_usd, spent_base_units, resets_at };
  };

  it("takes a limit with a new key, lists what it spent and when it resets, and refuses the call that would pass it", async () => {
    const { key, id, ...created } = await createKey({ spend_limit_usd: "0.0025", spend_limit_period: "day" });
    const fresh = {
      spend_limit_usd: 0.0025,
      spend_limit_base_units: "2500",
      spend_limit_period: "day",
      spent_usd: 0,
      spent_base_units: "0",
      resets_at: "2026-11-23T00:00:00.000Z",
    };
    expect(limitFields(created)).to.deep.equal(fresh);
    expect(limitFields(await listed(id))).to.deep.equal(fresh);

    for (let i = 0; i < 2; i++) expect((await callEcho(key)).status).to.equal(200);
    expect(limitFields(await listed(id))).to.deep.include({ spent_usd: 0.002, spent_base_units: "2000" });

    const balance = await stack.available(ada.accountId);
    const refused = await callEcho(key);
    expect(refused.status).to.equal(402);
    expect(refused.body).to.deep.include({
      success: false,
      code: "key_spend_limit_reached",
      error:
        "This key's spending limit of $0.0025 per day is reached ($0.002 spent, this call costs $0.001); it resets at 2026-11-23T00:00:00Z.",
    });
    expect(refused.body.metadata).to.include({ price_paid: 0 });
    const perSkill = await stack.post("/v1/skills/echo/call", { n: 1 }, { key });
    expect([perSkill.status, perSkill.body.code, perSkill.body.metadata.cost]).to.deep.equal([402, "key_spend_limit_reached", 0]);
    // Never forwarded, never charged, no hold left open; the calls log says why.
    expect(stack.backend.hits.get("/echo")).to.equal(2);
    expect(await stack.available(ada.accountId)).to.equal(balance);
    expect((await stack.gw.ledger.balance(ada.accountId)).heldMicros).to.equal(0n);
    expect((await stack.gw.calls.recent(ada.accountId, 10)).map((c) => c.outcome)).to.deep.equal([
      "key_spend_limit_reached",
      "key_spend_limit_reached",
      "success",
      "success",
    ]);
    // Another key of the same account is not limited by this one's count.
    const other = await createKey({});
    expect((await callEcho(other.key)).status).to.equal(200);
    await assertBalanced(stack.gw.db);
  });

  it("starts the count again at 00:00 UTC, and shows each period's end", async () => {
    const { key, id } = await createKey({ spend_limit_usd: 0.001, spend_limit_period: "day" });
    expect((await callEcho(key)).status).to.equal(200);
    clock = MIDNIGHT - 1;
    expect((await callEcho(key)).body.code).to.equal("key_spend_limit_reached");
    clock = MIDNIGHT;
    expect(limitFields(await listed(id))).to.deep.include({ spent_usd: 0, resets_at: "2026-11-24T00:00:00.000Z" });
    expect((await callEcho(key)).status).to.equal(200);
    expect(limitFields(await listed(id))).to.deep.include({ spent_usd: 0.001, resets_at: "2026-11-24T00:00:00.000Z" });

    const monthly = await createKey({ spend_limit_usd: "1", spend_limit_period: "month" });
    expect(monthly.resets_at).to.equal("2026-12-01T00:00:00.000Z");
    const total = await createKey({ spend_limit_usd: "1", spend_limit_period: "total" });
    expect(limitFields(total)).to.deep.include({ spend_limit_period: "total", resets_at: null });
  });

  it("counts nothing for a call that fails or is refused by the skill, and nothing for one refused before the hold", async () => {
    const { key, id } = await createKey({ spend_limit_usd: "0.001", spend_limit_period: "month" });
    const balance = await stack.available(ada.accountId);
    expect((await callEcho(key, "fail")).status).to.equal(502);
    expect((await callEcho(key, "reject")).status).to.equal(400);
    expect((await callEcho(key, "nope")).status).to.equal(404);
    expect(limitFields(await listed(id))).to.deep.include({ spent_usd: 0, spent_base_units: "0" });
    expect(await stack.available(ada.accountId)).to.equal(balance);
    // The whole limit is still there for a call that succeeds.
    expect((await callEcho(key)).status).to.equal(200);
    expect(limitFields(await listed(id))).to.deep.include({ spent_usd: 0.001 });
    await assertBalanced(stack.gw.db);
  });

  it("changes, lowers, raises and removes a limit through PATCH /v1/keys/:id, in effect at the next call", async () => {
    const { key, id } = await createKey({});
    const patch = (body: unknown) => ada.request("PATCH", `/v1/keys/${id}`, body);

    // A limit on a key that had none needs its period.
    const noPeriod = await patch({ spend_limit_usd: "0.003" });
    expect([noPeriod.status, noPeriod.body.code]).to.deep.equal([400, "invalid_request"]);
    expect(noPeriod.body.error).to.match(/spend_limit_period is required/);

    const set = await patch({ spend_limit_usd: "0.003", spend_limit_period: "day" });
    expect(set.status).to.equal(200);
    expect(set.body.data).to.deep.include({ id, spend_limit_usd: 0.003, spend_limit_period: "day", spent_usd: 0 });
    for (let i = 0; i < 2; i++) expect((await callEcho(key)).status).to.equal(200);

    // Lowered below what was spent: refused at once, until the reset. The period stays when left out.
    const lowered = await patch({ spend_limit_usd: "0.001" });
    expect(lowered.body.data).to.deep.include({ spend_limit_usd: 0.001, spend_limit_period: "day", spent_usd: 0.002 });
    expect((await callEcho(key)).body.error).to.match(/^This key's spending limit of \$0\.001 per day is reached \(\$0\.002 spent/);

    // Raised: allowed at once.
    await patch({ spend_limit_usd: 0.004 });
    expect((await callEcho(key)).status).to.equal(200);
    expect((await callEcho(key)).status).to.equal(200);
    expect((await callEcho(key)).status).to.equal(402);

    // A new period starts its count at zero.
    const monthly = await patch({ spend_limit_usd: "0.001", spend_limit_period: "month" });
    expect(monthly.body.data).to.deep.include({ spend_limit_period: "month", spent_usd: 0, resets_at: "2026-12-01T00:00:00.000Z" });
    expect((await callEcho(key)).status).to.equal(200);
    expect((await callEcho(key)).status).to.equal(402);

    // Removed: no limit, nothing counted, calls go through.
    const removed = await patch({ spend_limit_usd: null });
    expect(limitFields(removed.body.data)).to.deep.equal({
      spend_limit_usd: null,
      spend_limit_base_units: null,
      spend_limit_period: null,
      spent_usd: null,
      spent_base_units: null,
      resets_at: null,
    });
    expect((await callEcho(key)).status).to.equal(200);
    expect(limitFields(await listed(id)).spend_limit_usd).to.equal(null);
    await assertBalanced(stack.gw.db);
  });

  it("refuses a limit that is not a positive amount of at most 6 decimals, or an unknown period, with 400 and nothing made", async () => {
    const bad: unknown[] = [
      { spend_limit_usd: -1, spend_limit_period: "day" },
      { spend_limit_usd: "-0.50", spend_limit_period: "day" },
      { spend_limit_usd: 0, spend_limit_period: "day" },
      { spend_limit_usd: "0.000000", spend_limit_period: "day" },
      { spend_limit_usd: "1.0000001", spend_limit_period: "day" },
      { spend_limit_usd: 0.1 + 0.2, spend_limit_period: "day" },
      { spend_limit_usd: 1e-7, spend_limit_period: "day" },
      { spend_limit_usd: 1e21, spend_limit_period: "day" },
      { spend_limit_usd: "1000000.000001", spend_limit_period: "day" },
      { spend_limit_usd: "5 USD", spend_limit_period: "day" },
      { spend_limit_usd: true, spend_limit_period: "day" },
      { spend_limit_usd: { usd: 5 }, spend_limit_period: "day" },
      { spend_limit_usd: "5", spend_limit_period: "week" },
      { spend_limit_usd: "5", spend_limit_period: 1 },
      { spend_limit_usd: "5" },
      { spend_limit_period: "day" },
    ];
    for (const body of bad) {
      const reply = await ada.request("POST", "/v1/keys", body);
      expect(reply.status, JSON.stringify(body)).to.equal(400);
      expect(reply.body, JSON.stringify(body)).to.include({ success: false, code: "invalid_request" });
      expect(reply.body.error, JSON.stringify(body)).to.match(/^spend_limit_(usd|period) /);
    }
    expect((await ada.request("GET", "/v1/keys")).body.data).to.deep.equal([]);

    const { id } = await createKey({ spend_limit_usd: "1000000", spend_limit_period: "total" });
    for (const body of [
      {},
      { spend_limit_usd: -1 },
      { spend_limit_usd: "0.1234567" },
      { spend_limit_usd: 2, spend_limit_period: "year" },
    ]) {
      const reply = await ada.request("PATCH", `/v1/keys/${id}`, body);
      expect([reply.status, reply.body.code], JSON.stringify(body)).to.deep.equal([400, "invalid_request"]);
    }
    expect((await ada.request("PATCH", `/v1/keys/${id}`, {})).body.error).to.equal(
      "Send at least one field to change: name, spend_limit_usd, spend_limit_period, scopes, allowed_skills, expires_at, metadata.",
    );
    expect(limitFields(await listed(id))).to.deep.include({ spend_limit_usd: 1_000_000, spend_limit_period: "total" });
  });

  it("answers 404 for another account's key or a revoked one, and needs the session's CSRF token", async () => {
    const { id } = await createKey({});
    const bob = await signedIn(stack, "bob@example.com");
    const body = { spend_limit_usd: "1", spend_limit_period: "day" };
    expect((await bob.request("PATCH", `/v1/keys/${id}`, body)).status).to.equal(404);
    expect((await ada.request("PATCH", `/v1/keys/${id}`, body, { csrf: false })).status).to.equal(403);
    expect(limitFields(await listed(id)).spend_limit_usd).to.equal(null);
    await ada.request("DELETE", `/v1/keys/${id}`);
    expect((await ada.request("PATCH", `/v1/keys/${id}`, body)).status).to.equal(404);
    // An id that is no key's shape never reaches the database (PostgreSQL refuses a NUL byte in TEXT: a 500).
    expect((await ada.request("PATCH", "/v1/keys/%00", body)).status).to.equal(404);
    expect((await ada.request("DELETE", "/v1/keys/not-a-key")).status).to.equal(404);
  });

  it("says so when one call costs more than the whole limit: waiting for the reset would not help", async () => {
    const { key } = await createKey({ spend_limit_usd: "0.0005", spend_limit_period: "day" });
    const refused = await callEcho(key);
    expect(refused.status).to.equal(402);
    expect(refused.body.code).to.equal("key_spend_limit_reached");
    expect(refused.body.error).to.match(/more than this key's whole spending limit of \$0\.0005 per day: raise the limit/);
  });
});
