import { expect } from "chai";
import { type TestStack, startStack } from "../../../test/helpers/gateway";
import {
  ConflictError,
  InsufficientBalanceError,
  KeySpendLimitReachedError,
  PriceAboveMaxError,
  SkillGateway,
  type SkillGatewayOptions,
} from "../src";

async function rejectionOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected the promise to reject");
}

/** The SDK's budgets and price caps against the real gateway (issue 24, sections 2 and 3). */
describe("SkillGateway: budgets and price caps, against the real gateway", () => {
  let stack: TestStack;
  /** A client of the stack with `options`; `sent` holds each request's URL, headers and body, in order. */
  const clientOf = (options: SkillGatewayOptions = {}) => {
    const sent: Array<{ url: string; headers: Record<string, string>; body: any }> = [];
    const client = new SkillGateway({
      apiKey: stack.key,
      baseUrl: stack.url,
      backoff: { initialDelayMs: 1 },
      ...options,
      fetch: (input, init) => {
        sent.push({
          url: String(input),
          headers: init?.headers as Record<string, string>,
          body: typeof init?.body === "string" ? JSON.parse(init.body) : undefined,
        });
        return fetch(input, init);
      },
    });
    return Object.assign(client, { sent });
  };

  before(async () => {
    stack = await startStack();
  });
  after(async () => {
    await stack.close();
  });

  describe("maxPrice", () => {
    it("client.call sends max_price in the body: a dearer skill throws PriceAboveMaxError, once, charging nothing", async () => {
      const client = clientOf();
      const before = await stack.available();
      for (const maxPrice of [0.0009, "0.0009"]) {
        const error = (await rejectionOf(client.call("echo", { a: 1 }, { maxPrice }))) as PriceAboveMaxError;
        expect(error).to.be.instanceOf(PriceAboveMaxError).and.instanceOf(ConflictError);
        expect([error.status, error.code, error.price, error.maxPrice]).to.deep.equal([409, "price_above_max", 0.001, 0.0009]);
        expect(error.message).to.contain("costs $0.001 per call");
      }
      // Not retried: one request each.
      expect(client.sent.map((r) => r.body)).to.deep.equal([
        { skill_id: "echo", input: { a: 1 }, max_price: 0.0009 },
        { skill_id: "echo", input: { a: 1 }, max_price: "0.0009" },
      ]);
      expect(await stack.available()).to.equal(before);
      const { metadata } = await client.call("echo", { a: 1 }, { maxPrice: 0.001 });
      expect(metadata.cost).to.equal(0.001);
      // Without maxPrice, no max_price is sent.
      await client.call("echo", {});
      expect(client.sent.at(-1)!.body).to.deep.equal({ skill_id: "echo", input: {} });
    });

    it("client.skill(...).call sends X-Max-Price, the body staying the skill's own", async () => {
      const client = clientOf();
      const before = await stack.available();
      const error = (await rejectionOf(client.skill("echo").call({ n: 1 }, { maxPrice: "0.0005" }))) as PriceAboveMaxError;
      expect(error).to.be.instanceOf(PriceAboveMaxError);
      expect([error.price, error.maxPrice]).to.deep.equal([0.001, 0.0005]);
      expect(client.sent[0].headers["x-max-price"]).to.equal("0.0005");
      expect(client.sent[0].body).to.deep.equal({ n: 1 });
      expect(await stack.available()).to.equal(before);
      const { data } = await client.skill("echo").call({ n: 2 }, { maxPrice: 0.001 });
      expect(data).to.deep.equal({ n: 2 });
      expect(client.sent[1].headers["x-max-price"]).to.equal("0.001");
    });
  });

  describe("budgets", () => {
    it("puts X-Balance-Available and X-Key-Spend-Remaining in the metadata, as balance() and key() read them", async () => {
      const buyer = await stack.addBuyer("1");
      const limited = await stack.gw.keys.create(buyer.accountId, {
        scopes: ["calls", "usage:read"],
        spendLimit: { limitMicros: 5_000n, period: "day" },
      });
      const client = clientOf({ apiKey: limited.key });
      const { metadata } = await client.skill("echo").call({});
      expect([metadata.balanceAvailable, metadata.keySpendRemaining]).to.deep.equal([0.999, 0.004]);
      expect(metadata.balanceAvailable).to.equal((await client.balance()).available);
      const own = await client.key();
      expect(own).to.deep.include({ id: limited.record.id, remaining_usd: 0.004, available_usd: 0.999, spend_limit_period: "day" });
      // A key without a limit: the balance, no remaining.
      const plain = await clientOf().call("echo", {});
      expect(plain.metadata.balanceAvailable).to.be.a("number");
      expect(plain.metadata).to.not.have.property("keySpendRemaining");
    });

    it("gives a 402's numbers as typed fields: price and available, and a key limit's limit, spent, period and resetsAt", async () => {
      const poor = await stack.addBuyer("0.0005");
      const broke = (await rejectionOf(clientOf({ apiKey: poor.key }).call("echo", {}))) as InsufficientBalanceError;
      expect(broke).to.be.instanceOf(InsufficientBalanceError);
      expect([broke.price, broke.available, broke.details]).to.deep.equal([0.001, 0.0005, { price: 0.001, available: 0.0005 }]);

      const limited = await stack.gw.keys.create(poor.accountId, { spendLimit: { limitMicros: 500n, period: "total" } });
      await stack.gw.ledger.credit(poor.accountId, 1_000_000n, "dev_credit", "test");
      const capped = (await rejectionOf(clientOf({ apiKey: limited.key }).call("echo", {}))) as KeySpendLimitReachedError;
      expect(capped).to.be.instanceOf(KeySpendLimitReachedError);
      expect([capped.price, capped.available, capped.limit, capped.spent, capped.period, capped.resetsAt]).to.deep.equal([
        0.001,
        1.0005,
        0.0005,
        0,
        "total",
        null,
      ]);
    });
  });
});
