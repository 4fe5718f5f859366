import type { Db } from "../db/db";
import type { SchemaStep } from "../db/migrations";

/**
 * The ledger's tables: accounts, their buckets (ledger_accounts), the journal (entries, postings) and holds,
 * with the database-side guards that keep the books balanced and append-only.
 *
 * Each step belongs to one global schema version (server/schema.ts names the versions and applies them in order):
 * a step is never edited once it has shipped; a change is a step of a new version. Money columns are INTEGER base units.
 */
export const LEDGER_SCHEMA: readonly SchemaStep[] = [
  {
    version: 1,
    sql: `
CREATE TABLE accounts (
  id          TEXT PRIMARY KEY,
  kind        TEXT NOT NULL CHECK (kind IN ('user', 'seller', 'platform', 'system')),
  name        TEXT NOT NULL,
  daily_call_cap INTEGER CHECK (daily_call_cap IS NULL OR daily_call_cap >= 0),
  created_at  INTEGER NOT NULL
);

-- One row per (account, bucket): the materialized balance, always equal to the sum of the
-- bucket's postings (checked by assertBalanced). Only 'source' buckets (the world outside
-- the ledger that money comes in from) may go negative.
CREATE TABLE ledger_accounts (
  account_id  TEXT NOT NULL REFERENCES accounts(id),
  bucket      TEXT NOT NULL CHECK (bucket IN ('available', 'held', 'earned', 'fees', 'source')),
  balance     INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (account_id, bucket),
  CHECK (bucket = 'source' OR balance >= 0)
) WITHOUT ROWID;

-- A journal entry: one money movement, whose postings sum to zero.
CREATE TABLE entries (
  id          INTEGER PRIMARY KEY,
  kind        TEXT NOT NULL CHECK (kind IN ('dev_credit', 'deposit', 'hold', 'capture', 'release', 'withdrawal')),
  hold_id     TEXT,
  memo        TEXT,
  created_at  INTEGER NOT NULL
);
-- A hold is captured or released exactly once: the database refuses a second settlement.
CREATE UNIQUE INDEX entries_one_settlement_per_hold ON entries(hold_id) WHERE kind IN ('capture', 'release');

CREATE TABLE postings (
  id          INTEGER PRIMARY KEY,
  entry_id    INTEGER NOT NULL REFERENCES entries(id),
  account_id  TEXT NOT NULL,
  bucket      TEXT NOT NULL,
  amount      INTEGER NOT NULL CHECK (amount <> 0),
  FOREIGN KEY (account_id, bucket) REFERENCES ledger_accounts(account_id, bucket)
);
CREATE INDEX postings_by_entry ON postings(entry_id);

CREATE TABLE holds (
  id                TEXT PRIMARY KEY,
  account_id        TEXT NOT NULL REFERENCES accounts(id),
  seller_account_id TEXT NOT NULL REFERENCES accounts(id),
  skill_id          TEXT NOT NULL,
  amount            INTEGER NOT NULL CHECK (amount > 0),
  seller_amount     INTEGER NOT NULL CHECK (seller_amount >= 0),
  fee_amount        INTEGER NOT NULL CHECK (fee_amount >= 0),
  status            TEXT NOT NULL CHECK (status IN ('open', 'captured', 'released')),
  created_at        INTEGER NOT NULL,
  closed_at         INTEGER,
  CHECK (seller_amount + fee_amount = amount)
);
CREATE INDEX holds_open ON holds(account_id) WHERE status = 'open';
`,
  },
  {
    version: 2,
    sql: `
-- A posting moves its bucket's balance in the same statement that records it: no code
-- path can write one without the other. The balance CHECK still refuses an overdraft, and
-- the posting's foreign key guarantees the bucket exists.
CREATE TRIGGER postings_move_balance AFTER INSERT ON postings
BEGIN
  UPDATE ledger_accounts SET balance = balance + NEW.amount
  WHERE account_id = NEW.account_id AND bucket = NEW.bucket;
END;
`,
  },
  {
    version: 4,
    sql: `
-- The batch a captured hold (a paid call) is settled in; NULL until the settler takes it. A column on
-- holds rather than a table beside it, so the settler finds the unbatched calls by a partial index that
-- holds only them (a table beside would need an anti-join over every call ever captured).
ALTER TABLE holds ADD COLUMN batch_number INTEGER REFERENCES settlement_batches(number)
  CHECK (batch_number IS NULL OR status = 'captured');
CREATE INDEX holds_unbatched ON holds(closed_at, id) WHERE status = 'captured' AND batch_number IS NULL;
CREATE INDEX holds_by_batch ON holds(batch_number, closed_at, id) WHERE batch_number IS NOT NULL;
-- A call is settled in one batch, for good.
CREATE TRIGGER holds_batch_once BEFORE UPDATE OF batch_number ON holds
WHEN OLD.batch_number IS NOT NULL AND NEW.batch_number IS NOT OLD.batch_number
BEGIN
  SELECT RAISE(ABORT, 'a hold already belongs to a settlement batch');
END;
`,
  },
  {
    version: 13,
    sql: `
-- The journal is append-only: a movement is corrected by a new, reversing entry, never by editing or
-- deleting one, so what the books say happened stays what happened. The database refuses both, whatever the
-- code does; nothing in the gateway updates or deletes these rows. (A savepoint or transaction rolled back
-- is not a DELETE: the ledger's own undo of a failed operation is unaffected.)
CREATE TRIGGER entries_no_update BEFORE UPDATE ON entries
BEGIN
  SELECT RAISE(ABORT, 'entries are append-only: an entry cannot be changed, post a reversing entry instead');
END;
CREATE TRIGGER entries_no_delete BEFORE DELETE ON entries
BEGIN
  SELECT RAISE(ABORT, 'entries are append-only: an entry cannot be deleted, post a reversing entry instead');
END;
CREATE TRIGGER postings_no_update BEFORE UPDATE ON postings
BEGIN
  SELECT RAISE(ABORT, 'postings are append-only: a posting cannot be changed, post a reversing entry instead');
END;
CREATE TRIGGER postings_no_delete BEFORE DELETE ON postings
BEGIN
  SELECT RAISE(ABORT, 'postings are append-only: a posting cannot be deleted, post a reversing entry instead');
END;
`,
  },
  {
    version: 15,
    rebuildsTables: true,
    before: refuseUnclassifiableWithdrawals,
    sql: `
-- Until version 14 one kind, 'withdrawal', covered four movements, told apart only by memo text: a voucher
-- issued, a voucher returned unredeemed, an exit's freeze, a freeze given back. Each now has its own kind,
-- and every entry that belongs to a record elsewhere names it in columns, so no code reads a memo; the memo
-- stays a note for people. A CHECK cannot be changed in place, so the table is rebuilt (ids kept) with the
-- existing rows converted: a voucher's withdrawal is the entry its voucher row names (vouchers.entry_id); an
-- exit's entries were linked in exit_entries, a freeze taking from available, a return giving back; a voucher
-- return is found by the memo the sweep wrote, parsed here for the last time, and the new kind's CHECK refuses
-- any 'withdrawal' left unclassified (refuseUnclassifiableWithdrawals names them first). Deposits take their
-- log from chain_deposits.entry_id.
CREATE TABLE entries_v15 (
  id                 INTEGER PRIMARY KEY,
  kind               TEXT NOT NULL CHECK (kind IN ('dev_credit', 'deposit', 'hold', 'capture', 'release',
                                                   'voucher_withdrawal', 'voucher_return', 'exit_freeze', 'exit_return')),
  hold_id            TEXT,
  -- The voucher (vouchers' key) a voucher_withdrawal issued or a voucher_return gave back.
  voucher_address    TEXT,
  voucher_nonce      INTEGER,
  -- The Deposited log (chain_deposits' key) a deposit entry credits; NULL for a deposit with no chain record.
  deposit_tx_hash    TEXT,
  deposit_log_index  INTEGER,
  -- The ExitRequested log (chain_exits' key) whose freeze an exit_freeze took or an exit_return gave back.
  exit_tx_hash       TEXT,
  exit_log_index     INTEGER,
  memo               TEXT,
  created_at         INTEGER NOT NULL,
  CHECK ((kind IN ('voucher_withdrawal', 'voucher_return')) = (voucher_address IS NOT NULL AND voucher_nonce IS NOT NULL)),
  CHECK ((voucher_address IS NULL) = (voucher_nonce IS NULL)),
  CHECK ((kind IN ('exit_freeze', 'exit_return')) = (exit_tx_hash IS NOT NULL AND exit_log_index IS NOT NULL)),
  CHECK ((exit_tx_hash IS NULL) = (exit_log_index IS NULL)),
  CHECK (deposit_tx_hash IS NULL OR kind = 'deposit'),
  CHECK ((deposit_tx_hash IS NULL) = (deposit_log_index IS NULL))
);
INSERT INTO entries_v15 (id, kind, hold_id, voucher_address, voucher_nonce, deposit_tx_hash, deposit_log_index,
                         exit_tx_hash, exit_log_index, memo, created_at)
SELECT e.id,
       CASE WHEN e.kind <> 'withdrawal' THEN e.kind
            WHEN ee.entry_id IS NOT NULL THEN
              CASE WHEN (SELECT SUM(p.amount) FROM postings p WHERE p.entry_id = e.id AND p.bucket = 'available') < 0
                   THEN 'exit_freeze' ELSE 'exit_return' END
            WHEN issued.entry_id IS NOT NULL THEN 'voucher_withdrawal'
            WHEN returned.address IS NOT NULL THEN 'voucher_return'
            ELSE e.kind END,
       e.hold_id,
       COALESCE(issued.address, returned.address),
       COALESCE(issued.nonce, returned.nonce),
       cd.tx_hash, cd.log_index,
       ee.exit_tx_hash, ee.exit_log_index,
       e.memo, e.created_at
FROM entries e
LEFT JOIN exit_entries ee ON ee.entry_id = e.id
LEFT JOIN vouchers issued ON issued.entry_id = e.id
LEFT JOIN vouchers returned
  ON e.kind = 'withdrawal' AND e.memo GLOB 'voucher 0x*:* expired unredeemed: returned'
 AND returned.address = substr(e.memo, 9, 42)
 AND returned.nonce = CAST(substr(e.memo, 52, instr(e.memo, ' expired unredeemed') - 52) AS INTEGER)
 AND e.memo = 'voucher ' || returned.address || ':' || returned.nonce || ' expired unredeemed: returned'
LEFT JOIN chain_deposits cd ON cd.entry_id = e.id;

DROP TABLE exit_entries;
DROP TABLE entries;
ALTER TABLE entries_v15 RENAME TO entries;

-- A hold is captured or released exactly once: the database refuses a second settlement (as since version 1).
CREATE UNIQUE INDEX entries_one_settlement_per_hold ON entries(hold_id) WHERE kind IN ('capture', 'release');
-- A Deposited log is credited once: the database refuses a second entry for it.
CREATE UNIQUE INDEX entries_one_credit_per_deposit ON entries(deposit_tx_hash, deposit_log_index) WHERE deposit_tx_hash IS NOT NULL;
-- A voucher is withdrawn once and given back at most once.
CREATE UNIQUE INDEX entries_once_per_voucher ON entries(voucher_address, voucher_nonce, kind) WHERE voucher_address IS NOT NULL;
-- An exit's entries, read by the invariants and the reconciliation.
CREATE INDEX entries_by_exit ON entries(exit_tx_hash, exit_log_index) WHERE exit_tx_hash IS NOT NULL;

-- The journal stays append-only (version 13's triggers, dropped with the old table).
CREATE TRIGGER entries_no_update BEFORE UPDATE ON entries
BEGIN
  SELECT RAISE(ABORT, 'entries are append-only: an entry cannot be changed, post a reversing entry instead');
END;
CREATE TRIGGER entries_no_delete BEFORE DELETE ON entries
BEGIN
  SELECT RAISE(ABORT, 'entries are append-only: an entry cannot be deleted, post a reversing entry instead');
END;
`,
  },
  {
    version: 16,
    sql: `
-- Several gateway replicas may share one PostgreSQL database (issue 14). A hold names the replica whose call
-- took it, so a hold left open by a replica that died is released by the settlement leader, and never one
-- whose replica still lives (its call may yet capture it). A single SQLite gateway leaves it NULL: at start it
-- releases every open hold, all of them its own from before a crash.
ALTER TABLE holds ADD COLUMN replica_id TEXT;
`,
  },
  {
    version: 17,
    sql: `
-- Spending limits of API keys (issue 15; ./spend-limits.ts). A hold checks its key's limit in its own transaction,
-- so the ledger keeps them: one row per key that has had a limit. limit_micros is NULL once the limit is removed;
-- period_start and period_seq name the period now counted (period_seq grows by one at every rollover and every
-- change of period), spent_micros what the key's holds not released took in it. A lowered limit may sit below
-- what was spent, so no CHECK ties the two. key_id is identity's api_keys.id, without a foreign key: the ledger
-- knows no keys.
CREATE TABLE key_spend_limits (
  key_id        TEXT PRIMARY KEY,
  limit_micros  INTEGER CHECK (limit_micros IS NULL OR limit_micros > 0),
  period        TEXT NOT NULL CHECK (period IN ('day', 'month', 'total')),
  period_start  INTEGER NOT NULL,
  period_seq    INTEGER NOT NULL DEFAULT 0,
  spent_micros  INTEGER NOT NULL DEFAULT 0 CHECK (spent_micros >= 0)
) WITHOUT ROWID;

-- The key and the period a hold was counted in (NULL for a hold no limit counted): its release gives the amount
-- back to that period only. The index serves the invariant that sums each key's counted holds.
ALTER TABLE holds ADD COLUMN spend_key_id TEXT;
ALTER TABLE holds ADD COLUMN spend_period_seq INTEGER;
CREATE INDEX holds_by_spend_period ON holds(spend_key_id, spend_period_seq) WHERE spend_key_id IS NOT NULL;
`,
  },
  {
    version: 18,
    rebuildsTables: true,
    sql: `
-- x402 (issue 15): a call paid by an EIP-3009 authorization instead of a prepaid balance is settled on-chain by
-- the escrow's settleX402, which credits the seller and the treasury at once; the books record it as one entry of
-- a new kind, 'x402_payment', paying the seller's 'earned' and the platform's 'fees' from the x402 payers' source
-- account (its x402_payments row names the entry). A CHECK cannot be changed in place, so the table is rebuilt
-- with its ids, indexes and append-only triggers, as version 15 did.
CREATE TABLE entries_v18 (
  id                 INTEGER PRIMARY KEY,
  kind               TEXT NOT NULL CHECK (kind IN ('dev_credit', 'deposit', 'hold', 'capture', 'release',
                                                   'voucher_withdrawal', 'voucher_return', 'exit_freeze', 'exit_return',
                                                   'x402_payment')),
  hold_id            TEXT,
  voucher_address    TEXT,
  voucher_nonce      INTEGER,
  deposit_tx_hash    TEXT,
  deposit_log_index  INTEGER,
  exit_tx_hash       TEXT,
  exit_log_index     INTEGER,
  memo               TEXT,
  created_at         INTEGER NOT NULL,
  CHECK ((kind IN ('voucher_withdrawal', 'voucher_return')) = (voucher_address IS NOT NULL AND voucher_nonce IS NOT NULL)),
  CHECK ((voucher_address IS NULL) = (voucher_nonce IS NULL)),
  CHECK ((kind IN ('exit_freeze', 'exit_return')) = (exit_tx_hash IS NOT NULL AND exit_log_index IS NOT NULL)),
  CHECK ((exit_tx_hash IS NULL) = (exit_log_index IS NULL)),
  CHECK (deposit_tx_hash IS NULL OR kind = 'deposit'),
  CHECK ((deposit_tx_hash IS NULL) = (deposit_log_index IS NULL))
);
INSERT INTO entries_v18 (id, kind, hold_id, voucher_address, voucher_nonce, deposit_tx_hash, deposit_log_index,
                         exit_tx_hash, exit_log_index, memo, created_at)
SELECT id, kind, hold_id, voucher_address, voucher_nonce, deposit_tx_hash, deposit_log_index,
       exit_tx_hash, exit_log_index, memo, created_at
FROM entries;
DROP TABLE entries;
ALTER TABLE entries_v18 RENAME TO entries;

CREATE UNIQUE INDEX entries_one_settlement_per_hold ON entries(hold_id) WHERE kind IN ('capture', 'release');
CREATE UNIQUE INDEX entries_one_credit_per_deposit ON entries(deposit_tx_hash, deposit_log_index) WHERE deposit_tx_hash IS NOT NULL;
CREATE UNIQUE INDEX entries_once_per_voucher ON entries(voucher_address, voucher_nonce, kind) WHERE voucher_address IS NOT NULL;
CREATE INDEX entries_by_exit ON entries(exit_tx_hash, exit_log_index) WHERE exit_tx_hash IS NOT NULL;
CREATE TRIGGER entries_no_update BEFORE UPDATE ON entries
BEGIN
  SELECT RAISE(ABORT, 'entries are append-only: an entry cannot be changed, post a reversing entry instead');
END;
CREATE TRIGGER entries_no_delete BEFORE DELETE ON entries
BEGIN
  SELECT RAISE(ABORT, 'entries are append-only: an entry cannot be deleted, post a reversing entry instead');
END;
`,
  },
  {
    version: 19,
    sql: `
-- A seller's display name (issue 16; server/identity/display-name.ts): what the marketplace shows as a skill's
-- seller, set by the account itself. NULL until set. Not the account's name, which is how it signed up (often
-- an e-mail address, never shown to strangers). Checked in code: 1 to 60 characters, trimmed, no control characters.
ALTER TABLE accounts ADD COLUMN display_name TEXT;
`,
  },
  {
    version: 30,
    sql: `
-- Reads the running gateway repeats (a loop, or a request anyone may send), bounded by what they read, not by every
-- row ever written (docs/money-path.md, Settlement).
-- The reconciliation after every batch sums the deposit and voucher entries: found by kind, not by every posting.
-- Partial, so the two entries each call writes pay nothing for them.
CREATE INDEX entries_deposits ON entries(id) WHERE kind = 'deposit';
CREATE INDEX entries_vouchers ON entries(id) WHERE kind IN ('voucher_withdrawal', 'voucher_return');
`,
  },
];

/**
 * Migration 15's guard: a 'withdrawal' entry that is none of the four movements (no voucher names it, no exit
 * links it, its memo is not a voucher return's) cannot be given a kind; the migration stops and names it.
 */
function refuseUnclassifiableWithdrawals(db: Db): void {
  const orphans = db
    .prepare(
      `SELECT e.id, e.memo FROM entries e
       WHERE e.kind = 'withdrawal'
         AND NOT EXISTS (SELECT 1 FROM exit_entries ee WHERE ee.entry_id = e.id)
         AND NOT EXISTS (SELECT 1 FROM vouchers v WHERE v.entry_id = e.id)
         AND NOT EXISTS (SELECT 1 FROM vouchers v WHERE e.memo = 'voucher ' || v.address || ':' || v.nonce || ' expired unredeemed: returned')
       LIMIT 5`,
    )
    .all() as { id: bigint; memo: string | null }[];
  if (orphans.length > 0) {
    throw new Error(
      `migration 15: withdrawal entries that are no voucher's and no exit's, so no kind fits them: ${orphans.map((o) => `#${o.id} (${JSON.stringify(o.memo)})`).join(", ")}`,
    );
  }
}
