import { expect } from "chai";
import type { Database } from "../../server/db/sql";
import { describeMigration } from "../helpers/migrations";

/**
 * SQLite version 29 and PostgreSQL migration 0017 add the settled totals per payer and seller (docs/money-path.md,
 * Settlement). A database that settled batches before them starts with totals equal to its settled batches' calls: the
 * pending batch and the calls not in a batch are left out, and the next batch marked settled adds to them.
 */
const ROOT = `0x${"ab".repeat(32)}`;

/** Two settled batches, a pending one and a call not in any batch, written as the settler and the ledger leave them. */
async function settledBefore(db: Database): Promise<void> {
  for (const [id, kind] of [
    ["buyer", "user"],
    ["acme", "seller"],
    ["globex", "seller"],
  ])
    await db.run("INSERT INTO accounts (id, kind, name, created_at) VALUES (?, ?, ?, 1)", [id, kind, id]);
  for (const [number, status] of [
    [1, "settled"],
    [2, "settled"],
    [3, "pending"],
  ] as const)
    await db.run(
      `INSERT INTO settlement_batches (number, status, receipts_root, call_count, total_debits, platform_fee, recorded_at_block, created_at, settled_at)
       VALUES (?, ?, ?, 1, 1, 0, 0, 0, ?)`,
      [number, status, ROOT, status === "settled" ? 1 : null],
    );
  const holds: [string, string, bigint, number | null][] = [
    ["h1", "acme", 1_000n, 1],
    ["h2", "globex", 2_000n, 1],
    ["h3", "acme", 3_000n, 2],
    ["h4", "acme", 4_000n, 3],
    ["h5", "acme", 5_000n, null],
  ];
  for (const [id, seller, amount, batch] of holds)
    await db.run(
      `INSERT INTO holds (id, account_id, seller_account_id, skill_id, amount, seller_amount, fee_amount, status, created_at, closed_at, batch_number)
       VALUES (?, 'buyer', ?, 'echo', ?, ?, ?, 'captured', 1, 2, ?)`,
      [id, seller, amount, (amount * 9n) / 10n, amount / 10n, batch],
    );
}

const totals = (db: Database) =>
  db.all("SELECT account_id, seller_account_id, calls, debits, credits FROM settled_pair_totals ORDER BY seller_account_id");

describeMigration("Settled totals added to a database that settled batches before them", { sqlite: 29, postgres: 17 }, (at) => {
  beforeEach(async () => {
    await settledBefore(await at().open());
    await at().migrate();
  });

  it("starts the totals at the settled batches' calls, and adds the pending batch once it is marked settled", async () => {
    const db = at().current();
    expect(await totals(db)).to.deep.equal([
      { account_id: "buyer", seller_account_id: "acme", calls: 2n, debits: 4_000n, credits: 3_600n },
      { account_id: "buyer", seller_account_id: "globex", calls: 1n, debits: 2_000n, credits: 1_800n },
    ]);
    expect(
      await db.run("UPDATE settlement_batches SET status = 'settled', settled_at = 2 WHERE number = 3 AND status = 'pending'"),
    ).to.equal(1);
    expect((await totals(db))[0]).to.deep.equal({
      account_id: "buyer",
      seller_account_id: "acme",
      calls: 3n,
      debits: 8_000n,
      credits: 7_200n,
    });
  });
});
