import { expect } from "chai";
import { LEGACY_SCOPES } from "../../server/identity/scopes";
import { assertBalanced } from "../../server/ledger/invariants";
import { describeEachEngine } from "../helpers/engines";
import { type TestStack, startStack } from "../helpers/gateway";
import { type ChargingBackend, startChargingBackend } from "../helpers/charging-backend";

/**
 * Usage-based prices (issue 27 §1): a usage-priced skill's call holds its max_price, is charged what its backend
 * reports in a signed X-Skill-Charge (0 allowed), and gives the rest back in the capture's transaction. A report that
 * is missing, unsigned, wrongly signed, malformed or above max_price is a 502 skill_bad_charge, charged to nobody.
 */

/** The skill under test: `metered`, at most $0.01 a call. */
const MAX_MICROS = 10_000n;

/** The buyer's available and held balances, the seller's earnings and the platform's fees. */
const money = async (stack: TestStack, accountId = stack.buyerId) => ({
  available: await stack.available(accountId),
  held: (await stack.gw.ledger.balance(accountId)).heldMicros,
  earned: await stack.earned(),
  fees: await stack.fees(),
});

/** The calls log's line of a call. */
const lineOf = (stack: TestStack, callId: string) =>
  stack.gw.db.one<{ outcome: string; http_status: bigint; charged_micros: bigint }>(
    "SELECT outcome, http_status, charged_micros FROM calls WHERE id = ?",
    [callId],
  );

describeEachEngine("usage-priced skills", (engine) => {
  let stack: TestStack;
  let backend: ChargingBackend;

  const start = async (config: Parameters<typeof startStack>[0] = {}) => {
    backend = await startChargingBackend();
    // 200 calls at once from one key: its per-minute limit must not be what refuses them.
    stack = await startStack({
      engine: engine.name,
      ...config,
      config: { rateLimitPerMin: 1_000, ...config.config, skillBackendAllowlist: [backend.url] },
    });
    const skill = await stack.addSkill("metered", "/", { backendUrl: `${backend.url}/charge`, pricing: "usage", priceMicros: MAX_MICROS });
    backend.setSecret(skill.signingSecret);
  };
  /** Set by a suite whose tests share one stack (each reading only what its own calls change). */
  let shared = false;
  const stop = async () => {
    await stack?.close();
    await backend?.close();
  };
  afterEach(async () => {
    if (!shared) await stop();
  });

  describe("a charge report it refuses (one stack for every case: each compares the books before and after its calls)", () => {
    before(async () => {
      shared = true;
      await start();
    });
    after(async () => {
      shared = false;
      await stop();
    });

    const BAD_REPORTS: Array<[string, Record<string, string>, string]> = [
      ["more than max_price", { report: "0.010001" }, "X-Skill-Charge of $0.010001 is above the skill's max_price of $0.01"],
      ["no charge header", {}, "the backend reported no X-Skill-Charge"],
      ["an unsigned charge", { report: "0.001", sign: "none" }, "X-Skill-Charge is not signed"],
      ["a charge signed with another secret", { report: "0.001", sign: "wrong" }, "X-Skill-Charge-Signature does not match"],
      ["a charge signed for another call", { report: "0.001", sign: "other_call" }, "X-Skill-Charge-Signature does not match"],
      ["7 decimals", { report: "0.0000001" }, "not a USD amount with at most 6 decimals"],
      ["a negative charge", { report: "-0.001" }, "not a USD amount"],
      ["an exponent", { report: "1e-3" }, "not a USD amount"],
      ["a leading zero", { report: "00.001" }, "not a USD amount"],
      // HTTP trims a header value's spaces: the charge arrives as "0.001", which the signature over " 0.001" does not match.
      ["spaces", { report: " 0.001" }, "X-Skill-Charge-Signature does not match"],
      ["the charge header twice", { report: "0.001", sign: "twice" }, "not a USD amount"],
    ];
    for (const [what, input, problem] of BAD_REPORTS) {
      it(`answers 502 skill_bad_charge and charges nothing for ${what}`, async () => {
        const before = await money(stack);
        for (const [path, body] of [
          ["/v1/call", { skill_id: "metered", input }],
          ["/v1/skills/metered/call", input],
        ] as const) {
          const res = await stack.post(path, body);
          expect(res.status, JSON.stringify(res.body)).to.equal(502);
          expect(res.body).to.include({ success: false, code: "skill_bad_charge" });
          expect(res.body.error).to.contain(problem);
          expect(res.body.error).to.match(/You were not charged\.$/);
          expect(res.body.metadata[path === "/v1/call" ? "price_paid" : "cost"]).to.equal(0);
          await stack.gw.db.durable();
          expect(await lineOf(stack, res.headers.get("x-call-id")!)).to.deep.equal({
            outcome: "skill_bad_charge",
            http_status: 502n,
            charged_micros: 0n,
          });
        }
        expect(await money(stack)).to.deep.equal(before);
        await assertBalanced(stack.gw.db);
      });
    }
  });

  describe("with the fee included", () => {
    beforeEach(() => start());

    it("charges what the backend reported, splits it 90/10, and gives the rest of the hold back", async () => {
      const res = await stack.post("/v1/call", { skill_id: "metered", input: { report: "0.0042" } });
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      expect(res.body.metadata.price_paid).to.equal(0.0042);
      expect(res.headers.get("x-balance-available")).to.equal("9.9958");
      await stack.gw.db.durable();
      expect(await money(stack)).to.deep.equal({ available: 10_000_000n - 4_200n, held: 0n, earned: 3_780n, fees: 420n });
      expect(await lineOf(stack, res.headers.get("x-call-id")!)).to.deep.equal({
        outcome: "success",
        http_status: 200n,
        charged_micros: 4_200n,
      });
      // The hold is rewritten to what was captured: the settlement batch and the receipt read it.
      const hold = await stack.gw.db.one<{ status: string; amount: bigint; seller_amount: bigint; fee_amount: bigint }>(
        "SELECT status, amount, seller_amount, fee_amount FROM holds WHERE account_id = ?",
        [stack.buyerId],
      );
      expect(hold).to.deep.equal({ status: "captured", amount: 4_200n, seller_amount: 3_780n, fee_amount: 420n });
      await assertBalanced(stack.gw.db);
    });

    it("charges the max_price when the backend reports it", async () => {
      const res = await stack.post("/v1/skills/metered/call", { report: "0.01" });
      expect(res.status).to.equal(200);
      expect(res.body.metadata).to.include({ skillId: "metered", cost: 0.01 });
      await stack.gw.db.durable();
      expect(await money(stack)).to.deep.equal({ available: 10_000_000n - 10_000n, held: 0n, earned: 9_000n, fees: 1_000n });
      await assertBalanced(stack.gw.db);
    });

    it("answers 200 and charges nothing when the backend reports 0", async () => {
      const before = await money(stack);
      const res = await stack.post("/v1/call", { skill_id: "metered", input: { report: "0" } });
      expect(res.status).to.equal(200);
      expect(res.body.data).to.deep.equal({ ok: true });
      expect(res.body.metadata.price_paid).to.equal(0);
      await stack.gw.db.durable();
      expect(await money(stack)).to.deep.equal(before);
      expect(await lineOf(stack, res.headers.get("x-call-id")!)).to.deep.equal({
        outcome: "success",
        http_status: 200n,
        charged_micros: 0n,
      });
      // Nothing to settle: the hold was given back whole, and the call's receipt says it was not charged.
      expect(await stack.gw.db.value("SELECT status FROM holds WHERE account_id = ?", [stack.buyerId])).to.equal("released");
      await assertBalanced(stack.gw.db);
    });

    it("refuses with 402, holding nothing, a buyer whose balance covers what the call would use but not max_price", async () => {
      const poor = await stack.addBuyer("0.005");
      const res = await stack.post("/v1/call", { skill_id: "metered", input: { report: "0.0042" } }, { key: poor.key });
      expect(res.status).to.equal(402);
      expect(res.body).to.include({ code: "insufficient_balance" });
      expect(res.body.details).to.include({ price: 0.01, available: 0.005 });
      expect(backend.hits).to.equal(0);
      await stack.gw.db.durable();
      expect(await money(stack, poor.accountId)).to.include({ available: 5_000n, held: 0n });
      await assertBalanced(stack.gw.db);
    });

    it("refuses at the hold a key whose spending limit covers what the call would use but not max_price", async () => {
      const limited = await stack.gw.keys.create(stack.buyerId, {
        scopes: LEGACY_SCOPES,
        spendLimit: { limitMicros: 5_000n, period: "month" },
      });
      const res = await stack.post("/v1/call", { skill_id: "metered", input: { report: "0.0042" } }, { key: limited.key });
      expect(res.status).to.equal(402);
      expect(res.body).to.include({ code: "key_spend_limit_reached" });
      expect(res.body.details).to.include({ price: 0.01, limit: 0.005, spent: 0 });
      expect(backend.hits).to.equal(0);
      await stack.gw.db.durable();
      expect((await money(stack)).held).to.equal(0n);
    });

    it("counts what was captured against the key's spending limit, giving the rest of the hold back", async () => {
      const limited = await stack.gw.keys.create(stack.buyerId, {
        scopes: LEGACY_SCOPES,
        spendLimit: { limitMicros: 15_000n, period: "month" },
      });
      const first = await stack.post("/v1/call", { skill_id: "metered", input: { report: "0.0042" } }, { key: limited.key });
      expect(first.status).to.equal(200);
      expect(first.headers.get("x-key-spend-remaining")).to.equal("0.0108");
      // Held at max_price, the next call still fits (0.0042 + 0.01 <= 0.015); the third does not (0.0084 + 0.01 > 0.015).
      expect((await stack.post("/v1/call", { skill_id: "metered", input: { report: "0.0042" } }, { key: limited.key })).status).to.equal(
        200,
      );
      const third = await stack.post("/v1/call", { skill_id: "metered", input: { report: "0" } }, { key: limited.key });
      expect(third.status).to.equal(402);
      expect(third.body.details).to.include({ spent: 0.0084 });
      await stack.gw.db.durable();
      expect(await stack.gw.db.value("SELECT spent_micros FROM key_spend_limits WHERE key_id = ?", [limited.record.id])).to.equal(8_400n);
      await assertBalanced(stack.gw.db);
    });

    it("compares a caller's max_price with the skill's max_price, never holding more than the caller allows", async () => {
      const res = await stack.post("/v1/call", { skill_id: "metered", input: { report: "0.001" }, max_price: "0.005" });
      expect(res.status).to.equal(409);
      expect(res.body).to.include({ code: "price_above_max" });
      expect(res.body.error).to.contain("costs up to $0.01 per call");
      expect(backend.hits).to.equal(0);
      const allowed = await stack.post("/v1/skills/metered/call", { report: "0.001" }, { headers: { "x-max-price": "0.01" } });
      expect(allowed.status).to.equal(200);
      expect(allowed.body.metadata.cost).to.equal(0.001);
    });

    it("replays the captured amount for a repeated Idempotency-Key, charging once", async () => {
      const send = () =>
        stack.post("/v1/call", { skill_id: "metered", input: { report: "0.0031" } }, { headers: { "idempotency-key": "usage-1" } });
      const first = await send();
      const again = await send();
      expect(first.status).to.equal(200);
      expect(again.body).to.deep.equal(first.body);
      expect(again.body.metadata.price_paid).to.equal(0.0031);
      expect(backend.hits).to.equal(1);
      await stack.gw.db.durable();
      expect((await money(stack)).available).to.equal(10_000_000n - 3_100n);
    });

    it("lists the skill with its pricing and max_price, and no price", async () => {
      const res = await stack.get("/v1/skills/metered", null);
      expect(res.body.data).to.include({ pricing: "usage", max_price: 0.01, price_per_call: 0.01 });
      expect(res.body.data).to.not.have.property("price");
      const echo = await stack.get("/v1/skills/echo", null);
      expect(echo.body.data).to.include({ pricing: "fixed", price: 0.001 });
      expect(echo.body.data).to.not.have.property("max_price");
    });

    it("ends exact after 200 concurrent calls against a balance for 50 at max_price, each charged less", async () => {
      const buyer = await stack.addBuyer("0.5");
      const results = await Promise.all(
        Array.from({ length: 200 }, () => stack.post("/v1/call", { skill_id: "metered", input: { report: "0.004" } }, { key: buyer.key })),
      );
      const succeeded = results.filter((r) => r.status === 200).length;
      const refused = results.filter((r) => r.status === 402).length;
      expect(succeeded + refused, JSON.stringify(results.find((r) => r.status !== 200 && r.status !== 402)?.body)).to.equal(200);
      // Each call holds $0.01 while it runs: at least 50 fit, and never more than the money allows once captured.
      expect(succeeded).to.be.at.least(50).and.at.most(125);
      await stack.gw.db.durable();
      const after = await money(stack, buyer.accountId);
      expect(after.available).to.equal(500_000n - 4_000n * BigInt(succeeded));
      expect(after.held).to.equal(0n);
      expect(after.earned).to.equal(3_600n * BigInt(succeeded));
      expect(after.fees).to.equal(400n * BigInt(succeeded));
      await assertBalanced(stack.gw.db);
    });

    it("ends exact after 200 concurrent calls against a balance for 50 at max_price, each charged the max", async () => {
      const buyer = await stack.addBuyer("0.5");
      const results = await Promise.all(
        Array.from({ length: 200 }, () => stack.post("/v1/call", { skill_id: "metered", input: { report: "0.01" } }, { key: buyer.key })),
      );
      expect(results.filter((r) => r.status === 200).length).to.equal(50);
      expect(results.filter((r) => r.status === 402).length).to.equal(150);
      await stack.gw.db.durable();
      expect(await money(stack, buyer.accountId)).to.deep.equal({ available: 0n, held: 0n, earned: 450_000n, fees: 50_000n });
      await assertBalanced(stack.gw.db);
    });
  });

  describe("with the fee on top", () => {
    beforeEach(() => start({ config: { feeMode: "on_top" } }));

    it("adds the fee to what the backend reported, and holds max_price plus its fee", async () => {
      const res = await stack.post("/v1/call", { skill_id: "metered", input: { report: "0.0042" } });
      expect(res.status).to.equal(200);
      expect(res.body.metadata.price_paid).to.equal(0.00462);
      await stack.gw.db.durable();
      expect(await money(stack)).to.deep.equal({ available: 10_000_000n - 4_620n, held: 0n, earned: 4_200n, fees: 420n });
      const listed = await stack.get("/v1/skills/metered", null);
      expect(listed.body.data).to.include({ max_price: 0.01, price_per_call: 0.011 });
      await assertBalanced(stack.gw.db);
    });
  });
});
