import { expect } from "chai";
import BetterSqlite from "better-sqlite3";
import { openDatabase } from "../../server/db/db";
import type { Database } from "../../server/db/sql";
import { SqliteDatabase } from "../../server/db/sqlite-database";
import { SCHEMA } from "../../server/schema";
import { assertBalanced, ENTRY_SUMS_TO_ZERO, LedgerInvariantError } from "../../server/ledger/invariants";
import { DEV_CREDIT_SOURCE_ID, ESCROW_SOURCE_ID, Ledger, PLATFORM_ACCOUNT_ID } from "../../server/ledger/ledger";
import { describeEachEngine } from "../helpers/engines";
import {
  allBalances,
  buildCharge,
  constraintOf,
  countRows,
  holdOk,
  holdStatus,
  makeLedger,
  makeParties,
  makeTempDir,
  rejectionOf,
  sqliteOf,
  withoutCheckConstraints,
} from "../helpers/ledger";

describeEachEngine("Ledger", (engine) => {
  let db: Database;
  let ledger: Ledger;

  beforeEach(async () => {
    ({ db, ledger } = await makeLedger(engine));
  });

  // Every test leaves the books consistent, whatever it did to them. (Declared in each group: the suite's own
  // afterEach, which closes the database, runs before any declared beside it.)
  const checkBooksAfterEach = () => afterEach(() => assertBalanced(db));

  const bucketsOf = async (accountId: string) =>
    (await db.all<{ bucket: string }>("SELECT bucket FROM ledger_accounts WHERE account_id = ? ORDER BY bucket", [accountId])).map(
      (r) => r.bucket,
    );

  describe("construction", () => {
    checkBooksAfterEach();

    it("creates the platform account and the two money sources", async () => {
      expect(await ledger.getAccount(PLATFORM_ACCOUNT_ID)).to.include({ kind: "platform" });
      expect(await ledger.getAccount(DEV_CREDIT_SOURCE_ID)).to.include({ kind: "system" });
      expect(await ledger.getAccount(ESCROW_SOURCE_ID)).to.include({ kind: "system" });
      expect(await bucketsOf(PLATFORM_ACCOUNT_ID)).to.deep.equal(["fees"]);
      expect(await bucketsOf(DEV_CREDIT_SOURCE_ID)).to.deep.equal(["source"]);
    });

    it("can be opened again on the same database without creating anything twice", async () => {
      const accounts = await countRows(db, "accounts");
      await Ledger.open(db);
      expect(await countRows(db, "accounts")).to.equal(accounts);
    });
  });

  describe("ensureAccount", () => {
    checkBooksAfterEach();

    it("creates a user with empty available, held and earned balances", async () => {
      const account = await ledger.ensureAccount({ id: "user:bob", kind: "user", name: "Bob" });
      expect(account).to.deep.equal({ id: "user:bob", kind: "user", name: "Bob", dailyCallCap: null });
      expect(await bucketsOf("user:bob")).to.deep.equal(["available", "earned", "held"]);
      expect(await ledger.balance("user:bob")).to.deep.equal({ availableMicros: 0n, heldMicros: 0n });
    });

    it("returns the existing account instead of creating a second one", async () => {
      await ledger.ensureAccount({ id: "user:bob", kind: "user", name: "Bob", dailyCallCap: 5 });
      const again = await ledger.ensureAccount({ id: "user:bob", kind: "user", name: "Robert" });
      expect(again).to.deep.equal({ id: "user:bob", kind: "user", name: "Bob", dailyCallCap: 5 });
      expect(await db.value("SELECT COUNT(*) FROM accounts WHERE id = 'user:bob'")).to.equal(1n);
    });

    it("gives an account a fresh id when none is asked for", async () => {
      const first = await ledger.ensureAccount({ kind: "seller", name: "Anonymous seller" });
      const second = await ledger.ensureAccount({ kind: "seller", name: "Anonymous seller" });
      expect(first.id).to.match(/^[0-9a-f-]{36}$/);
      expect(second.id).to.not.equal(first.id);
    });

    it("says an unknown account does not exist", async () => {
      expect(await ledger.getAccount("user:nobody")).to.equal(undefined);
      expect(await ledger.balance("user:nobody")).to.deep.equal({ availableMicros: 0n, heldMicros: 0n });
    });
  });

  describe("credit", () => {
    checkBooksAfterEach();

    it("moves a development credit from the dev-credit source to the user's available balance", async () => {
      const { userId } = await makeParties(ledger, 0n);
      await ledger.credit(userId, 5_000_000n, "dev_credit", "seed");
      expect(await ledger.balance(userId)).to.deep.equal({ availableMicros: 5_000_000n, heldMicros: 0n });
      expect(await ledger.balanceOf(DEV_CREDIT_SOURCE_ID, "source")).to.equal(-5_000_000n);
      expect(await ledger.balanceOf(ESCROW_SOURCE_ID, "source")).to.equal(0n);
      expect(await db.all("SELECT kind, memo FROM entries")).to.deep.equal([{ kind: "dev_credit", memo: "seed" }]);
    });

    it("records a deposit against the escrow source, not as a development credit", async () => {
      const { userId } = await makeParties(ledger, 0n);
      await ledger.credit(userId, 2_000_000n, "deposit");
      expect((await ledger.balance(userId)).availableMicros).to.equal(2_000_000n);
      expect(await ledger.balanceOf(ESCROW_SOURCE_ID, "source")).to.equal(-2_000_000n);
      expect(await ledger.balanceOf(DEV_CREDIT_SOURCE_ID, "source")).to.equal(0n);
      expect(await db.all("SELECT kind FROM entries")).to.deep.equal([{ kind: "deposit" }]);
    });

    it("adds successive credits up", async () => {
      const { userId } = await makeParties(ledger, 0n);
      await ledger.credit(userId, 1n, "dev_credit");
      await ledger.credit(userId, 2_000_000n, "deposit");
      expect((await ledger.balance(userId)).availableMicros).to.equal(2_000_001n);
    });

    it("refuses a zero or negative credit and writes nothing", async () => {
      const { userId } = await makeParties(ledger, 0n);
      for (const amount of [0n, -1n]) {
        const error = await rejectionOf(ledger.credit(userId, amount, amount === 0n ? "dev_credit" : "deposit"));
        expect(error).to.be.instanceOf(RangeError);
        expect(error.message).to.contain("credit must be positive");
      }
      expect(await countRows(db, "entries")).to.equal(0);
    });

    it("refuses to credit an account that does not exist, and writes nothing", async () => {
      const error = await rejectionOf(ledger.credit("user:nobody", 1_000_000n, "dev_credit"));
      expect(constraintOf(error), error.message).to.equal("foreign_key");
      expect(await countRows(db, "entries")).to.equal(0);
      expect(await countRows(db, "postings")).to.equal(0);
      expect(await ledger.balanceOf(DEV_CREDIT_SOURCE_ID, "source")).to.equal(0n);
    });
  });

  describe("hold", () => {
    checkBooksAfterEach();

    it("moves the charge from available to held and records an open hold", async () => {
      const { userId, sellerId } = await makeParties(ledger, 5_000_000n);
      const result = await ledger.hold({ accountId: userId, sellerAccountId: sellerId, skillId: "skill:echo", charge: buildCharge() });
      expect(result.ok).to.equal(true);
      if (!result.ok) return;
      expect(result.hold).to.deep.include({
        accountId: userId,
        sellerAccountId: sellerId,
        skillId: "skill:echo",
        amountMicros: 1_000_000n,
        sellerMicros: 900_000n,
        feeMicros: 100_000n,
      });
      expect(await ledger.balance(userId)).to.deep.equal({ availableMicros: 4_000_000n, heldMicros: 1_000_000n });
      expect(await holdStatus(db, result.hold.id)).to.equal("open");
    });

    it("says how much is available and needed when the balance is short, and writes nothing", async () => {
      const { userId, sellerId } = await makeParties(ledger, 999_999n);
      const before = {
        entries: await countRows(db, "entries"),
        postings: await countRows(db, "postings"),
        balances: await allBalances(db),
      };
      const result = await ledger.hold({ accountId: userId, sellerAccountId: sellerId, skillId: "skill:echo", charge: buildCharge() });
      expect(result).to.deep.equal({
        ok: false,
        reason: "insufficient_balance",
        availableMicros: 999_999n,
        neededMicros: 1_000_000n,
      });
      expect(await countRows(db, "holds")).to.equal(0);
      expect(await countRows(db, "entries")).to.equal(before.entries);
      expect(await countRows(db, "postings")).to.equal(before.postings);
      expect(await allBalances(db)).to.deep.equal(before.balances);
    });

    it("needs the price plus the fee when the fee is on top", async () => {
      const { userId, sellerId } = await makeParties(ledger, 1_000_000n);
      const charge = buildCharge({ feeMode: "on_top" });
      const result = await ledger.hold({ accountId: userId, sellerAccountId: sellerId, skillId: "skill:echo", charge });
      expect(result).to.deep.include({ ok: false, availableMicros: 1_000_000n, neededMicros: 1_100_000n });
    });

    it("lets a hold take the whole available balance, and not one unit more", async () => {
      const { userId, sellerId } = await makeParties(ledger, 1_000_001n);
      await holdOk(ledger, userId, sellerId, buildCharge({ priceMicros: 1_000_000n }));
      await holdOk(ledger, userId, sellerId, buildCharge({ priceMicros: 1n }));
      const third = await ledger.hold({
        accountId: userId,
        sellerAccountId: sellerId,
        skillId: "skill:echo",
        charge: buildCharge({ priceMicros: 1n }),
      });
      expect(third).to.deep.include({ ok: false, availableMicros: 0n, neededMicros: 1n });
      expect(await ledger.balance(userId)).to.deep.equal({ availableMicros: 0n, heldMicros: 1_000_001n });
    });

    if (engine.name === "sqlite") {
      it("counts a hold taken earlier in the same, uncommitted batch", async () => {
        const { userId, sellerId } = await makeParties(ledger, 1_500_000n);
        const { commit } = sqliteOf(db);
        const batches = commit.committedBatches;
        await holdOk(ledger, userId, sellerId);
        const second = await ledger.hold({ accountId: userId, sellerAccountId: sellerId, skillId: "skill:echo", charge: buildCharge() });
        expect(commit.committedBatches, "no commit between the two holds").to.equal(batches);
        expect(second).to.deep.include({ ok: false, availableMicros: 500_000n });
      });
    } else {
      it("counts a hold committed just before", async () => {
        const { userId, sellerId } = await makeParties(ledger, 1_500_000n);
        await holdOk(ledger, userId, sellerId);
        const second = await ledger.hold({ accountId: userId, sellerAccountId: sellerId, skillId: "skill:echo", charge: buildCharge() });
        expect(second).to.deep.include({ ok: false, availableMicros: 500_000n });
      });
    }

    it("treats an unknown payer as having nothing", async () => {
      const { sellerId } = await makeParties(ledger, 0n);
      const result = await ledger.hold({
        accountId: "user:nobody",
        sellerAccountId: sellerId,
        skillId: "skill:echo",
        charge: buildCharge(),
      });
      expect(result).to.deep.include({ ok: false, availableMicros: 0n, neededMicros: 1_000_000n });
    });

    it("refuses a charge of zero", async () => {
      const { userId, sellerId } = await makeParties(ledger);
      const charge = buildCharge({ priceMicros: 0n });
      const error = await rejectionOf(ledger.hold({ accountId: userId, sellerAccountId: sellerId, skillId: "skill:free", charge }));
      expect(error).to.be.instanceOf(RangeError);
      expect(error.message).to.contain("hold must be positive");
      expect(await countRows(db, "holds")).to.equal(0);
    });

    it("refuses a charge whose seller share and fee do not add up, and writes nothing", async () => {
      const { userId, sellerId } = await makeParties(ledger);
      const charge = buildCharge({ sellerMicros: 950_000n });
      const balances = await allBalances(db);
      const error = await rejectionOf(ledger.hold({ accountId: userId, sellerAccountId: sellerId, skillId: "skill:echo", charge }));
      expect(constraintOf(error), error.message).to.equal("check");
      expect(await countRows(db, "holds")).to.equal(0);
      expect(await allBalances(db)).to.deep.equal(balances);
    });

    it("refuses a hold for a seller that does not exist, and writes nothing", async () => {
      const { userId } = await makeParties(ledger);
      const balances = await allBalances(db);
      const error = await rejectionOf(
        ledger.hold({ accountId: userId, sellerAccountId: "seller:ghost", skillId: "skill:echo", charge: buildCharge() }),
      );
      expect(constraintOf(error), error.message).to.equal("foreign_key");
      expect(await countRows(db, "holds")).to.equal(0);
      expect(await allBalances(db)).to.deep.equal(balances);
    });
  });

  describe("capture", () => {
    checkBooksAfterEach();

    it("pays 90% to the seller's earnings and 10% to the platform's fees", async () => {
      const { userId, sellerId } = await makeParties(ledger, 5_000_000n);
      const holdId = await holdOk(ledger, userId, sellerId, buildCharge({ priceMicros: 2_000_000n }));
      const result = await ledger.capture(holdId);
      expect(result).to.deep.include({ ok: true });
      expect(await ledger.balance(userId)).to.deep.equal({ availableMicros: 3_000_000n, heldMicros: 0n });
      expect(await ledger.balanceOf(sellerId, "earned")).to.equal(1_800_000n);
      expect(await ledger.balanceOf(PLATFORM_ACCOUNT_ID, "fees")).to.equal(200_000n);
      expect(await holdStatus(db, holdId)).to.equal("captured");
    });

    it("pays the seller the full price when the fee is on top", async () => {
      const { userId, sellerId } = await makeParties(ledger, 5_000_000n);
      const holdId = await holdOk(ledger, userId, sellerId, buildCharge({ feeMode: "on_top" }));
      await ledger.capture(holdId);
      expect((await ledger.balance(userId)).availableMicros).to.equal(3_900_000n);
      expect(await ledger.balanceOf(sellerId, "earned")).to.equal(1_000_000n);
      expect(await ledger.balanceOf(PLATFORM_ACCOUNT_ID, "fees")).to.equal(100_000n);
    });

    it("pays everything to the seller when the fee rounds down to nothing", async () => {
      const { userId, sellerId } = await makeParties(ledger);
      const holdId = await holdOk(ledger, userId, sellerId, buildCharge({ priceMicros: 9n }));
      expect((await ledger.capture(holdId)).ok).to.equal(true);
      expect(await ledger.balanceOf(sellerId, "earned")).to.equal(9n);
      expect(await ledger.balanceOf(PLATFORM_ACCOUNT_ID, "fees")).to.equal(0n);
    });

    it("pays everything to the platform at a fee of 10000 bps", async () => {
      const { userId, sellerId } = await makeParties(ledger);
      const holdId = await holdOk(ledger, userId, sellerId, buildCharge({ feeBps: 10_000n }));
      expect((await ledger.capture(holdId)).ok).to.equal(true);
      expect(await ledger.balanceOf(sellerId, "earned")).to.equal(0n);
      expect(await ledger.balanceOf(PLATFORM_ACCOUNT_ID, "fees")).to.equal(1_000_000n);
    });

    it("does not let a hold be captured twice", async () => {
      const { userId, sellerId } = await makeParties(ledger);
      const holdId = await holdOk(ledger, userId, sellerId);
      expect((await ledger.capture(holdId)).ok).to.equal(true);
      const balances = await allBalances(db);
      expect(await ledger.capture(holdId)).to.deep.equal({ ok: false, reason: "hold_not_open" });
      expect(await allBalances(db)).to.deep.equal(balances);
    });

    it("does not capture a hold that was released", async () => {
      const { userId, sellerId } = await makeParties(ledger);
      const holdId = await holdOk(ledger, userId, sellerId);
      await ledger.release(holdId);
      expect(await ledger.capture(holdId)).to.deep.equal({ ok: false, reason: "hold_not_open" });
      expect(await ledger.balanceOf(sellerId, "earned")).to.equal(0n);
      expect(await holdStatus(db, holdId)).to.equal("released");
    });

    it("does not capture a hold that never existed", async () => {
      expect(await ledger.capture("hold:unknown")).to.deep.equal({ ok: false, reason: "hold_not_open" });
    });

    it("refuses to write a capture whose postings would not sum to zero, and writes nothing", async () => {
      const { userId, sellerId } = await makeParties(ledger);
      const holdId = await holdOk(ledger, userId, sellerId);
      // A hold whose split no longer adds up to its amount: the schema's CHECK refuses it, so the
      // corruption switches the check off. Its capture would pay out one unit more than was held.
      await withoutCheckConstraints(db, ["holds"], async () => {
        await db.run("UPDATE holds SET seller_amount = seller_amount + 1 WHERE id = ?", [holdId]);
      });
      const balances = await allBalances(db);
      const entries = await countRows(db, "entries");

      const error = await rejectionOf(ledger.capture(holdId));
      expect(error).to.be.instanceOf(LedgerInvariantError);
      const { violations } = error as LedgerInvariantError;
      expect(violations.map((v) => v.rule)).to.deep.equal([ENTRY_SUMS_TO_ZERO]);
      expect(violations[0].rows).to.have.length(1);
      expect(violations[0].rows[0]).to.include({ total: 1n });

      expect(await countRows(db, "entries")).to.equal(entries);
      expect(await allBalances(db)).to.deep.equal(balances);
      expect(await holdStatus(db, holdId)).to.equal("open");
      // Its release moves the held amount back and balances, so the money is not stuck.
      expect((await ledger.release(holdId)).ok).to.equal(true);
      expect(await ledger.balance(userId)).to.deep.equal({ availableMicros: 10_000_000n, heldMicros: 0n });
    });

    it("settles only the hold it is given", async () => {
      const { userId, sellerId } = await makeParties(ledger);
      const first = await holdOk(ledger, userId, sellerId);
      const second = await holdOk(ledger, userId, sellerId);
      await ledger.capture(first);
      expect((await ledger.balance(userId)).heldMicros).to.equal(1_000_000n);
      expect((await ledger.capture(second)).ok).to.equal(true);
    });
  });

  describe("release", () => {
    checkBooksAfterEach();

    it("gives the held charge back to the available balance", async () => {
      const { userId, sellerId } = await makeParties(ledger, 5_000_000n);
      const holdId = await holdOk(ledger, userId, sellerId);
      const result = await ledger.release(holdId);
      expect(result).to.deep.include({ ok: true });
      expect(await ledger.balance(userId)).to.deep.equal({ availableMicros: 5_000_000n, heldMicros: 0n });
      expect(await ledger.balanceOf(sellerId, "earned")).to.equal(0n);
      expect(await ledger.balanceOf(PLATFORM_ACCOUNT_ID, "fees")).to.equal(0n);
    });

    it("does not let a hold be released twice", async () => {
      const { userId, sellerId } = await makeParties(ledger);
      const holdId = await holdOk(ledger, userId, sellerId);
      await ledger.release(holdId);
      expect(await ledger.release(holdId)).to.deep.equal({ ok: false, reason: "hold_not_open" });
      expect((await ledger.balance(userId)).availableMicros).to.equal(10_000_000n);
    });

    it("does not release a hold that was captured", async () => {
      const { userId, sellerId } = await makeParties(ledger);
      const holdId = await holdOk(ledger, userId, sellerId);
      await ledger.capture(holdId);
      expect(await ledger.release(holdId)).to.deep.equal({ ok: false, reason: "hold_not_open" });
      expect(await ledger.balance(userId)).to.deep.equal({ availableMicros: 9_000_000n, heldMicros: 0n });
    });
  });

  describe("recoverOpenHolds", () => {
    checkBooksAfterEach();

    it("returns 0 and changes nothing when every hold is settled", async () => {
      const { userId, sellerId } = await makeParties(ledger);
      await ledger.capture(await holdOk(ledger, userId, sellerId));
      await ledger.release(await holdOk(ledger, userId, sellerId));
      const balances = await allBalances(db);
      expect(await ledger.recoverOpenHolds()).to.equal(0);
      expect(await allBalances(db)).to.deep.equal(balances);
    });

    it("releases only the holds of the replicas it is given, and those naming no replica", async () => {
      const { userId, sellerId } = await makeParties(ledger);
      const replicaA = await Ledger.open(db, { replicaId: "replica-a" });
      const replicaB = await Ledger.open(db, { replicaId: "replica-b" });
      const ofA = await holdOk(replicaA, userId, sellerId);
      const ofB = await holdOk(replicaB, userId, sellerId);
      const ofNone = await holdOk(ledger, userId, sellerId);
      expect(await db.value("SELECT replica_id FROM holds WHERE id = ?", [ofA])).to.equal("replica-a");
      expect(await db.value("SELECT replica_id FROM holds WHERE id = ?", [ofNone])).to.equal(null);
      expect(await ledger.recoverOpenHolds({ ofReplicas: ["replica-a"] })).to.equal(2);
      expect(await holdStatus(db, ofA)).to.equal("released");
      expect(await holdStatus(db, ofNone)).to.equal("released");
      expect(await holdStatus(db, ofB)).to.equal("open");
      expect(await ledger.balance(userId)).to.deep.equal({ availableMicros: 9_000_000n, heldMicros: 1_000_000n });
    });

    it("given no replica, releases only the holds naming none", async () => {
      const { userId, sellerId } = await makeParties(ledger);
      const replicaA = await Ledger.open(db, { replicaId: "replica-a" });
      const ofA = await holdOk(replicaA, userId, sellerId);
      const ofNone = await holdOk(ledger, userId, sellerId);
      expect(await ledger.recoverOpenHolds({ ofReplicas: [] })).to.equal(1);
      expect(await holdStatus(db, ofNone)).to.equal("released");
      expect(await holdStatus(db, ofA)).to.equal("open");
      expect(await ledger.balance(userId)).to.deep.equal({ availableMicros: 9_000_000n, heldMicros: 1_000_000n });
    });
  });
});

/** A SQLite file's books after the process writing them died: what was committed, and nothing else. */
describe("Ledger after a crash (sqlite)", () => {
  let tmp: ReturnType<typeof makeTempDir>;
  const open: BetterSqlite.Database[] = [];

  beforeEach(() => {
    tmp = makeTempDir();
  });

  afterEach(() => {
    for (const db of open.splice(0)) if (db.open) db.close();
    tmp.remove();
  });

  /** A ledger on the file, as a gateway opens it; its connection is closed after the test. */
  async function openLedger(file: string): Promise<{ db: SqliteDatabase; ledger: Ledger }> {
    const { db, ledger } = await makeLedger(undefined, { file });
    const sqlite = sqliteOf(db);
    open.push(sqlite.db);
    return { db: sqlite, ledger };
  }

  it("releases at startup the holds a crashed process left open, charging nobody for them", async () => {
    const file = tmp.file("ledger.db");
    const before = await openLedger(file);
    const { userId, sellerId } = await makeParties(before.ledger, 5_000_000n);
    const captured = await holdOk(before.ledger, userId, sellerId);
    await before.ledger.capture(captured);
    const released = await holdOk(before.ledger, userId, sellerId);
    await before.ledger.release(released);
    await holdOk(before.ledger, userId, sellerId, buildCharge({ priceMicros: 700_000n }));
    await holdOk(before.ledger, userId, sellerId, buildCharge({ priceMicros: 300_000n }));
    before.db.commit.flush();
    // The process dies here: the two open holds are on disk, their calls' outcomes unknown.
    before.db.db.close();

    const after = new SqliteDatabase(openDatabase(file, SCHEMA));
    open.push(after.db);
    const ledger = await Ledger.open(after);
    expect(await ledger.balance(userId)).to.deep.equal({ availableMicros: 3_000_000n, heldMicros: 1_000_000n });
    expect(await ledger.recoverOpenHolds()).to.equal(2);
    expect(await ledger.balance(userId)).to.deep.equal({ availableMicros: 4_000_000n, heldMicros: 0n });
    expect(await ledger.balanceOf(sellerId, "earned")).to.equal(900_000n);
    expect(await ledger.balanceOf(PLATFORM_ACCOUNT_ID, "fees")).to.equal(100_000n);
    await assertBalanced(after);
    expect(await ledger.recoverOpenHolds(), "a second recovery finds nothing left").to.equal(0);

    after.commit.flush();
    const reader = new BetterSqlite(file, { readonly: true });
    try {
      const statuses = reader.prepare("SELECT status, COUNT(*) AS n FROM holds GROUP BY status ORDER BY status").all();
      expect(statuses).to.deep.equal([
        { status: "captured", n: 1 },
        { status: "released", n: 3 },
      ]);
    } finally {
      reader.close();
    }
  });

  it("loses a batch that was never committed as a whole, never half of it", async () => {
    const file = tmp.file("ledger.db");
    const before = await openLedger(file);
    const { userId, sellerId } = await makeParties(before.ledger, 5_000_000n);
    before.db.commit.flush();
    const holdId = await holdOk(before.ledger, userId, sellerId);
    await before.ledger.capture(holdId);
    // Closed with the batch still open: as if the process died before the next tick.
    before.db.db.close();

    const after = new SqliteDatabase(openDatabase(file, SCHEMA));
    open.push(after.db);
    const ledger = await Ledger.open(after);
    expect(await ledger.recoverOpenHolds()).to.equal(0);
    expect(await ledger.balance(userId)).to.deep.equal({ availableMicros: 5_000_000n, heldMicros: 0n });
    expect(await ledger.balanceOf(sellerId, "earned")).to.equal(0n);
    expect(await countRows(after, "holds")).to.equal(0);
    await assertBalanced(after);
  });
});
