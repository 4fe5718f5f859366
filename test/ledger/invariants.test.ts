import { expect } from "chai";
import type { Database } from "../../server/db/sql";
import { assertBalanced, findViolations, LedgerInvariantError } from "../../server/ledger/invariants";
import { DEV_CREDIT_SOURCE_ID, type Ledger } from "../../server/ledger/ledger";
import { describeEachEngine } from "../helpers/engines";
import {
  buildCharge,
  dropAppendOnlyTriggers,
  holdOk,
  makeLedger,
  makeParties,
  rejectionOf,
  withoutCheckConstraints,
} from "../helpers/ledger";

const RULES = {
  totalZero: "all postings sum to zero",
  entryZero: "every entry's postings sum to zero",
  materialized: "every balance equals the sum of its postings",
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
async function writeBooks(ledger: Ledger): Promise<Books> {
  const { userId, sellerId } = await makeParties(ledger, 3_000_000n);
  await ledger.credit(userId, 2_000_000n, "dev_credit");
  const capturedHoldId = await holdOk(ledger, userId, sellerId);
  await ledger.capture(capturedHoldId);
  const releasedHoldId = await holdOk(ledger, userId, sellerId);
  await ledger.release(releasedHoldId);
  const openHoldId = await holdOk(ledger, userId, sellerId, buildCharge({ priceMicros: 500_000n }));
  const creditEntryIds = (await ledger.db.all<{ id: bigint }>("SELECT id FROM entries WHERE kind = 'dev_credit' ORDER BY id")).map(
    (r) => r.id,
  );
  return { userId, creditEntryIds, capturedHoldId, releasedHoldId, openHoldId };
}

async function sourcePostingOf(db: Database, entryId: bigint): Promise<bigint> {
  return (await db.value<bigint>("SELECT id FROM postings WHERE entry_id = ? AND bucket = 'source'", [entryId]))!;
}

/**
 * Each case corrupts the books in one way and names every rule that corruption breaks. Most
 * break exactly one rule; where a rule cannot break alone, the case says why.
 *
 * Entries and postings are append-only (SQLite migration 13, and the same triggers on PostgreSQL): the
 * database refuses to update or delete them (test/ledger/append-only.test.ts). A case that edits them drops
 * those triggers first, in this test's own database, because what is tested here is the second wall: that
 * the invariants catch a journal changed behind the ledger's back (by a tool, a restored file or dump, a bug
 * in the database's caller), not that the first wall holds.
 */
const CORRUPTIONS: { it: string; rules: string[]; tamper: (db: Database, books: Books) => Promise<void> }[] = [
  {
    // A total that is not zero always leaves at least one entry unbalanced too.
    it: "detects money created out of nothing in one posting",
    rules: [RULES.totalZero, RULES.entryZero],
    tamper: async (db, books) => {
      await dropAppendOnlyTriggers(db);
      await db.run("UPDATE postings SET amount = amount + 1 WHERE id = ?", [await sourcePostingOf(db, books.creditEntryIds[0])]);
      await db.run("UPDATE ledger_accounts SET balance = balance + 1 WHERE account_id = ? AND bucket = 'source'", [DEV_CREDIT_SOURCE_ID]);
    },
  },
  {
    it: "detects an entry that does not balance even though the total does",
    rules: [RULES.entryZero],
    tamper: async (db, books) => {
      await dropAppendOnlyTriggers(db);
      await db.run("UPDATE postings SET amount = amount + 1 WHERE id = ?", [await sourcePostingOf(db, books.creditEntryIds[0])]);
      await db.run("UPDATE postings SET amount = amount - 1 WHERE id = ?", [await sourcePostingOf(db, books.creditEntryIds[1])]);
    },
  },
  {
    it: "detects a balance edited without a posting",
    rules: [RULES.materialized],
    tamper: async (db, books) => {
      await db.run("UPDATE ledger_accounts SET balance = balance + 1 WHERE account_id = ? AND bucket = 'available'", [books.userId]);
    },
  },
  {
    it: "detects a balance below zero, even one its postings account for",
    rules: [RULES.nonNegative],
    tamper: async (db, books) => {
      // A balanced entry that takes one unit from the user's empty earnings. The schema's
      // CHECK refuses the negative balance, so the corruption has to switch it off first;
      // the postings trigger moves the balances.
      await withoutCheckConstraints(db, ["ledger_accounts"], async () => {
        await db.transaction(async (tx) => {
          const entryId = (await tx.value<bigint>(
            "INSERT INTO entries (kind, memo, created_at) VALUES ('dev_credit', 'tampered', 0) RETURNING id",
          ))!;
          await tx.run("INSERT INTO postings (entry_id, account_id, bucket, amount) VALUES (?, ?, 'earned', -1)", [entryId, books.userId]);
          await tx.run("INSERT INTO postings (entry_id, account_id, bucket, amount) VALUES (?, ?, 'source', 1)", [
            entryId,
            DEV_CREDIT_SOURCE_ID,
          ]);
        });
      });
    },
  },
  {
    it: "detects an open hold whose amount differs from what is held",
    rules: [RULES.heldMatchesHolds],
    tamper: async (db, books) => {
      await db.run("UPDATE holds SET amount = amount + 1, seller_amount = seller_amount + 1 WHERE id = ?", [books.openHoldId]);
    },
  },
  {
    it: "detects a credit booked as something else, which leaves a user's money unexplained",
    rules: [RULES.perUser],
    tamper: async (db, books) => {
      await dropAppendOnlyTriggers(db);
      await db.run("UPDATE entries SET kind = 'hold' WHERE id = ?", [books.creditEntryIds[1]]);
    },
  },
  {
    it: "detects a captured hold marked as released",
    rules: [RULES.settledOnce],
    tamper: async (db, books) => {
      await db.run("UPDATE holds SET status = 'released' WHERE id = ?", [books.capturedHoldId]);
    },
  },
  {
    it: "detects a released hold with a second settlement",
    rules: [RULES.settledOnce],
    tamper: async (db, books) => {
      // The unique index refuses a second settlement, so the corruption has to drop it first.
      await db.run("DROP INDEX entries_one_settlement_per_hold");
      await db.run("INSERT INTO entries (kind, hold_id, memo, created_at) VALUES ('release', ?, 'again', 0)", [books.releasedHoldId]);
    },
  },
  {
    it: "detects a capture that paid a different split than its hold's",
    rules: [RULES.capturePays],
    tamper: async (db, books) => {
      await db.run("UPDATE holds SET seller_amount = seller_amount - 1, fee_amount = fee_amount + 1 WHERE id = ?", [books.capturedHoldId]);
    },
  },
];

describeEachEngine("assertBalanced", (engine) => {
  let db: Database;
  let ledger: Ledger;
  let books: Books;

  beforeEach(async () => {
    ({ db, ledger } = await makeLedger(engine));
    books = await writeBooks(ledger);
  });

  it("passes on a fresh ledger", async () => {
    const fresh = await makeLedger(engine);
    expect(await findViolations(fresh.db)).to.deep.equal([]);
    await assertBalanced(fresh.db);
  });

  it("passes on books written only through the ledger", async () => {
    expect(await findViolations(db)).to.deep.equal([]);
    await assertBalanced(db);
  });

  for (const corruption of CORRUPTIONS) {
    it(corruption.it, async () => {
      await corruption.tamper(db, books);
      expect((await findViolations(db)).map((v) => v.rule)).to.have.members(corruption.rules);
      const error = await rejectionOf(assertBalanced(db));
      expect(error).to.be.instanceOf(LedgerInvariantError);
      expect((error as LedgerInvariantError).violations.some((v) => v.rule === corruption.rules[0])).to.equal(true);
    });
  }

  it("names each broken rule with its offending rows in the error", async () => {
    await db.run("UPDATE ledger_accounts SET balance = balance + 7 WHERE account_id = ? AND bucket = 'available'", [books.userId]);
    await db.run("UPDATE holds SET status = 'released' WHERE id = ?", [books.capturedHoldId]);
    const error = await rejectionOf(assertBalanced(db));
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
