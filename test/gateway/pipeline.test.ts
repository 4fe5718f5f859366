import { expect } from "chai";
import type { Config } from "../../server/config";
import type { Database } from "../../server/db/sql";
import { openDatabase } from "../../server/db/db";
import { SqliteDatabase } from "../../server/db/sqlite-database";
import { buildSkillRecord } from "../helpers/skills";
import type { Skill, SkillRegistry } from "../../server/catalog/skills";
import type { CallResult } from "../../server/gateway/call-result";
import { CallsStore } from "../../server/gateway/calls-store";
import type { Forwarder } from "../../server/gateway/forward";
import { IdempotencyKeys } from "../../server/gateway/idempotency";
import { IdempotencyStore } from "../../server/gateway/idempotency-store";
import type { CallPayment, RecordCall, Settlement } from "../../server/gateway/payment";
import { CallPipeline } from "../../server/gateway/pipeline";
import { DailyCap, RateLimiter } from "../../server/gateway/rate-limit";
import { RefusalCounter } from "../../server/gateway/refusal-counter";
import { RefusalsStore } from "../../server/gateway/refusals-store";
import { callAnswers } from "../../server/http/call-answer";
import { Ledger } from "../../server/ledger/ledger";
import { SCHEMA } from "../../server/schema";

/*
 * The pipeline's side of a payment's settlement, with a stand-in payment whose settle answers what each test says:
 * what the call answers, what it writes to the calls log, and what it tells onCall, whoever the payment is.
 */

const skill: Skill = buildSkillRecord({ slug: "paid", priceMicros: 2_000n, sellerAccountId: "seller", timeoutMs: 1_000 });

/** A payment whose settlement is `settlement`, run inside a transaction like a real one when it records the call. */
class StandInPayment implements CallPayment<{ header: string }> {
  readonly payer = { accountId: "buyer", apiKeyId: "stand-in" };
  readonly logsRefusals = false;
  readonly holdId = null;
  abandoned = false;

  constructor(
    private readonly db: Database,
    private readonly settlement: Settlement<{ header: string }>,
  ) {}

  offer(): undefined {
    return undefined;
  }
  async reserve(): Promise<undefined> {
    return undefined;
  }
  async settle(record: RecordCall): Promise<Settlement<{ header: string }>> {
    await this.db.transaction(record.run);
    return this.settlement;
  }
  async void(record: RecordCall): Promise<void> {
    await this.db.transaction(record.run);
  }
  async abandon(): Promise<void> {
    this.abandoned = true;
  }
  unchargedNote(): string {
    return "";
  }
}

describe("CallPipeline: what a payment's settlement makes of the call", () => {
  let db: Database;
  let pipeline: CallPipeline;
  let told: string[];

  beforeEach(async () => {
    db = new SqliteDatabase(openDatabase(":memory:", SCHEMA));
    const ledger = await Ledger.open(db);
    await ledger.ensureAccount({ id: "buyer", kind: "user", name: "Buyer" });
    await ledger.ensureAccount({ id: "seller", kind: "seller", name: "Seller" });
    const calls = new CallsStore(db);
    told = [];
    pipeline = new CallPipeline({
      config: { rateLimitPerMin: 100, dailyCallCap: 0, feeMode: "included", feeBps: 1_000n } as Config,
      db,
      refusals: new RefusalCounter(new RefusalsStore(db), { flushMs: 60_000 }),
      skills: { resolve: () => skill, validateInput: async () => [], validateOutput: async () => undefined } as unknown as SkillRegistry,
      calls,
      idempotency: new IdempotencyKeys(new IdempotencyStore(db), 60_000),
      limiter: new RateLimiter(),
      dailyCap: new DailyCap((accountId, sinceMs) => calls.countSince(accountId, sinceMs)),
      forwarder: { forward: async () => ({ kind: "ok", status: 200, data: { done: true } }) } as unknown as Forwarder,
      answers: callAnswers,
      onCall: (call) => told.push(call.outcome),
    });
  });
  afterEach(async () => {
    await db.close();
  });

  const run = (payment: StandInPayment): Promise<CallResult<{ header: string }>> =>
    pipeline.run({ endpoint: "x402", skillRef: "paid", input: {}, startedAt: performance.now() }, payment);
  const lines = () => db.all<{ outcome: string; http_status: bigint }>("SELECT outcome, http_status FROM calls");

  it("answers a settled call with the data and the payment's note, its line written and told", async () => {
    const result = await run(new StandInPayment(db, { note: { header: "paid" } }));
    expect(result).to.deep.include({ kind: "answered", status: 200, note: { header: "paid" } });
    expect(await lines()).to.deep.equal([{ outcome: "success", http_status: 200n }]);
    expect(told).to.deep.equal(["success"]);
  });
});
