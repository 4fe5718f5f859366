import { expect } from "chai";
import { PostgresDatabase } from "../../server/db/postgres/database";
import { createPostgresPool } from "../../server/db/postgres/pool";
import { PostgresWatch } from "../../server/db/postgres/watch";
import { DatabaseUnavailableError, type Sql, type TransactionOptions } from "../../server/db/sql";
import { GatewayError } from "../../server/errors";
import { IdempotencyKeys } from "../../server/gateway/idempotency";
import { IdempotencyStore } from "../../server/gateway/idempotency-store";
import { LedgerHolds, LedgerPayment } from "../../server/gateway/ledger-payment";
import type { PaidCall } from "../../server/gateway/payment";
import { computeCharge } from "../../server/ledger/fees";
import { assertBalanced } from "../../server/ledger/invariants";
import { Ledger } from "../../server/ledger/ledger";
import { type Frozen, freezePostgres } from "../helpers/freeze";
import { type TestStack, startStack } from "../helpers/gateway";
import { freshPostgresDatabase, sharedPostgres } from "../helpers/engines";
import { type PostgresServer, postgresUnavailableReason } from "../helpers/postgres";
import { noRecord } from "../helpers/records";
import { buildSkillRecord } from "../helpers/skills";

/*
 * What the call path leaves behind when PostgreSQL stops answering mid-call (a server frozen with SIGSTOP): no hold
 * open and no idempotency key in progress once it answers again, a capture whose fate is unknown answered as such,
 * and calls answered 503 database_unavailable at once rather than left waiting. The writes the database did not take
 * are done by server/db/deferred-writes.ts once it answers.
 */

const PING_TIMEOUT_MS = 200;
const BUYER = "frozen-buyer";
const SELLER = "frozen-seller";
const CREDIT_MICROS = 1_000_000n;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(what: string, timeoutMs: number, check: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(20);
  }
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected a rejection, but the promise resolved");
}

/**
 * A watched database whose next transaction can be made to wait, once its work is done, just before its COMMIT (that
 * transaction runs alone even when it asks to share a group commit).
 */
class GatedDatabase extends PostgresDatabase {
  /** Awaited by the next transaction after its function, before its COMMIT. */
  beforeCommit: (() => Promise<void>) | undefined;

  override transaction<T>(fn: (tx: Sql) => Promise<T>, options?: TransactionOptions): Promise<T> {
    const gate = this.beforeCommit;
    this.beforeCommit = undefined;
    if (!gate) return super.transaction(fn, options);
    const alone = async (tx: Sql) => {
      const result = await fn(tx);
      await gate();
      return result;
    };
    return super.transaction(alone, { durable: options?.durable });
  }
}

describe("the call path's writes when PostgreSQL stops answering", function () {
  this.timeout(60_000);
  let server: PostgresServer;
  let frozen: Frozen | undefined;
  let watch: PostgresWatch;
  let db: GatedDatabase;
  let ledger: Ledger;

  before(async function () {
    const missing = postgresUnavailableReason();
    if (missing !== null) {
      if (process.env.CI === "true") throw new Error(missing);
      console.warn(`      skipped: ${missing}`);
      this.skip();
    }
    // The test process's shared server (../helpers/engines.ts): no other test of this process runs while one here
    // freezes it, and each thaws it.
    server = (await sharedPostgres()).server;
  });
  after(() => frozen?.thaw());

  describe("the ledger and the idempotency keys", () => {
    beforeEach(async () => {
      const url = await freshPostgresDatabase();
      watch = new PostgresWatch({ url, applicationName: "frozen:watch", timeoutMs: PING_TIMEOUT_MS });
      await watch.start();
      db = new GatedDatabase(createPostgresPool({ url, applicationName: "frozen", max: 4 }), undefined, watch);
      ledger = await Ledger.open(db, { replicaId: "frozen-replica" });
      await ledger.ensureAccount({ id: BUYER, kind: "user", name: BUYER });
      await ledger.ensureAccount({ id: SELLER, kind: "seller", name: SELLER });
      await ledger.credit(BUYER, CREDIT_MICROS, "dev_credit", "test");
    });
    afterEach(async () => {
      frozen?.thaw();
      frozen = undefined;
      await until("the server to answer again", 10_000, () => watch.available);
      await db?.close();
    });

    /** Freezes the server as the next transaction is about to COMMIT, and resolves once that COMMIT is sent. */
    function freezeAtNextCommit(): void {
      db.beforeCommit = async () => {
        frozen = freezePostgres(server);
      };
    }

    async function holdStatuses(): Promise<string[]> {
      return (await db.all<{ status: string }>("SELECT status FROM holds ORDER BY id")).map((h) => h.status);
    }

    const call: PaidCall = {
      skill: buildSkillRecord({ sellerAccountId: SELLER }),
      charge: computeCharge(1_000n, "included", 1_000n),
      callId: "frozen-call",
      input: {},
    };

    it("releases a hold whose commit the database did not answer, once it answers, leaving the balance whole", async () => {
      // On PostgreSQL a hold is one statement (ledger_hold) in a transaction shared with the replica's other holds: the
      // server is frozen as that transaction's COMMIT is sent.
      freezeAtNextCommit();
      const error = await rejection(
        ledger.hold({ accountId: BUYER, sellerAccountId: SELLER, skillId: "s", charge: call.charge, apiKeyId: "k" }),
      );
      expect(error).to.be.instanceOf(DatabaseUnavailableError);
      expect((error as DatabaseUnavailableError).mayHaveCommitted).to.equal(true);
      expect(ledger.releasesWaiting).to.equal(1);
      frozen!.thaw();
      await until("the deferred release", 10_000, () => ledger.releasesWaiting === 0);
      // The hold committed when the server read its COMMIT, and was released after: nobody holds the buyer's money.
      expect(await holdStatuses()).to.deep.equal(["released"]);
      expect(await ledger.balance(BUYER)).to.deep.equal({ availableMicros: CREDIT_MICROS, heldMicros: 0n });
      await assertBalanced(db);
    });

    it("gives a call's hold back once the database answers when the call ends while it does not", async () => {
      const payment = new LedgerPayment(ledger, new LedgerHolds(ledger), { accountId: BUYER, apiKeyId: "k" }, Date.now);
      expect(await payment.reserve(call)).to.equal(undefined);
      frozen = freezePostgres(server);
      const startedAt = performance.now();
      // The call's fault path: its answer does not wait for the database.
      await payment.abandon();
      expect(performance.now() - startedAt).to.be.below(PING_TIMEOUT_MS * 2 + 1_500);
      expect(ledger.releasesWaiting).to.equal(1);
      frozen.thaw();
      await until("the deferred release", 10_000, () => ledger.releasesWaiting === 0);
      expect(await holdStatuses()).to.deep.equal(["released"]);
      expect(await ledger.balance(BUYER)).to.deep.equal({ availableMicros: CREDIT_MICROS, heldMicros: 0n });
    });

    it("answers a capture whose COMMIT went unanswered 503 charge_unknown, and leaves the hold captured once it lands", async () => {
      const payment = new LedgerPayment(ledger, new LedgerHolds(ledger), { accountId: BUYER, apiKeyId: "k" }, Date.now);
      expect(await payment.reserve(call)).to.equal(undefined);
      freezeAtNextCommit();
      const error = await rejection(payment.settle(noRecord(BUYER)));
      expect(error).to.be.instanceOf(GatewayError);
      expect(error).to.include({ code: "database_unavailable" });
      expect((error as GatewayError).details).to.deep.equal({ charge_unknown: true });
      expect((error as GatewayError).message).to.match(/may have been charged.*same Idempotency-Key/);
      // The pipeline abandons the payment of a call that ended in a fault.
      await payment.abandon();
      frozen!.thaw();
      await until("the deferred release", 10_000, () => ledger.releasesWaiting === 0);
      // The capture committed when the server read it: the release that followed found nothing open.
      expect(await holdStatuses()).to.deep.equal(["captured"]);
      expect(await ledger.balance(BUYER)).to.deep.equal({ availableMicros: CREDIT_MICROS - 1_000n, heldMicros: 0n });
      await assertBalanced(db);
    });

    it("gives up an idempotency key once the database answers, whether its claim's COMMIT or its release went unanswered", async () => {
      const keys = new IdempotencyKeys(new IdempotencyStore(db), 3_600_000);
      const inProgress = () => db.value<bigint>("SELECT COUNT(*) FROM idempotency_keys WHERE state = 'in_progress'");

      freezeAtNextCommit();
      expect(await rejection(keys.begin(BUYER, "claimed-in-the-dark", "hash-1"))).to.be.instanceOf(DatabaseUnavailableError);
      expect(keys.abandonsWaiting).to.equal(1);
      frozen!.thaw();
      await until("the deferred release of the claim", 10_000, () => keys.abandonsWaiting === 0);
      expect(await inProgress()).to.equal(0n);

      expect(await keys.begin(BUYER, "released-in-the-dark", "hash-2")).to.deep.equal({ kind: "new" });
      frozen = freezePostgres(server);
      await keys.abandon(BUYER, "released-in-the-dark");
      expect(keys.abandonsWaiting).to.equal(1);
      frozen.thaw();
      await until("the deferred release of the key", 10_000, () => keys.abandonsWaiting === 0);
      expect(await inProgress()).to.equal(0n);
      // The key is free: its retry runs.
      expect(await keys.begin(BUYER, "released-in-the-dark", "hash-2")).to.deep.equal({ kind: "new" });
      await keys.closeDeferred();
    });
  });

  describe("the call endpoints", () => {
    let stack: TestStack;
    afterEach(async () => {
      frozen?.thaw();
      frozen = undefined;
      await stack?.close();
    });

    it("answers 503 database_unavailable at once, not 401 for a key it cannot look up, and 200 again once the database answers", async () => {
      // No key cache: every call looks its key up in the database.
      stack = await startStack({
        config: { databaseUrl: await freshPostgresDatabase(), keyCacheTtlMs: 0, databasePingTimeoutMs: PING_TIMEOUT_MS },
      });
      expect((await stack.post("/v1/call", { skill_id: "echo", input: {} })).status).to.equal(200);
      frozen = freezePostgres(server);
      const answers: { status: number; body: any; ms: number }[] = [];
      for (let i = 0; i < 5; i++) {
        const startedAt = performance.now();
        const answer = await stack.post("/v1/call", { skill_id: "echo", input: {} });
        answers.push({ status: answer.status, body: answer.body, ms: performance.now() - startedAt });
      }
      for (const answer of answers) {
        expect(answer.status).to.equal(503);
        expect(answer.body).to.include({ success: false, code: "database_unavailable" });
        expect(answer.body.error)
          .to.be.a("string")
          .and.not.match(/SELECT|pg|ECONN/i);
      }
      // The first waits for the watch to find the server silent; the rest fail at once (without the watch's check they
      // would wait on the frozen server for as long as it stays frozen: the bound leaves a loaded machine its slack).
      expect(Math.max(...answers.map((a) => a.ms))).to.be.below(PING_TIMEOUT_MS * 2 + 1_500);
      expect(Math.max(...answers.slice(1).map((a) => a.ms))).to.be.below(1_000);
      frozen.thaw();
      const thawedAt = performance.now();
      await until("a 200 again", 10_000, async () => (await stack.post("/v1/call", { skill_id: "echo", input: {} })).status === 200);
      expect(performance.now() - thawedAt).to.be.below(3_000);
      expect(await stack.gw.db.value<bigint>("SELECT COUNT(*) FROM holds WHERE status = 'open'")).to.equal(0n);
      expect(await stack.available()).to.equal(10_000_000n - 2_000n);
    });
  });
});
