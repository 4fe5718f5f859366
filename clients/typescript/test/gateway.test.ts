import { expect } from "chai";
import { Rng } from "../../../test/helpers/random";
import { type TestStack, startStack } from "../../../test/helpers/gateway";
import {
  AuthenticationError,
  BadRequestError,
  InsufficientBalanceError,
  KeySpendLimitReachedError,
  NotFoundError,
  SkillError,
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

/** Returns once Date.now() has moved past `ms`, so that the next call is recorded at a later millisecond. */
async function afterMillisecond(ms: number): Promise<void> {
  while (Date.now() <= ms) await new Promise((resolve) => setImmediate(resolve));
}

describe("SkillGateway against the real gateway", function () {
  let stack: TestStack;
  const rng = new Rng(7);
  /** A client of the stack's gateway with the buyer's key, 1 ms backoff and seeded jitter; `attempts` counts fetches. */
  const clientOf = (options: SkillGatewayOptions = {}) => {
    const counter = { attempts: 0 };
    const inner = options.fetch ?? fetch;
    const client = new SkillGateway({
      apiKey: stack.key,
      baseUrl: stack.url,
      backoff: { initialDelayMs: 1, random: () => rng.next() },
      ...options,
      fetch: (input, init) => {
        counter.attempts++;
        return inner(input, init);
      },
    });
    return Object.assign(client, { counter });
  };

  before(async () => {
    stack = await startStack();
  });
  after(async () => {
    await stack.close();
  });

  it("calls POST /v1/call and charges exactly the skill's price per call", async () => {
    const client = clientOf();
    const echo = await client.skills.get("echo");
    const before = await stack.available();
    const { data, metadata } = await client.call<{ hello: string }>("echo", { hello: "world" });
    expect(data).to.deep.equal({ hello: "world" });
    expect([metadata.skillId, metadata.cost, metadata.replayed]).to.deep.equal(["echo", echo.price_per_call, false]);
    expect(metadata.cost).to.equal(0.001);
    expect(metadata.responseTimeMs).to.be.a("number");
    expect(metadata.callId).to.be.a("string");
    expect(metadata.rateLimit?.limit).to.equal(100);
    expect(before - (await stack.available())).to.equal(1_000n);
  });

  it("calls POST /v1/skills/:skillId/call with the flat body, by slug and by UUID", async () => {
    const client = clientOf();
    const echo = await client.skills.get("echo");
    const before = await stack.available();
    const bySlug = await client.skill("echo").call<{ n: number }>({ n: 1 });
    const byId = await client.skill(echo.id).call<{ n: number }>({ n: 2 });
    expect([bySlug.data.n, byId.data.n]).to.deep.equal([1, 2]);
    expect([bySlug.metadata.skillId, bySlug.metadata.cost]).to.deep.equal(["echo", 0.001]);
    expect(before - (await stack.available())).to.equal(2_000n);
  });

  it("throws InsufficientBalanceError on 402, after one attempt, charging nothing", async () => {
    const broke = await stack.addBuyer("0");
    const client = clientOf({ apiKey: broke.key });
    const error = (await rejectionOf(client.call("echo", { x: 1 }))) as InsufficientBalanceError;
    expect(error).to.be.instanceOf(InsufficientBalanceError);
    expect([error.status, error.code]).to.deep.equal([402, "insufficient_balance"]);
    expect(error.message).to.contain("Insufficient balance");
    expect(client.counter.attempts).to.equal(1);
    expect(await stack.available(broke.accountId)).to.equal(0n);
  });

  it("throws KeySpendLimitReachedError, an InsufficientBalanceError, when the key's spending limit is reached", async () => {
    const limited = await stack.gw.keys.create(stack.buyerId, { spendLimit: { limitMicros: 1_000n, period: "total" } });
    const client = clientOf({ apiKey: limited.key });
    await client.call("echo", {});
    const before = await stack.available();
    const error = (await rejectionOf(client.call("echo", {}))) as KeySpendLimitReachedError;
    expect(error).to.be.instanceOf(KeySpendLimitReachedError).and.instanceOf(InsufficientBalanceError);
    expect([error.status, error.code]).to.deep.equal([402, "key_spend_limit_reached"]);
    expect(error.message).to.equal(
      "This key's spending limit of $0.001 in total is reached ($0.001 spent, this call costs $0.001); it does not reset: raise or remove the limit to go on.",
    );
    expect(client.counter.attempts).to.equal(2);
    expect(await stack.available()).to.equal(before);
  });

  it("does not retry a failing skill's 502 by default: the seller ran once, and nothing is charged", async () => {
    const client = clientOf();
    const before = await stack.available();
    const hitsBefore = stack.backend.hits.get("/fail") ?? 0;
    const error = (await rejectionOf(client.call("fail", {}))) as SkillError;
    expect(error).to.be.instanceOf(SkillError);
    expect([error.status, error.code]).to.deep.equal([502, "skill_error"]);
    expect(error.callId).to.be.a("string");
    expect(client.counter.attempts).to.equal(1);
    expect((stack.backend.hits.get("/fail") ?? 0) - hitsBefore).to.equal(1);
    expect(await stack.available()).to.equal(before);
  });

  it("retries a failing skill's 502 when asked, and the backend sees one idempotency key on every attempt, never charged", async () => {
    const client = clientOf({ retrySkillFailures: true });
    const before = await stack.available();
    const seen = stack.backend.received.length;
    const error = (await rejectionOf(client.call("fail", {}))) as SkillError;
    expect([error.status, error.code]).to.deep.equal([502, "skill_error"]);
    expect(client.counter.attempts).to.equal(3);
    const attempts = stack.backend.received.slice(seen).filter((r) => r.path === "/fail");
    expect(attempts).to.have.length(3);
    // Three calls of the gateway's (three call ids), one call of the caller's: one idempotency key, not the caller's own.
    expect(new Set(attempts.map((r) => r.callId)).size).to.equal(3);
    expect(new Set(attempts.map((r) => r.idempotencyKey))).to.deep.equal(new Set([attempts[0].idempotencyKey]));
    expect(attempts[0].idempotencyKey).to.match(/^idem_[0-9a-f]{48}$/);
    expect(attempts[0].idempotencyKey).not.to.include(error.idempotencyKey!);
    // Another call of the caller's is another key.
    await rejectionOf(client.call("fail", {}));
    const next = stack.backend.received.slice(seen).filter((r) => r.path === "/fail")[3];
    expect(next.idempotencyKey).not.to.equal(attempts[0].idempotencyKey);
    expect(await stack.available()).to.equal(before);
  });

  it("does not retry the other refusals: a skill's 400, an unknown skill's 404, a bad key's 401", async () => {
    const client = clientOf();
    const rejected = (await rejectionOf(client.call("reject", {}))) as BadRequestError;
    expect([rejected.constructor, rejected.code, rejected.message]).to.deep.equal([
      BadRequestError,
      "skill_rejected_input",
      "field x is required",
    ]);
    const missing = (await rejectionOf(client.skill("no-such-skill").call({}))) as NotFoundError;
    expect([missing.constructor, missing.code]).to.deep.equal([NotFoundError, "skill_not_found"]);
    expect(client.counter.attempts).to.equal(2);
    const stranger = clientOf({ apiKey: "atom_not_a_key" });
    expect(await rejectionOf(stranger.call("echo", {}))).to.be.instanceOf(AuthenticationError);
    expect(await rejectionOf(stranger.balance())).to.be.instanceOf(AuthenticationError);
    expect(stranger.counter.attempts).to.equal(2);
  });

  it("charges once for a call whose first response was lost: the retry is answered from the stored response", async () => {
    let first = true;
    const client = clientOf({
      fetch: async (input, init) => {
        const response = await fetch(input, init);
        if (!first) return response;
        // The gateway answered (and charged), but the answer never reaches the caller.
        first = false;
        await response.text();
        throw new TypeError("fetch failed", { cause: new Error("socket hang up") });
      },
    });
    const before = await stack.available();
    const { data, metadata } = await client.call("echo", { lost: true });
    expect(data).to.deep.equal({ lost: true });
    expect(metadata.replayed).to.equal(true);
    expect(metadata.cost).to.equal(0.001);
    expect(client.counter.attempts).to.equal(2);
    expect(before - (await stack.available())).to.equal(1_000n);
  });

  it("charges once for two calls with the same idempotencyKey", async () => {
    const client = clientOf();
    const before = await stack.available();
    const one = await client.call("echo", { same: 1 }, { idempotencyKey: "sdk-test-same-key" });
    const two = await client.call("echo", { same: 1 }, { idempotencyKey: "sdk-test-same-key" });
    expect([one.metadata.replayed, two.metadata.replayed]).to.deep.equal([false, true]);
    expect(two.data).to.deep.equal(one.data);
    expect(before - (await stack.available())).to.equal(1_000n);
  });

  it("lists the skills and reads one by slug", async () => {
    const client = clientOf({ apiKey: undefined });
    const skills = await client.skills.list();
    expect(skills.map((s) => s.slug)).to.include.members(["echo", "fail", "reject", "hang"]);
    const echo = await client.skills.get("echo");
    expect([echo.slug, echo.price, echo.currency]).to.deep.equal(["echo", 0.001, "USDC"]);
    expect(skills.find((s) => s.slug === "echo")).to.deep.equal(echo);
    expect(await rejectionOf(client.skills.get("no-such-skill"))).to.be.instanceOf(NotFoundError);
  });

  it("reads the balance in USD and in base units, and pages through all the usage with the iterator", async () => {
    const buyer = await stack.addBuyer("1");
    const client = clientOf({ apiKey: buyer.key });
    const callIds: string[] = [];
    for (let i = 0; i < 5; i++) {
      const { metadata } = await client.call("echo", { i });
      callIds.push(metadata.callId!);
      // The usage cursor is a millisecond: one call per millisecond keeps page boundaries exact.
      await afterMillisecond(Date.now());
    }
    const balance = await client.balance();
    expect(balance).to.deep.equal({ currency: "USDC", available: 0.995, held: 0, available_base_units: "995000", held_base_units: "0" });

    const firstPage = await client.usage({ limit: 2 });
    expect(firstPage.calls.map((c) => c.id)).to.deep.equal(callIds.slice(3).reverse());
    expect(firstPage.hasNextPage()).to.equal(true);

    const seen = [];
    for await (const call of client.usage({ limit: 2 })) seen.push(call);
    expect(seen.map((c) => c.id)).to.deep.equal([...callIds].reverse());
    expect(seen.every((c) => c.skill_id === "echo" && c.cost === 0.001 && c.cost_base_units === "1000" && c.status === "success")).to.equal(
      true,
    );
    // 5 calls in pages of 2: three pages, the last one short.
    const requests = client.counter.attempts;
    expect(requests).to.equal(5 + 1 + 1 + 3);
  });
});
