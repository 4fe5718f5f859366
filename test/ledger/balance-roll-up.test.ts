import { expect } from "chai";
import { openDatabase } from "../../server/db/db";
import { GroupCommit } from "../../server/db/group-commit";
import { CallsStore } from "../../server/gateway/calls-store";
import { PostgresDatabase } from "../../server/db/postgres/database";
import { createPostgresPool } from "../../server/db/postgres/pool";
import type { Database } from "../../server/db/sql";
import { SqliteDatabase } from "../../server/db/sqlite-database";
import { assertBalanced } from "../../server/ledger/invariants";
import { Ledger, PLATFORM_ACCOUNT_ID } from "../../server/ledger/ledger";
import { SCHEMA } from "../../server/schema";
import { freshPostgresDatabase, onSharedPostgres } from "../helpers/engines";
import { allBalances, buildCharge, holdOk } from "../helpers/ledger";

/*
 * PostgreSQL's pending balance deltas (migration 0016) and their roll-up (server/ledger/balance-roll-up.ts): a capture
 * moves no balance row, so a hot buyer's next hold and another buyer's capture for the same seller pass while its group
 * has not committed; and folding the deltas into the rows changes no balance as read.
 */

const USD = 1_000_000n;

describe("the balance roll-up and a capture's pending deltas (PostgreSQL)", function () {
  this.timeout(120_000);
  const opened = onSharedPostgres();

  /**
   * A fresh database whose statements give up after waiting 5 s for a lock (lock_timeout): an operation that would
   * wait for another transaction's row lock fails instead of hanging, whatever the machine's speed.
   */
  async function postgres(): Promise<Database> {
    const url = await freshPostgresDatabase();
    const setup = new PostgresDatabase(createPostgresPool({ url, max: 1 }));
    await setup.run("DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET lock_timeout = %L', current_database(), '5s'); END $$");
    await setup.close();
    const db = new PostgresDatabase(createPostgresPool({ url, max: 6 }));
    opened.push(db);
    return db;
  }

  async function books(db: Database) {
    const ledger = await Ledger.open(db);
    for (const id of ["user:a", "user:b"]) {
      await ledger.ensureAccount({ id, kind: "user", name: id });
      await ledger.credit(id, 10n * USD, "dev_credit");
    }
    await ledger.ensureAccount({ id: "seller:s", kind: "seller", name: "seller" });
    return ledger;
  }

  const pendingDeltas = async (db: Database) => Number(await db.value<bigint>("SELECT COUNT(*) FROM ledger_balance_deltas"));
  const pendingCalls = async (db: Database) => Number(await db.value<bigint>("SELECT COUNT(*) FROM usage_day_deltas"));
  /** A call's line of user:a on day 2, charged `charged`. */
  const aCall = (id: string, charged: bigint) => ({
    id,
    accountId: "user:a",
    apiKeyId: "k",
    skillId: "skill:echo",
    endpoint: "call" as const,
    httpStatus: 200,
    outcome: "success" as const,
    chargedMicros: charged,
    holdId: null,
    latencyUs: 1,
    createdAtMs: 2 * 86_400_000 + 5,
  });

  it("lets a buyer's next hold and another buyer's capture for the same seller pass while a capture's group is open", async () => {
    const db = await postgres();
    const ledger = await books(db);
    const first = await holdOk(ledger, "user:a", "seller:s");
    const other = await holdOk(ledger, "user:b", "seller:s");
    await db.transaction(
      async (tx) => {
        expect((await ledger.capture(first, tx)).ok).to.equal(true);
        // Other connections, while this capture's transaction holds whatever it locked: neither may wait for it.
        expect(
          (await ledger.hold({ accountId: "user:a", sellerAccountId: "seller:s", skillId: "skill:echo", charge: buildCharge() })).ok,
        ).to.equal(true);
        await db.transaction((other_tx) => ledger.capture(other, other_tx), { durable: true });
        expect((await ledger.release(await holdOk(ledger, "user:a", "seller:s"))).ok).to.equal(true);
      },
      { durable: true },
    );
    await assertBalanced(db);
  });

  it("folds every pending delta into its row without changing a balance as read", async () => {
    const db = await postgres();
    const ledger = await books(db);
    for (let i = 0; i < 5; i++) await ledger.capture(await holdOk(ledger, i % 2 === 0 ? "user:a" : "user:b", "seller:s"));
    await ledger.release(await holdOk(ledger, "user:a", "seller:s"));
    const before = await allBalances(db);
    // Five captures (held, earned, fees each) and a release (held) wait.
    expect(await pendingDeltas(db)).to.equal(16);
    expect(await db.value<bigint>("SELECT balance FROM ledger_accounts WHERE account_id = 'seller:s' AND bucket = 'earned'")).to.equal(0n);

    expect(await ledger.rollUp.once(10)).to.equal(10);
    expect(await allBalances(db)).to.deep.equal(before);
    expect(await ledger.rollUp.once()).to.equal(6);
    expect(await pendingDeltas(db)).to.equal(0);
    expect(await allBalances(db)).to.deep.equal(before);
    const rows = await db.all<{ account_id: string; bucket: string; balance: bigint }>(
      "SELECT account_id, bucket, balance FROM ledger_accounts",
    );
    expect(new Map(rows.map((r) => [`${r.account_id}/${r.bucket}`, r.balance]))).to.deep.equal(before);
    expect(before.get(`${PLATFORM_ACCOUNT_ID}/fees`)).to.equal(5n * buildCharge().feeMicros);
    expect(await ledger.rollUp.once()).to.equal(0);
    await assertBalanced(db);
  });

  it("folds the calls pending in their usage days too (migration 0019), without changing the usage as read", async () => {
    const db = await postgres();
    const ledger = await books(db);
    const calls = new CallsStore(db);
    for (let i = 0; i < 7; i++) await calls.record(aCall(`c${i}`, BigInt(i)));
    const usage = () => calls.daily("user:a", {});
    const before = await usage();
    expect(before).to.deep.equal([{ day: 2, spendMicros: 21n, calls: 7 }]);
    expect(await pendingCalls(db)).to.equal(7);
    // The larger of the two folds: no balance delta waits here.
    expect(await ledger.rollUp.once(4)).to.equal(4);
    expect(await usage()).to.deep.equal(before);
    expect(await ledger.rollUp.once()).to.equal(3);
    expect(await pendingCalls(db)).to.equal(0);
    expect(await usage()).to.deep.equal(before);
    expect(await db.all("SELECT day, calls, spend_micros FROM usage_days")).to.deep.equal([{ day: 2n, calls: 7n, spend_micros: 21n }]);
  });

  it("is run by a replica's ledger until it closes, and by nothing on SQLite", async () => {
    const db = await postgres();
    const ledger = await Ledger.open(db, { replicaId: "replica-test" });
    await ledger.ensureAccount({ id: "user:a", kind: "user", name: "a" });
    await ledger.ensureAccount({ id: "seller:s", kind: "seller", name: "seller" });
    await ledger.credit("user:a", USD, "dev_credit");
    await ledger.capture(await holdOk(ledger, "user:a", "seller:s"));
    await new CallsStore(db).record(aCall("c1", 5n));
    while ((await pendingDeltas(db)) + (await pendingCalls(db)) > 0) await new Promise((resolve) => setTimeout(resolve, 50));
    await ledger.closeDeferred();
    expect(await db.all("SELECT calls, spend_micros FROM usage_days")).to.deep.equal([{ calls: 1n, spend_micros: 5n }]);

    const connection = openDatabase(":memory:", SCHEMA);
    const sqlite = new SqliteDatabase(connection, new GroupCommit(connection));
    opened.push(sqlite);
    expect(await (await Ledger.open(sqlite)).rollUp.once()).to.equal(0);
  });
});
