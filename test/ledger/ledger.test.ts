import { expect } from "chai";
import Database from "better-sqlite3";
import { openDatabase, type Db } from "../../server/db/db";
import { SCHEMA } from "../../server/schema";
import { assertBalanced, ENTRY_SUMS_TO_ZERO, LedgerInvariantError } from "../../server/ledger/invariants";
import { DEV_CREDIT_SOURCE_ID, ESCROW_SOURCE_ID, Ledger, PLATFORM_ACCOUNT_ID } from "../../server/ledger/ledger";
import { allBalances, buildCharge, countRows, holdOk, makeLedger, makeParties, makeTempDir } from "../helpers/ledger";

describe("Ledger", () => {
  let db: Db;
  let ledger: Ledger;

  beforeEach(() => {
    ({ db, ledger } = makeLedger());
  });

  afterEach(() => {
    // Every test leaves the books consistent, whatever it did to them.
    assertBalanced(db);
    db.close();
  });

  const bucketsOf = (accountId: string) =>
    db.prepare("SELECT bucket FROM ledger_accounts WHERE account_id = ? ORDER BY bucket").pluck().all(accountId);

  describe("construction", () => {
    it("creates the platform account and the two money sources", () => {
      expect(ledger.getAccount(PLATFORM_ACCOUNT_ID)).to.include({ kind: "platform" });
      expect(ledger.getAccount(DEV_CREDIT_SOURCE_ID)).to.include({ kind: "system" });
      expect(ledger.getAccount(ESCROW_SOURCE_ID)).to.include({ kind: "system" });
      expect(bucketsOf(PLATFORM_ACCOUNT_ID)).to.deep.equal(["fees"]);
      expect(bucketsOf(DEV_CREDIT_SOURCE_ID)).to.deep.equal(["source"]);
    });

    it("can be constructed again on the same database without creating anything twice", () => {
      const accounts = countRows(db, "accounts");
      new Ledger(db, ledger.commit);
      expect(countRows(db, "accounts")).to.equal(accounts);
    });
  });

  describe("ensureAccount", () => {
    it("creates a user with empty available, held and earned balances", () => {
      const account = ledger.ensureAccount({ id: "user:bob", kind: "user", name: "Bob" });
      expect(account).to.deep.equal({ id: "user:bob", kind: "user", name: "Bob", dailyCallCap: null });
      expect(bucketsOf("user:bob")).to.deep.equal(["available", "earned", "held"]);
      expect(ledger.balance("user:bob")).to.deep.equal({ availableMicros: 0n, heldMicros: 0n });
    });

    it("returns the existing account instead of creating a second one", () => {
      ledger.ensureAccount({ id: "user:bob", kind: "user", name: "Bob", dailyCallCap: 5 });
      const again = ledger.ensureAccount({ id: "user:bob", kind: "user", name: "Robert" });
      expect(again).to.deep.equal({ id: "user:bob", kind: "user", name: "Bob", dailyCallCap: 5 });
      expect(db.prepare("SELECT COUNT(*) FROM accounts WHERE id = 'user:bob'").pluck().get()).to.equal(1n);
    });

    it("gives an account a fresh id when none is asked for", () => {
      const first = ledger.ensureAccount({ kind: "seller", name: "Anonymous seller" });
      const second = ledger.ensureAccount({ kind: "seller", name: "Anonymous seller" });
      expect(first.id).to.match(/^[0-9a-f-]{36}$/);
      expect(second.id).to.not.equal(first.id);
    });

    it("says an unknown account does not exist", () => {
      expect(ledger.getAccount("user:nobody")).to.equal(undefined);
      expect(ledger.balance("user:nobody")).to.deep.equal({ availableMicros: 0n, heldMicros: 0n });
    });
  });

  describe("credit", () => {
    it("moves a development credit from the dev-credit source to the user's available balance", () => {
      const { userId } = makeParties(ledger, 0n);
      ledger.credit(userId, 5_000_000n, "dev_credit", "seed");
      expect(ledger.balance(userId)).to.deep.equal({ availableMicros: 5_000_000n, heldMicros: 0n });
      expect(ledger.balanceOf(DEV_CREDIT_SOURCE_ID, "source")).to.equal(-5_000_000n);
      expect(ledger.balanceOf(ESCROW_SOURCE_ID, "source")).to.equal(0n);
      expect(db.prepare("SELECT kind, memo FROM entries").all()).to.deep.equal([{ kind: "dev_credit", memo: "seed" }]);
    });

    it("records a deposit against the escrow source, not as a development credit", () => {
      const { userId } = makeParties(ledger, 0n);
      ledger.credit(userId, 2_000_000n, "deposit");
      expect(ledger.balance(userId).availableMicros).to.equal(2_000_000n);
      expect(ledger.balanceOf(ESCROW_SOURCE_ID, "source")).to.equal(-2_000_000n);
      expect(ledger.balanceOf(DEV_CREDIT_SOURCE_ID, "source")).to.equal(0n);
      expect(db.prepare("SELECT kind FROM entries").pluck().all()).to.deep.equal(["deposit"]);
    });

    it("adds successive credits up", () => {
      const { userId } = makeParties(ledger, 0n);
      ledger.credit(userId, 1n, "dev_credit");
      ledger.credit(userId, 2_000_000n, "deposit");
      expect(ledger.balance(userId).availableMicros).to.equal(2_000_001n);
    });

    it("refuses a zero or negative credit and writes nothing", () => {
      const { userId } = makeParties(ledger, 0n);
      expect(() => ledger.credit(userId, 0n, "dev_credit")).to.throw(RangeError, "credit must be positive");
      expect(() => ledger.credit(userId, -1n, "deposit")).to.throw(RangeError, "credit must be positive");
      expect(countRows(db, "entries")).to.equal(0);
    });

    it("refuses to credit an account that does not exist, and writes nothing", () => {
      expect(() => ledger.credit("user:nobody", 1_000_000n, "dev_credit")).to.throw("FOREIGN KEY constraint failed");
      expect(countRows(db, "entries")).to.equal(0);
      expect(countRows(db, "postings")).to.equal(0);
      expect(ledger.balanceOf(DEV_CREDIT_SOURCE_ID, "source")).to.equal(0n);
    });
  });

  describe("hold", () => {
    it("moves the charge from available to held and records an open hold", () => {
      const { userId, sellerId } = makeParties(ledger, 5_000_000n);
      const result = ledger.hold({ accountId: userId, sellerAccountId: sellerId, skillId: "skill:echo", charge: buildCharge() });
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
      expect(ledger.balance(userId)).to.deep.equal({ availableMicros: 4_000_000n, heldMicros: 1_000_000n });
      expect(db.prepare("SELECT status FROM holds WHERE id = ?").pluck().get(result.hold.id)).to.equal("open");
    });

    it("says how much is available and needed when the balance is short, and writes nothing", () => {
      const { userId, sellerId } = makeParties(ledger, 999_999n);
      const before = { entries: countRows(db, "entries"), postings: countRows(db, "postings"), balances: allBalances(db) };
      const result = ledger.hold({ accountId: userId, sellerAccountId: sellerId, skillId: "skill:echo", charge: buildCharge() });
      expect(result).to.deep.equal({
        ok: false,
        reason: "insufficient_balance",
        availableMicros: 999_999n,
        neededMicros: 1_000_000n,
      });
      expect(countRows(db, "holds")).to.equal(0);
      expect(countRows(db, "entries")).to.equal(before.entries);
      expect(countRows(db, "postings")).to.equal(before.postings);
      expect(allBalances(db)).to.deep.equal(before.balances);
    });

    it("needs the price plus the fee when the fee is on top", () => {
      const { userId, sellerId } = makeParties(ledger, 1_000_000n);
      const charge = buildCharge({ feeMode: "on_top" });
      const result = ledger.hold({ accountId: userId, sellerAccountId: sellerId, skillId: "skill:echo", charge });
      expect(result).to.deep.include({ ok: false, availableMicros: 1_000_000n, neededMicros: 1_100_000n });
    });

    it("lets a hold take the whole available balance, and not one unit more", () => {
      const { userId, sellerId } = makeParties(ledger, 1_000_001n);
      holdOk(ledger, userId, sellerId, buildCharge({ priceMicros: 1_000_000n }));
      holdOk(ledger, userId, sellerId, buildCharge({ priceMicros: 1n }));
      const third = ledger.hold({
        accountId: userId,
        sellerAccountId: sellerId,
        skillId: "skill:echo",
        charge: buildCharge({ priceMicros: 1n }),
      });
      expect(third).to.deep.include({ ok: false, availableMicros: 0n, neededMicros: 1n });
      expect(ledger.balance(userId)).to.deep.equal({ availableMicros: 0n, heldMicros: 1_000_001n });
    });

    it("counts a hold taken earlier in the same, uncommitted batch", () => {
      const { userId, sellerId } = makeParties(ledger, 1_500_000n);
      const batches = ledger.commit.committedBatches;
      holdOk(ledger, userId, sellerId);
      const second = ledger.hold({ accountId: userId, sellerAccountId: sellerId, skillId: "skill:echo", charge: buildCharge() });
      expect(ledger.commit.committedBatches, "no commit between the two holds").to.equal(batches);
      expect(second).to.deep.include({ ok: false, availableMicros: 500_000n });
    });

    it("treats an unknown payer as having nothing", () => {
      const { sellerId } = makeParties(ledger, 0n);
      const result = ledger.hold({ accountId: "user:nobody", sellerAccountId: sellerId, skillId: "skill:echo", charge: buildCharge() });
      expect(result).to.deep.include({ ok: false, availableMicros: 0n, neededMicros: 1_000_000n });
    });

    it("refuses a charge of zero", () => {
      const { userId, sellerId } = makeParties(ledger);
      const charge = buildCharge({ priceMicros: 0n });
      expect(() => ledger.hold({ accountId: userId, sellerAccountId: sellerId, skillId: "skill:free", charge })).to.throw(
        RangeError,
        "hold must be positive",
      );
      expect(countRows(db, "holds")).to.equal(0);
    });

    it("refuses a charge whose seller share and fee do not add up, and writes nothing", () => {
      const { userId, sellerId } = makeParties(ledger);
      const charge = buildCharge({ sellerMicros: 950_000n });
      const balances = allBalances(db);
      expect(() => ledger.hold({ accountId: userId, sellerAccountId: sellerId, skillId: "skill:echo", charge })).to.throw(
        "CHECK constraint failed",
      );
      expect(countRows(db, "holds")).to.equal(0);
      expect(allBalances(db)).to.deep.equal(balances);
    });

    it("refuses a hold for a seller that does not exist, and writes nothing", () => {
      const { userId } = makeParties(ledger);
      const balances = allBalances(db);
      expect(() =>
        ledger.hold({ accountId: userId, sellerAccountId: "seller:ghost", skillId: "skill:echo", charge: buildCharge() }),
      ).to.throw("FOREIGN KEY constraint failed");
      expect(countRows(db, "holds")).to.equal(0);
      expect(allBalances(db)).to.deep.equal(balances);
    });
  });

  describe("capture", () => {
    it("pays 90% to the seller's earnings and 10% to the platform's fees", () => {
      const { userId, sellerId } = makeParties(ledger, 5_000_000n);
      const holdId = holdOk(ledger, userId, sellerId, buildCharge({ priceMicros: 2_000_000n }));
      const result = ledger.capture(holdId);
      expect(result).to.deep.include({ ok: true });
      expect(ledger.balance(userId)).to.deep.equal({ availableMicros: 3_000_000n, heldMicros: 0n });
      expect(ledger.balanceOf(sellerId, "earned")).to.equal(1_800_000n);
      expect(ledger.balanceOf(PLATFORM_ACCOUNT_ID, "fees")).to.equal(200_000n);
      expect(db.prepare("SELECT status FROM holds WHERE id = ?").pluck().get(holdId)).to.equal("captured");
    });

    it("pays the seller the full price when the fee is on top", () => {
      const { userId, sellerId } = makeParties(ledger, 5_000_000n);
      const holdId = holdOk(ledger, userId, sellerId, buildCharge({ feeMode: "on_top" }));
      ledger.capture(holdId);
      expect(ledger.balance(userId).availableMicros).to.equal(3_900_000n);
      expect(ledger.balanceOf(sellerId, "earned")).to.equal(1_000_000n);
      expect(ledger.balanceOf(PLATFORM_ACCOUNT_ID, "fees")).to.equal(100_000n);
    });

    it("pays everything to the seller when the fee rounds down to nothing", () => {
      const { userId, sellerId } = makeParties(ledger);
      const holdId = holdOk(ledger, userId, sellerId, buildCharge({ priceMicros: 9n }));
      expect(ledger.capture(holdId).ok).to.equal(true);
      expect(ledger.balanceOf(sellerId, "earned")).to.equal(9n);
      expect(ledger.balanceOf(PLATFORM_ACCOUNT_ID, "fees")).to.equal(0n);
    });

    it("pays everything to the platform at a fee of 10000 bps", () => {
      const { userId, sellerId } = makeParties(ledger);
      const holdId = holdOk(ledger, userId, sellerId, buildCharge({ feeBps: 10_000n }));
      expect(ledger.capture(holdId).ok).to.equal(true);
      expect(ledger.balanceOf(sellerId, "earned")).to.equal(0n);
      expect(ledger.balanceOf(PLATFORM_ACCOUNT_ID, "fees")).to.equal(1_000_000n);
    });

    it("does not let a hold be captured twice", () => {
      const { userId, sellerId } = makeParties(ledger);
      const holdId = holdOk(ledger, userId, sellerId);
      expect(ledger.capture(holdId).ok).to.equal(true);
      const balances = allBalances(db);
      expect(ledger.capture(holdId)).to.deep.equal({ ok: false, reason: "hold_not_open" });
      expect(allBalances(db)).to.deep.equal(balances);
    });

    it("does not capture a hold that was released", () => {
      const { userId, sellerId } = makeParties(ledger);
      const holdId = holdOk(ledger, userId, sellerId);
      ledger.release(holdId);
      expect(ledger.capture(holdId)).to.deep.equal({ ok: false, reason: "hold_not_open" });
      expect(ledger.balanceOf(sellerId, "earned")).to.equal(0n);
      expect(db.prepare("SELECT status FROM holds WHERE id = ?").pluck().get(holdId)).to.equal("released");
    });

    it("does not capture a hold that never existed", () => {
      expect(ledger.capture("hold:unknown")).to.deep.equal({ ok: false, reason: "hold_not_open" });
    });

    it("refuses to write a capture whose postings would not sum to zero, and writes nothing", () => {
      const { userId, sellerId } = makeParties(ledger);
      const holdId = holdOk(ledger, userId, sellerId);
      // A hold whose split no longer adds up to its amount: the schema's CHECK refuses it, so the
      // corruption switches the check off. Its capture would pay out one unit more than was held.
      db.pragma("ignore_check_constraints = ON");
      db.prepare("UPDATE holds SET seller_amount = seller_amount + 1 WHERE id = ?").run(holdId);
      db.pragma("ignore_check_constraints = OFF");
      const balances = allBalances(db);
      const entries = countRows(db, "entries");

      let error: unknown;
      try {
        ledger.capture(holdId);
      } catch (caught) {
        error = caught;
      }
      expect(error).to.be.instanceOf(LedgerInvariantError);
      const { violations } = error as LedgerInvariantError;
      expect(violations.map((v) => v.rule)).to.deep.equal([ENTRY_SUMS_TO_ZERO]);
      expect(violations[0].rows).to.have.length(1);
      expect(violations[0].rows[0]).to.include({ total: 1n });

      expect(countRows(db, "entries")).to.equal(entries);
      expect(allBalances(db)).to.deep.equal(balances);
      expect(db.prepare("SELECT status FROM holds WHERE id = ?").pluck().get(holdId)).to.equal("open");
      // Its release moves the held amount back and balances, so the money is not stuck.
      expect(ledger.release(holdId).ok).to.equal(true);
      expect(ledger.balance(userId)).to.deep.equal({ availableMicros: 10_000_000n, heldMicros: 0n });
    });

    it("settles only the hold it is given", () => {
      const { userId, sellerId } = makeParties(ledger);
      const first = holdOk(ledger, userId, sellerId);
      const second = holdOk(ledger, userId, sellerId);
      ledger.capture(first);
      expect(ledger.balance(userId).heldMicros).to.equal(1_000_000n);
      expect(ledger.capture(second).ok).to.equal(true);
    });
  });

  describe("release", () => {
    it("gives the held charge back to the available balance", () => {
      const { userId, sellerId } = makeParties(ledger, 5_000_000n);
      const holdId = holdOk(ledger, userId, sellerId);
      const result = ledger.release(holdId);
      expect(result).to.deep.include({ ok: true });
      expect(ledger.balance(userId)).to.deep.equal({ availableMicros: 5_000_000n, heldMicros: 0n });
      expect(ledger.balanceOf(sellerId, "earned")).to.equal(0n);
      expect(ledger.balanceOf(PLATFORM_ACCOUNT_ID, "fees")).to.equal(0n);
    });

    it("does not let a hold be released twice", () => {
      const { userId, sellerId } = makeParties(ledger);
      const holdId = holdOk(ledger, userId, sellerId);
      ledger.release(holdId);
      expect(ledger.release(holdId)).to.deep.equal({ ok: false, reason: "hold_not_open" });
      expect(ledger.balance(userId).availableMicros).to.equal(10_000_000n);
    });

    it("does not release a hold that was captured", () => {
      const { userId, sellerId } = makeParties(ledger);
      const holdId = holdOk(ledger, userId, sellerId);
      ledger.capture(holdId);
      expect(ledger.release(holdId)).to.deep.equal({ ok: false, reason: "hold_not_open" });
      expect(ledger.balance(userId)).to.deep.equal({ availableMicros: 9_000_000n, heldMicros: 0n });
    });
  });

  describe("recoverOpenHolds", () => {
    it("returns 0 and changes nothing when every hold is settled", () => {
      const { userId, sellerId } = makeParties(ledger);
      ledger.capture(holdOk(ledger, userId, sellerId));
      ledger.release(holdOk(ledger, userId, sellerId));
      const balances = allBalances(db);
      expect(ledger.recoverOpenHolds()).to.equal(0);
      expect(allBalances(db)).to.deep.equal(balances);
    });
  });
});

describe("Ledger after a crash", () => {
  let tmp: ReturnType<typeof makeTempDir>;
  const open: Db[] = [];

  beforeEach(() => {
    tmp = makeTempDir();
  });

  afterEach(() => {
    for (const db of open.splice(0)) if (db.open) db.close();
    tmp.remove();
  });

  it("releases at startup the holds a crashed process left open, charging nobody for them", () => {
    const file = tmp.file("ledger.db");
    const before = makeLedger({ file });
    open.push(before.db);
    const { userId, sellerId } = makeParties(before.ledger, 5_000_000n);
    const captured = holdOk(before.ledger, userId, sellerId);
    before.ledger.capture(captured);
    const released = holdOk(before.ledger, userId, sellerId);
    before.ledger.release(released);
    holdOk(before.ledger, userId, sellerId, buildCharge({ priceMicros: 700_000n }));
    holdOk(before.ledger, userId, sellerId, buildCharge({ priceMicros: 300_000n }));
    before.ledger.commit.flush();
    // The process dies here: the two open holds are on disk, their calls' outcomes unknown.
    before.db.close();

    const after = { db: openDatabase(file, SCHEMA) };
    open.push(after.db);
    const ledger = new Ledger(after.db);
    expect(ledger.balance(userId)).to.deep.equal({ availableMicros: 3_000_000n, heldMicros: 1_000_000n });
    expect(ledger.recoverOpenHolds()).to.equal(2);
    expect(ledger.balance(userId)).to.deep.equal({ availableMicros: 4_000_000n, heldMicros: 0n });
    expect(ledger.balanceOf(sellerId, "earned")).to.equal(900_000n);
    expect(ledger.balanceOf(PLATFORM_ACCOUNT_ID, "fees")).to.equal(100_000n);
    assertBalanced(after.db);
    expect(ledger.recoverOpenHolds(), "a second recovery finds nothing left").to.equal(0);

    ledger.commit.flush();
    const reader = new Database(file, { readonly: true });
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

  it("loses a batch that was never committed as a whole, never half of it", () => {
    const file = tmp.file("ledger.db");
    const before = makeLedger({ file });
    open.push(before.db);
    const { userId, sellerId } = makeParties(before.ledger, 5_000_000n);
    before.ledger.commit.flush();
    const holdId = holdOk(before.ledger, userId, sellerId);
    before.ledger.capture(holdId);
    // Closed with the batch still open: as if the process died before the next tick.
    before.db.close();

    const after = openDatabase(file, SCHEMA);
    open.push(after);
    const ledger = new Ledger(after);
    expect(ledger.recoverOpenHolds()).to.equal(0);
    expect(ledger.balance(userId)).to.deep.equal({ availableMicros: 5_000_000n, heldMicros: 0n });
    expect(ledger.balanceOf(sellerId, "earned")).to.equal(0n);
    expect(countRows(after, "holds")).to.equal(0);
    assertBalanced(after);
  });
});
