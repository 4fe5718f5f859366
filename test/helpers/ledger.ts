import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { FeeMode } from "../../server/ledger/fees";
import { openDatabase, type Db } from "../../server/db/db";
import { SCHEMA } from "../../server/schema";
import { computeCharge, type Charge } from "../../server/ledger/fees";
import { GroupCommit } from "../../server/db/group-commit";
import { Ledger, type Bucket } from "../../server/ledger/ledger";

export interface LedgerFixture {
  db: Db;
  ledger: Ledger;
}

/**
 * A ledger on a fresh database: in memory unless `file` is given. `maxOps` sets the group
 * commit's batch size, so a test can make batches end where it wants them to.
 */
export function makeLedger(options: { file?: string; maxOps?: number } = {}): LedgerFixture {
  const db = openDatabase(options.file ?? ":memory:", SCHEMA);
  const ledger = new Ledger(db, new GroupCommit(db, options.maxOps));
  return { db, ledger };
}

/** One call's charge: 1 USDC with the default 10% fee included, unless overridden. */
export function buildCharge(overrides: Partial<Charge> & { priceMicros?: bigint; feeMode?: FeeMode; feeBps?: bigint } = {}): Charge {
  const { priceMicros = 1_000_000n, feeMode = "included", feeBps = 1000n, ...fields } = overrides;
  return { ...computeCharge(priceMicros, feeMode, feeBps), ...fields };
}

/** A user and a seller, the user credited with `creditMicros` of development credit. */
export function makeParties(ledger: Ledger, creditMicros = 10_000_000n): { userId: string; sellerId: string } {
  const userId = ledger.ensureAccount({ id: "user:alice", kind: "user", name: "Alice" }).id;
  const sellerId = ledger.ensureAccount({ id: "seller:acme", kind: "seller", name: "Acme skills" }).id;
  if (creditMicros > 0n) ledger.credit(userId, creditMicros, "dev_credit");
  return { userId, sellerId };
}

/** Takes a hold that must succeed, and returns its id. */
export function holdOk(ledger: Ledger, userId: string, sellerId: string, charge: Charge = buildCharge()): string {
  const result = ledger.hold({ accountId: userId, sellerAccountId: sellerId, skillId: "skill:echo", charge });
  if (!result.ok) throw new Error(`expected the hold to succeed, got ${result.reason}`);
  return result.hold.id;
}

/** Every (account, bucket) balance, keyed "account/bucket", read straight from the table. */
export function allBalances(db: Db): Map<string, bigint> {
  const rows = db.prepare("SELECT account_id, bucket, balance FROM ledger_accounts").all() as {
    account_id: string;
    bucket: Bucket;
    balance: bigint;
  }[];
  return new Map(rows.map((r) => [`${r.account_id}/${r.bucket}`, r.balance]));
}

/** How many rows a table holds, as a number. */
export function countRows(db: Db, table: "accounts" | "entries" | "postings" | "holds"): number {
  return Number(db.prepare(`SELECT COUNT(*) FROM ${table}`).pluck().get() as bigint);
}

/** A temporary directory for database files, removed by `remove()`. */
export function makeTempDir(): { file: (name: string) => string; remove: () => void } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ledger-test-"));
  return {
    file: (name) => path.join(dir, name),
    remove: () => fs.rmSync(dir, { recursive: true, force: true }),
  };
}

/** The triggers (migration 13) that make the journal append-only. */
export const APPEND_ONLY_TRIGGERS = ["entries_no_update", "entries_no_delete", "postings_no_update", "postings_no_delete"] as const;

/**
 * Drops the append-only triggers from a test's own database, so the test can corrupt the journal on
 * purpose (to prove the invariants catch what the triggers would otherwise stop first). Never for a
 * database a gateway keeps.
 */
export function dropAppendOnlyTriggers(db: Db): void {
  for (const name of APPEND_ONLY_TRIGGERS) db.exec(`DROP TRIGGER ${name}`);
}
