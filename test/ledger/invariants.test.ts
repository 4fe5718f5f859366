import { expect } from "chai";
import type { Db } from "../../server/db/db";
import { assertBalanced, findViolations, LedgerInvariantError } from "../../server/ledger/invariants";
import { DEV_CREDIT_SOURCE_ID, type Ledger } from "../../server/ledger/ledger";
import { buildCharge, dropAppendOnlyTriggers, holdOk, makeLedger, makeParties } from "../helpers/ledger";

const RULES = {
  totalZero: "all postings sum to zero",
  entryZero: "every entry's postings sum to zero",
  materialized: "every materialized balance equals the sum of its postings",
  nonNegative: "no balance below zero outside the source accounts",
  heldMatchesHolds: "each account's held balance equals its open holds",
  perUser: "available + held + spent = deposited - withdrawn, per user",
  settledOnce: "a hold is captured or released exactly once, matching its status",
  capturePays: "a capture pays exactly the hold's seller share and fee",
};

interface Books {
  userId: string;
  creditEntryIds: bigint[];
  capturedHoldId: string;
  releasedHoldId: string;
  openHoldId: string;
}

/** Books with every kind of row in them: two credits, a captured, a released and an open hold. */
function writeBooks(ledger: Ledger): Books {
  const { userId, sellerId } = makeParties(ledger, 3_000_000n);
  ledger.credit(userId, 2_000_000n, "dev_credit");
  const capturedHoldId = holdOk(ledger, userId, sellerId);
  ledger.capture(capturedHoldId);
  const releasedHoldId = holdOk(ledger, userId, sellerId);
  ledger.release(releasedHoldId);
  const openHoldId = holdOk(ledger, userId, sellerId, buildCharge({ priceMicros: 500_000n }));
  const creditEntryIds = ledger.db.prepare("SELECT id FROM entries WHERE kind = 'dev_credit' ORDER BY id").pluck().all() as bigint[];
  return { userId, creditEntryIds, capturedHoldId, releasedHoldId, openHoldId };
}

function sourcePostingOf(db: Db, entryId: bigint): bigint {
  return db.prepare("SELECT id FROM postings WHERE entry_id = ? AND bucket = 'source'").pluck().get(entryId) as bigint;
}

/**
 * Each case corrupts the books in one way and names every rule that corruption breaks. Most
 * break exactly one rule; where a rule cannot break alone, the case says why.
 *
 * Entries and postings are append-only (migration 13): the database refuses to update or delete
 * them (test/ledger/append-only.test.ts). A case that edits them drops those triggers first, in
 * this test's own database, because what is tested here is the second wall: that the invariants
 * catch a journal changed behind the ledger's back (by a tool, a restored file, a bug in SQLite's
 * caller), not that the first wall holds.
 */
const CORRUPTIONS: { it: string; rules: string[]; tamper: (db: Db, books: Books) => void }[] = [
  {
    // A total that is not zero always leaves at least one entry unbalanced too.
    it: "detects money created out of nothing in one posting",
    rules: [RULES.totalZero, RULES.entryZero],
    tamper: (db, books) => {
      dropAppendOnlyTriggers(db);
      db.prepare("UPDATE postings SET amount = amount + 1 WHERE id = ?").run(sourcePostingOf(db, books.creditEntryIds[0]));
      db.prepare("UPDATE ledger_accounts SET balance = balance + 1 WHERE account_id = ? AND bucket = 'source'").run(DEV_CREDIT_SOURCE_ID);
    },
  },
  {
    it: "detects an entry that does not balance even though the total does",
    rules: [RULES.entryZero],
    tamper: (db, books) => {
      dropAppendOnlyTriggers(db);
      db.prepare("UPDATE postings SET amount = amount + 1 WHERE id = ?").run(sourcePostingOf(db, books.creditEntryIds[0]));
      db.prepare("UPDATE postings SET amount = amount - 1 WHERE id = ?").run(sourcePostingOf(db, books.creditEntryIds[1]));
    },
  },
  {
    it: "detects a balance edited without a posting",
    rules: [RULES.materialized],
    tamper: (db, books) => {
      db.prepare("UPDATE ledger_accounts SET balance = balance + 1 WHERE account_id = ? AND bucket = 'available'").run(books.userId);
    },
  },
  {
    it: "detects a balance below zero, even one its postings account for",
    rules: [RULES.nonNegative],
    tamper: (db, books) => {
      // A balanced entry that takes one unit from the user's empty earnings. The schema's
      // CHECK refuses the negative balance, so the corruption has to switch it off first;
      // the postings trigger moves the balances.
      db.pragma("ignore_check_constraints = ON");
      const entryId = db.prepare("INSERT INTO entries (kind, memo, created_at) VALUES ('dev_credit', 'tampered', 0)").run().lastInsertRowid;
      db.prepare("INSERT INTO postings (entry_id, account_id, bucket, amount) VALUES (?, ?, 'earned', -1)").run(entryId, books.userId);
      db.prepare("INSERT INTO postings (entry_id, account_id, bucket, amount) VALUES (?, ?, 'source', 1)").run(
        entryId,
        DEV_CREDIT_SOURCE_ID,
      );
      db.pragma("ignore_check_constraints = OFF");
    },
  },
  {
    it: "detects an open hold whose amount differs from what is held",
    rules: [RULES.heldMatchesHolds],
    tamper: (db, books) => {
      db.prepare("UPDATE holds SET amount = amount + 1, seller_amount = seller_amount + 1 WHERE id = ?").run(books.openHoldId);
    },
  },
  {
    it: "detects a credit booked as something else, which leaves a user's money unexplained",
    rules: [RULES.perUser],
    tamper: (db, books) => {
      dropAppendOnlyTriggers(db);
      db.prepare("UPDATE entries SET kind = 'hold' WHERE id = ?").run(books.creditEntryIds[1]);
    },
  },
  {
    it: "detects a captured hold marked as released",
    rules: [RULES.settledOnce],
    tamper: (db, books) => {
      db.prepare("UPDATE holds SET status = 'released' WHERE id = ?").run(books.capturedHoldId);
    },
  },
  {
    it: "detects a released hold with a second settlement",
    rules: [RULES.settledOnce],
    tamper: (db, books) => {
      // The unique index refuses a second settlement, so the corruption has to drop it first.
      db.exec("DROP INDEX entries_one_settlement_per_hold");
      db.prepare("INSERT INTO entries (kind, hold_id, memo, created_at) VALUES ('release', ?, 'again', 0)").run(books.releasedHoldId);
    },
  },
  {
    it: "detects a capture that paid a different split than its hold's",
    rules: [RULES.capturePays],
    tamper: (db, books) => {
      db.prepare("UPDATE holds SET seller_amount = seller_amount - 1, fee_amount = fee_amount + 1 WHERE id = ?").run(books.capturedHoldId);
    },
  },
];

describe("assertBalanced", () => {
  let db: Db;
  let ledger: Ledger;
  let books: Books;

  beforeEach(() => {
    ({ db, ledger } = makeLedger());
    books = writeBooks(ledger);
  });

  afterEach(() => db.close());

  it("passes on a fresh ledger", () => {
    const fresh = makeLedger();
    try {
      expect(findViolations(fresh.db)).to.deep.equal([]);
      assertBalanced(fresh.db);
    } finally {
      fresh.db.close();
    }
  });

  it("passes on books written only through the ledger", () => {
    expect(findViolations(db)).to.deep.equal([]);
    assertBalanced(db);
  });

  for (const corruption of CORRUPTIONS) {
    it(corruption.it, () => {
      corruption.tamper(db, books);
      expect(findViolations(db).map((v) => v.rule)).to.have.members(corruption.rules);
      expect(() => assertBalanced(db))
        .to.throw(LedgerInvariantError)
        .with.property("violations")
        .that.satisfies((violations: { rule: string }[]) => violations.some((v) => v.rule === corruption.rules[0]));
    });
  }

  it("names each broken rule with its offending rows in the error", () => {
    db.prepare("UPDATE ledger_accounts SET balance = balance + 7 WHERE account_id = ? AND bucket = 'available'").run(books.userId);
    db.prepare("UPDATE holds SET status = 'released' WHERE id = ?").run(books.capturedHoldId);
    let error: unknown;
    try {
      assertBalanced(db);
    } catch (caught) {
      error = caught;
    }
    expect(error).to.be.instanceOf(LedgerInvariantError);
    const invariantError = error as LedgerInvariantError;
    expect(invariantError.name).to.equal("LedgerInvariantError");
    expect(invariantError.violations.map((v) => v.rule)).to.deep.equal([RULES.materialized, RULES.settledOnce]);
    expect(invariantError.violations[0].rows).to.deep.equal([
      { account_id: books.userId, bucket: "available", balance: 3_500_007n, postings: 3_500_000n },
    ]);
    expect(invariantError.message).to.contain(`${RULES.materialized} (1 row(s), first: {"account_id":"${books.userId}"`);
    expect(invariantError.message).to.contain('"balance":"3500007"');
    expect(invariantError.message).to.contain(RULES.settledOnce);
  });
});
