import Database from "better-sqlite3";
import { SCHEMA } from "../../server/schema";

/*
 * Books as the gateway wrote them before the current schema, for migration tests. The rows are written with
 * plain SQL exactly as the code of that time did (the current Ledger writes columns an old schema lacks):
 * every entry kind, withdrawals told apart only by their memos, exits linked in exit_entries.
 */

export const LEGACY = {
  alice: "user:alice",
  seller: "seller:acme",
  address: "0x00000000000000000000000000000000000a11ce",
  depositTx: `0x${"d".repeat(64)}`,
  cancelledExitTx: `0x${"e".repeat(64)}`,
  cancelTx: `0x${"c".repeat(64)}`,
  pendingExitTx: `0x${"f".repeat(64)}`,
} as const;

/** A database migrated up to `version` (and no further), in memory, reading integers as bigints. */
export function databaseAtVersion(version: number, file = ":memory:"): Database.Database {
  const db = new Database(file);
  db.defaultSafeIntegers(true);
  db.pragma("foreign_keys = ON");
  db.exec("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)");
  for (const m of SCHEMA.filter((m) => m.version <= version)) {
    db.transaction(() => {
      m.before?.(db);
      db.exec(m.sql);
      db.prepare("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, 0)").run(m.version, m.name);
    })();
  }
  return db;
}

/**
 * Writes books with a row of every kind as versions 6 to 14 wrote them: a development credit, a chain deposit,
 * a captured and a released hold, a voucher issued and one returned unredeemed, an exit frozen then cancelled
 * (its freeze given back) and a pending exit frozen. Alice ends with 9 available, nothing held.
 */
export function writeLegacyBooks(db: Database.Database): void {
  const { alice, seller, address } = LEGACY;
  let now = 1_000;
  const tick = () => ++now;
  const account = (id: string, kind: string, buckets: string[]) => {
    db.prepare("INSERT INTO accounts (id, kind, name, created_at) VALUES (?, ?, ?, 0)").run(id, kind, id);
    for (const b of buckets) db.prepare("INSERT INTO ledger_accounts (account_id, bucket, balance) VALUES (?, ?, 0)").run(id, b);
  };
  const entry = (kind: string, holdId: string | null, memo: string, postings: [string, string, bigint][]): bigint => {
    const id = db.prepare("INSERT INTO entries (kind, hold_id, memo, created_at) VALUES (?, ?, ?, ?)").run(kind, holdId, memo, tick())
      .lastInsertRowid as bigint;
    for (const [a, b, m] of postings) {
      db.prepare("INSERT INTO postings (entry_id, account_id, bucket, amount) VALUES (?, ?, ?, ?)").run(id, a, b, m);
    }
    return id;
  };
  const escrow = "system:escrow";
  db.transaction(() => {
    account("platform", "platform", ["fees"]);
    account("system:dev_credit", "system", ["source"]);
    account(escrow, "system", ["source"]);
    account(alice, "user", ["available", "held", "earned"]);
    account(seller, "seller", ["available", "held", "earned"]);
    db.prepare("INSERT INTO account_addresses (address, account_id, created_at) VALUES (?, ?, 0)").run(address, alice);

    entry("dev_credit", null, "seed", [
      ["system:dev_credit", "source", -20n],
      [alice, "available", 20n],
    ]);
    const depositEntry = entry("deposit", null, `${LEGACY.depositTx}:0`, [
      [escrow, "source", -5n],
      [alice, "available", 5n],
    ]);
    db.prepare(
      `INSERT INTO chain_deposits (tx_hash, log_index, block_number, block_hash, address, sender, amount, account_id, entry_id, created_at)
       VALUES (?, 0, 1, ?, ?, ?, 5, ?, ?, ?)`,
    ).run(LEGACY.depositTx, `0x${"1".repeat(64)}`, address, address, alice, depositEntry, tick());

    const hold = (id: string, amount: bigint, status: "captured" | "released") => {
      db.prepare(
        `INSERT INTO holds (id, account_id, seller_account_id, skill_id, amount, seller_amount, fee_amount, status, created_at, closed_at)
         VALUES (?, ?, ?, 'skill:echo', ?, ?, ?, ?, 0, 0)`,
      ).run(id, alice, seller, amount, (amount * 9n) / 10n, amount / 10n, status);
      entry("hold", id, "", [
        [alice, "available", -amount],
        [alice, "held", amount],
      ]);
      if (status === "captured") {
        entry("capture", id, "", [
          [alice, "held", -amount],
          [seller, "earned", (amount * 9n) / 10n],
          ["platform", "fees", amount / 10n],
        ]);
      } else {
        entry("release", id, "", [
          [alice, "held", -amount],
          [alice, "available", amount],
        ]);
      }
    };
    hold("hold:captured", 10n, "captured");
    hold("hold:released", 10n, "released");

    const voucher = (nonce: bigint, amount: bigint, status: "issued" | "returned") => {
      const id = entry("withdrawal", null, `voucher ${address}:${nonce}`, [
        [alice, "available", -amount],
        [escrow, "source", amount],
      ]);
      db.prepare(
        `INSERT INTO vouchers (address, nonce, account_id, amount, deadline, status, entry_id, created_at)
         VALUES (?, ?, ?, ?, 0, ?, ?, ?)`,
      ).run(address, nonce, alice, amount, status, id, tick());
      if (status === "returned") {
        entry("withdrawal", null, `voucher ${address}:${nonce} expired unredeemed: returned`, [
          [escrow, "source", -amount],
          [alice, "available", amount],
        ]);
      }
    };
    voucher(7n, 3n, "issued");
    voucher(8n, 2n, "returned");

    const exitEntry = (tx: string, amount: bigint, what: string) => {
      const id = entry("withdrawal", null, `exit ${address} ${tx}:0: ${what}`, [
        [alice, "available", -amount],
        [escrow, "source", amount],
      ]);
      db.prepare("INSERT INTO exit_entries (entry_id, exit_tx_hash, exit_log_index) VALUES (?, ?, 0)").run(id, tx);
    };
    // An exit of 4, frozen, then cancelled: its freeze comes back.
    db.prepare(
      `INSERT INTO chain_exits (tx_hash, log_index, block_number, block_hash, address, account_id, requested, ready_at, status,
                                frozen, shortfall, created_at)
       VALUES (?, 0, 2, ?, ?, ?, 4, 0, 'pending', 4, 0, ?)`,
    ).run(LEGACY.cancelledExitTx, `0x${"2".repeat(64)}`, address, alice, tick());
    exitEntry(LEGACY.cancelledExitTx, 4n, "frozen");
    db.prepare(
      `UPDATE chain_exits SET status = 'cancelled', frozen = 0, closed_tx_hash = ?, closed_log_index = 0, closed_block_number = 3,
              closed_at = ? WHERE tx_hash = ?`,
    ).run(LEGACY.cancelTx, tick(), LEGACY.cancelledExitTx);
    const returned = entry("withdrawal", null, `exit ${address} ${LEGACY.cancelledExitTx}:0: returned (cancelled)`, [
      [escrow, "source", -4n],
      [alice, "available", 4n],
    ]);
    db.prepare("INSERT INTO exit_entries (entry_id, exit_tx_hash, exit_log_index) VALUES (?, ?, 0)").run(returned, LEGACY.cancelledExitTx);
    // A pending exit of 3, wholly frozen.
    db.prepare(
      `INSERT INTO chain_exits (tx_hash, log_index, block_number, block_hash, address, account_id, requested, ready_at, status,
                                frozen, shortfall, created_at)
       VALUES (?, 0, 4, ?, ?, ?, 3, 0, 'pending', 3, 0, ?)`,
    ).run(LEGACY.pendingExitTx, `0x${"4".repeat(64)}`, address, alice, tick());
    exitEntry(LEGACY.pendingExitTx, 3n, "frozen");
  })();
}
