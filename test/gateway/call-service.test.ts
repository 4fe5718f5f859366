import { expect } from "chai";
import type { Config } from "../../server/config";
import type { Database, Sql } from "../../server/db/sql";
import { type CallRequest, CallService } from "../../server/gateway/call-service";
import type { CallResult } from "../../server/gateway/call-result";
import { CallPipeline } from "../../server/gateway/pipeline";
import { RefusalCounter } from "../../server/gateway/refusal-counter";
import { RefusalsStore } from "../../server/gateway/refusals-store";
import { type CallRecord, CallsStore } from "../../server/gateway/calls-store";
import type { ForwardResult, Forwarder } from "../../server/gateway/forward";
import { IdempotencyKeys } from "../../server/gateway/idempotency";
import { IdempotencyStore } from "../../server/gateway/idempotency-store";
import { DailyCap, RateLimiter } from "../../server/gateway/rate-limit";
import type { Skill, SkillRegistry } from "../../server/catalog/skills";
import type { ApiKeyRecord } from "../../server/identity/api-keys";
import { callAnswers } from "../../server/http/call-answer";
import { assertBalanced } from "../../server/ledger/invariants";
import { Ledger } from "../../server/ledger/ledger";
import { describeEachEngine } from "../helpers/engines";

/*
 * The call service on each engine, with the backend, the skill registry and the API key stood in
 * for: what each outcome writes (hold, capture or release, the calls log's line, the idempotency
 * key) and that each commits whole or not at all. The HTTP suites (test/http/) run it end to end.
 */

const PRICE_MICROS = 1_000n;

const skill: Skill = {
  id: "00000000-0000-4000-8000-000000000001",
  slug: "echo",
  name: "Echo",
  description: "",
  pricing: "fixed",
  priceMicros: PRICE_MICROS,
  sellerAccountId: "seller",
  backendUrl: "http://127.0.0.1:1/",
  operatorListed: true,
  timeoutMs: 1_000,
  rateLimitPerMin: null,
  signingSecret: "s",
  inputSchema: null,
  outputSchema: null,
};

const apiKey: ApiKeyRecord = {
  id: "key-1",
  accountId: "buyer",
  name: "",
  prefix: "atom_xxxxxxx",
  rateLimitPerMin: 4,
  accountDailyCallCap: null,
  createdAtMs: 0,
  revokedAtMs: null,
  lastUsedAtMs: null,
  scopes: ["calls"],
  allowedSkills: null,
  expiresAtMs: null,
  metadata: {},
};

/** A calls log that can be told to fail, to see a transaction undo everything it did. */
class FailingCallsStore extends CallsStore {
  failOn: CallRecord["outcome"] | undefined;
  override async record(c: CallRecord, tx?: Sql): Promise<void> {
    await super.record(c, tx);
    if (c.outcome === this.failOn) throw new Error(`the calls log refused a ${c.outcome} line`);
  }
}

describeEachEngine("CallService", (engine) => {
  let db: Database;
  let ledger: Ledger;
  let calls: FailingCallsStore;
  let backend: () => Promise<ForwardResult>;
  let told: { outcome: string; chargedMicros: bigint }[];
  let service: CallService;
  let refusals: RefusalCounter;

  beforeEach(async () => {
    db = await engine.open();
    ledger = await Ledger.open(db);
    await ledger.ensureAccount({ id: "buyer", kind: "user", name: "Buyer" });
    await ledger.ensureAccount({ id: "seller", kind: "seller", name: "Seller" });
    await ledger.credit("buyer", 2_500n, "dev_credit");
    calls = new FailingCallsStore(db);
    backend = async () => ({ kind: "ok", status: 200, data: { echoed: true } });
    told = [];
    const config = { rateLimitPerMin: 100, dailyCallCap: 0, feeMode: "included", feeBps: 1_000n } as Config;
    refusals = new RefusalCounter(new RefusalsStore(db), { flushMs: 60_000 });
    const pipeline = new CallPipeline({
      config,
      db,
      refusals,
      skills: {
        resolve: (ref: string) => (ref === skill.slug || ref === skill.id ? skill : undefined),
        validateInput: async (_skill: Skill, input: unknown) => ((input as { bad?: boolean }).bad ? ["bad is not allowed"] : []),
        validateOutput: async () => undefined,
      } as unknown as SkillRegistry,
      calls,
      idempotency: new IdempotencyKeys(new IdempotencyStore(db), 60_000),
      limiter: new RateLimiter(),
      dailyCap: new DailyCap((accountId, sinceMs) => calls.countSince(accountId, sinceMs)),
      forwarder: { forward: () => backend() } as unknown as Forwarder,
      answers: callAnswers,
      onCall: (call) => told.push({ outcome: call.outcome, chargedMicros: call.chargedMicros }),
    });
    service = new CallService({ config, ledger, pipeline });
  });

  const call = (overrides: Partial<CallRequest> = {}): Promise<CallResult> =>
    service.execute({ endpoint: "call", apiKey, skillRef: "echo", input: {}, startedAt: performance.now(), ...overrides });
  const idempotent = (key: string) => ({ idempotency: { key, requestHash: "hash" } });
  const holds = () => db.all<{ status: string }>("SELECT status FROM holds ORDER BY created_at, id");
  const lines = () =>
    db.all<{ outcome: string; charged_micros: bigint; hold_id: string | null }>(
      "SELECT outcome, charged_micros, hold_id FROM calls ORDER BY created_at, rowid",
    );
  const keyState = (key: string) => db.value<string>("SELECT state FROM idempotency_keys WHERE account_id = 'buyer' AND key = ?", [key]);
  /** The answer of a call that was made (not a replay, not refused before it began). */
  const answered = (result: CallResult) => {
    if (result.kind !== "answered") throw new Error(`expected an answered call, got ${JSON.stringify(result)}`);
    return result;
  };
  /** The code of a request refused before any call began. */
  const refusedCode = (result: CallResult) => (result.kind === "refused" ? result.refusal.code : result.kind);

  it("charges a successful call: the capture, its line and the stored answer commit together", async () => {
    const result = answered(await call(idempotent("k")));
    expect(result).to.include({ kind: "answered", status: 200 });
    expect(await ledger.balance("buyer")).to.deep.equal({ availableMicros: 1_500n, heldMicros: 0n });
    expect(await holds()).to.deep.equal([{ status: "captured" }]);
    const [line] = await lines();
    expect(line).to.include({ outcome: "success", charged_micros: PRICE_MICROS });
    expect(line.hold_id).to.be.a("string");
    expect(await keyState("k")).to.equal("completed");
    expect(told).to.deep.equal([{ outcome: "success", chargedMicros: PRICE_MICROS }]);
    // The retry gets the same bytes, and is not charged again.
    const replay = await call(idempotent("k"));
    expect(replay).to.deep.equal({ kind: "replayed", status: 200, body: result.body });
    expect(await ledger.balance("buyer")).to.deep.equal({ availableMicros: 1_500n, heldMicros: 0n });
    await assertBalanced(db);
  });

  it("releases the hold of a failed backend call, logs it, and gives its key up", async () => {
    backend = async () => ({ kind: "failed", reason: "backend_error", status: 503, message: "backend answered 503" });
    const result = await call(idempotent("k"));
    expect(result).to.include({ kind: "answered", status: 502, code: "skill_error" });
    expect(await ledger.balance("buyer")).to.deep.equal({ availableMicros: 2_500n, heldMicros: 0n });
    expect(await holds()).to.deep.equal([{ status: "released" }]);
    expect(await lines()).to.have.length(1);
    expect((await lines())[0]).to.include({ outcome: "skill_error", charged_micros: 0n });
    expect(await keyState("k")).to.equal(undefined);
    expect(told).to.deep.equal([{ outcome: "skill_error", chargedMicros: 0n }]);
    await assertBalanced(db);
  });

  it("keeps the answer of a backend's refusal of the input for the retry, charging nothing", async () => {
    backend = async () => ({ kind: "rejected", status: 422, message: "no such thing" });
    const result = answered(await call(idempotent("k")));
    expect(result).to.include({ kind: "answered", status: 400, code: "skill_rejected_input" });
    expect(await holds()).to.deep.equal([{ status: "released" }]);
    expect(await keyState("k")).to.equal("completed");
    expect(await call(idempotent("k"))).to.deep.equal({ kind: "replayed", status: 400, body: result.body });
    expect(await ledger.balance("buyer")).to.deep.equal({ availableMicros: 2_500n, heldMicros: 0n });
  });

  it("logs a refusal before forwarding (input, balance, rate limit) and gives its key up", async () => {
    const invalid = await call({ ...idempotent("a"), input: { bad: true } });
    expect(invalid).to.include({ status: 400, code: "invalid_input" });
    await ledger.credit("buyer", 1n, "dev_credit");
    const held = [answered(await call()), answered(await call())];
    expect(held.map((r) => r.status)).to.deep.equal([200, 200]);
    const poor = answered(await call(idempotent("b")));
    expect(poor).to.include({ status: 402, code: "insufficient_balance" });
    expect(poor.body).to.contain("$0.000501 is available");
    expect(await lines()).to.have.length(4);
    expect((await lines()).map((l) => l.outcome)).to.deep.equal(["invalid_input", "success", "success", "insufficient_balance"]);
    expect([await keyState("a"), await keyState("b")]).to.deep.equal([undefined, undefined]);
    // The key allows 4 calls a minute, refusals past the limits included: the fifth is refused.
    await ledger.credit("buyer", 10_000n, "dev_credit");
    const limited = answered(await call(idempotent("c")));
    expect(limited).to.include({ status: 429, code: "rate_limited" });
    expect(limited.retryAfterMs).to.be.greaterThan(0);
    expect(await keyState("c")).to.equal(undefined);
    // A refusal of the key's own limits is counted, not logged: no line, no call id, one count once flushed.
    expect(limited.callId).to.equal(undefined);
    expect(await lines()).to.have.length(4);
    await refusals.flush();
    expect(await db.all("SELECT account_id, api_key_id, outcome, count FROM call_refusals")).to.deep.equal([
      { account_id: "buyer", api_key_id: "key-1", outcome: "rate_limited", count: 1n },
    ]);
    expect(told.map((t) => t.outcome)).to.deep.equal(["invalid_input", "success", "success", "insufficient_balance", "rate_limited"]);
    await assertBalanced(db);
  });

  it("lets one of two concurrent calls with one key run; the other is told it is in progress", async () => {
    let answer!: (result: ForwardResult) => void;
    backend = () => new Promise((resolve) => (answer = resolve));
    const first = call(idempotent("k"));
    while (!answer) await new Promise((resolve) => setTimeout(resolve, 1));
    const second = refusedCode(await call(idempotent("k")));
    expect(second).to.equal("idempotency_key_in_use");
    answer({ kind: "ok", status: 200, data: 1 });
    expect(await first).to.include({ status: 200 });
    expect(await ledger.balance("buyer")).to.deep.equal({ availableMicros: 1_500n, heldMicros: 0n });
  });

  it("refuses a key reused with another request", async () => {
    await call(idempotent("k"));
    const reused = refusedCode(
      await service.execute({
        endpoint: "call",
        apiKey,
        skillRef: "echo",
        input: {},
        startedAt: 0,
        idempotency: { key: "k", requestHash: "other" },
      }),
    );
    expect(reused).to.equal("idempotency_key_reused");
  });

  it("undoes the capture when its line cannot be written, and releases the hold: nothing charged, the key free", async () => {
    calls.failOn = "success";
    const error = await call(idempotent("k")).catch((e: Error) => e);
    expect((error as Error).message).to.contain("refused a success line");
    expect(await ledger.balance("buyer")).to.deep.equal({ availableMicros: 2_500n, heldMicros: 0n });
    expect(await holds()).to.deep.equal([{ status: "released" }]);
    expect(await lines()).to.deep.equal([]);
    expect(await keyState("k")).to.equal(undefined);
    expect(told).to.deep.equal([]);
    await assertBalanced(db);
  });

  it("releases the hold when the backend call throws, and gives the key up", async () => {
    backend = async () => {
      throw new Error("forwarder bug");
    };
    const error = await call(idempotent("k")).catch((e: Error) => e);
    expect((error as Error).message).to.equal("forwarder bug");
    expect(await holds()).to.deep.equal([{ status: "released" }]);
    expect(await keyState("k")).to.equal(undefined);
    expect(await ledger.balance("buyer")).to.deep.equal({ availableMicros: 2_500n, heldMicros: 0n });
  });

  it("answers an unknown skill 404 before anything is written", async () => {
    expect(refusedCode(await call({ skillRef: "nope", ...idempotent("k") }))).to.equal("skill_not_found");
    expect([await holds(), await lines(), await keyState("k")]).to.deep.equal([[], [], undefined]);
  });
});
