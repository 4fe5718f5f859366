import type { SchemaStep } from "../db/migrations";

/**
 * Settlement's tables: on-chain addresses, escrow deposits, indexer progress, settlement batches, vouchers, exits.
 *
 * Each step belongs to one global schema version (server/schema.ts names the versions and applies them in order):
 * a step is never edited once it has shipped; a change is a step of a new version. Money columns are INTEGER base units.
 */
export const SETTLEMENT_SCHEMA: readonly SchemaStep[] = [
  {
    version: 3,
    sql: `
-- The on-chain addresses of an account (several per account, one account per address). Stored
-- lowercase, so a lookup never misses on a checksum's letter case.
CREATE TABLE account_addresses (
  address     TEXT PRIMARY KEY CHECK (length(address) = 42 AND substr(address, 1, 2) = '0x' AND address = lower(address)),
  account_id  TEXT NOT NULL REFERENCES accounts(id),
  created_at  INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX account_addresses_by_account ON account_addresses(account_id);

-- Every escrow Deposited log the indexer has seen, keyed by where it is on the chain: the key makes
-- a log credited twice impossible. A deposit to an address no account has linked yet waits here with
-- no account and no entry; the link credits it. Both are set together, in the crediting operation.
CREATE TABLE chain_deposits (
  tx_hash       TEXT NOT NULL,
  log_index     INTEGER NOT NULL CHECK (log_index >= 0),
  block_number  INTEGER NOT NULL CHECK (block_number >= 0),
  block_hash    TEXT NOT NULL,
  address       TEXT NOT NULL,
  sender        TEXT NOT NULL,
  amount        INTEGER NOT NULL CHECK (amount > 0),
  account_id    TEXT REFERENCES accounts(id),
  entry_id      INTEGER UNIQUE REFERENCES entries(id),
  created_at    INTEGER NOT NULL,
  PRIMARY KEY (tx_hash, log_index),
  CHECK ((account_id IS NULL) = (entry_id IS NULL))
) WITHOUT ROWID;
CREATE INDEX chain_deposits_waiting ON chain_deposits(address) WHERE account_id IS NULL;

-- How far each chain indexer has read: the last block it finished and that block's hash, so the
-- next read can tell whether the chain under it was replaced.
CREATE TABLE indexer_state (
  name             TEXT PRIMARY KEY,
  last_block       INTEGER NOT NULL CHECK (last_block >= 0),
  last_block_hash  TEXT NOT NULL,
  updated_at       INTEGER NOT NULL
) WITHOUT ROWID;
`,
  },
  {
    version: 4,
    sql: `
-- One row per settlement batch the settler has recorded (server/settlement/settler.ts). A batch is recorded
-- 'pending' before it is sent and marked 'settled' once the chain has it; its number is the escrow's
-- batch number. The recorded root and totals let a restart check that the batch it rebuilds from its
-- holds is the one it recorded, byte for byte.
CREATE TABLE settlement_batches (
  number             INTEGER PRIMARY KEY CHECK (number > 0),
  status             TEXT NOT NULL CHECK (status IN ('pending', 'settled')),
  receipts_root      TEXT NOT NULL CHECK (length(receipts_root) = 66 AND receipts_root = lower(receipts_root)),
  call_count         INTEGER NOT NULL CHECK (call_count > 0),
  total_debits       INTEGER NOT NULL CHECK (total_debits > 0),
  platform_fee       INTEGER NOT NULL CHECK (platform_fee >= 0 AND platform_fee <= total_debits),
  -- The chain's head when the batch was recorded: where a restart looks for its BatchSettled event.
  recorded_at_block  INTEGER NOT NULL CHECK (recorded_at_block >= 0),
  tx_hash            TEXT,
  created_at         INTEGER NOT NULL,
  settled_at         INTEGER,
  CHECK ((status = 'settled') = (settled_at IS NOT NULL))
);
-- The settler sends one batch at a time: at most one is pending.
CREATE UNIQUE INDEX settlement_batches_one_pending ON settlement_batches(status) WHERE status = 'pending';
-- What was recorded is what is sent: a recorded batch's contents never change, and a settled batch
-- never goes back to pending.
CREATE TRIGGER settlement_batches_frozen BEFORE UPDATE OF number, receipts_root, call_count, total_debits, platform_fee, recorded_at_block
ON settlement_batches
BEGIN
  SELECT RAISE(ABORT, 'a recorded settlement batch cannot change');
END;
CREATE TRIGGER settlement_batches_no_unsettle BEFORE UPDATE OF status ON settlement_batches
WHEN OLD.status = 'settled' AND NEW.status <> 'settled'
BEGIN
  SELECT RAISE(ABORT, 'a settled batch cannot become pending again');
END;
`,
  },
  {
    version: 5,
    sql: `
-- Vouchers the gateway signed for instant withdrawals (server/settlement/vouchers.ts). The amount
-- left the ledger (a 'withdrawal' entry) when the voucher was issued; 'returned' means the
-- voucher expired unredeemed and the amount came back (a second 'withdrawal' entry, reversed).
CREATE TABLE vouchers (
  address     TEXT NOT NULL CHECK (address = lower(address)),
  nonce       INTEGER NOT NULL CHECK (nonce > 0),
  account_id  TEXT NOT NULL REFERENCES accounts(id),
  amount      INTEGER NOT NULL CHECK (amount > 0),
  deadline    INTEGER NOT NULL,
  status      TEXT NOT NULL CHECK (status IN ('issued', 'redeemed', 'returned')),
  signature   TEXT,
  entry_id    INTEGER NOT NULL UNIQUE REFERENCES entries(id),
  created_at  INTEGER NOT NULL,
  PRIMARY KEY (address, nonce)
) WITHOUT ROWID;
CREATE INDEX vouchers_issued ON vouchers(status) WHERE status = 'issued';
`,
  },
  {
    version: 6,
    sql: `
-- One row per ExitRequested log of the escrow (server/settlement/exits.ts), keyed by where it is on the chain.
-- While the request is 'pending', 'frozen' is what the ledger has taken out of the account's available
-- balance for it (withdrawal entries linked in exit_entries) and 'shortfall' is what it still must take:
-- frozen + shortfall = requested. Money that reaches the account's available balance while a shortfall is
-- open (a released hold, a deposit, a returned voucher) goes to the freeze first (Ledger.topUpExitFreezes).
-- A request ends once: replaced by a newer request, cancelled, or completed, each by the log named in
-- closed_*. A replaced or cancelled request has given its freeze back (frozen = 0); a completed one has
-- frozen = what the ledger took for it and uncovered = what the escrow paid beyond that (paid = frozen +
-- uncovered; non-zero uncovered means the ledger still counts money the escrow has paid out).
-- account_id is NULL for an address no account had linked when the request was indexed: nothing is frozen.
CREATE TABLE chain_exits (
  tx_hash             TEXT NOT NULL,
  log_index           INTEGER NOT NULL CHECK (log_index >= 0),
  block_number        INTEGER NOT NULL CHECK (block_number >= 0),
  block_hash          TEXT NOT NULL,
  address             TEXT NOT NULL CHECK (address = lower(address)),
  account_id          TEXT REFERENCES accounts(id),
  requested           INTEGER NOT NULL CHECK (requested > 0),
  ready_at            INTEGER NOT NULL,
  status              TEXT NOT NULL CHECK (status IN ('pending', 'replaced', 'cancelled', 'completed')),
  frozen              INTEGER NOT NULL DEFAULT 0 CHECK (frozen >= 0),
  shortfall           INTEGER NOT NULL DEFAULT 0 CHECK (shortfall >= 0),
  paid                INTEGER CHECK (paid IS NULL OR paid >= 0),
  uncovered           INTEGER NOT NULL DEFAULT 0 CHECK (uncovered >= 0),
  closed_tx_hash      TEXT,
  closed_log_index    INTEGER,
  closed_block_number INTEGER,
  created_at          INTEGER NOT NULL,
  closed_at           INTEGER,
  PRIMARY KEY (tx_hash, log_index),
  CHECK ((status = 'pending') = (closed_tx_hash IS NULL)),
  CHECK ((status = 'completed') = (paid IS NOT NULL)),
  CHECK (status = 'pending' OR shortfall = 0),
  CHECK (status <> 'pending' OR account_id IS NULL OR frozen + shortfall = requested),
  CHECK (status NOT IN ('replaced', 'cancelled') OR frozen = 0),
  CHECK (status <> 'completed' OR frozen + uncovered = paid),
  CHECK (account_id IS NOT NULL OR (frozen = 0 AND shortfall = 0))
) WITHOUT ROWID;
-- The escrow keeps one pending exit per address.
CREATE UNIQUE INDEX chain_exits_one_pending ON chain_exits(address) WHERE status = 'pending';
-- Each closing log closes one request: a log re-read cannot close a second one.
CREATE UNIQUE INDEX chain_exits_closed_by ON chain_exits(closed_tx_hash, closed_log_index) WHERE closed_tx_hash IS NOT NULL;
-- What the ledger consults when money reaches an account: its open shortfalls (usually none at all).
CREATE INDEX chain_exits_short ON chain_exits(account_id, block_number, log_index) WHERE status = 'pending' AND shortfall > 0;

-- The ledger entries (all 'withdrawal') that froze, topped up, returned or settled an exit's amount.
CREATE TABLE exit_entries (
  entry_id      INTEGER PRIMARY KEY REFERENCES entries(id),
  exit_tx_hash  TEXT NOT NULL,
  exit_log_index INTEGER NOT NULL,
  FOREIGN KEY (exit_tx_hash, exit_log_index) REFERENCES chain_exits(tx_hash, log_index)
);
CREATE INDEX exit_entries_by_exit ON exit_entries(exit_tx_hash, exit_log_index);
`,
  },
  {
    version: 12,
    sql: `
-- The dashboard's history (server/ledger/history.ts) reads each kind of movement newest first per
-- account. These tables grow with deposits and withdrawals, not with calls, so the indexes cost the
-- call path nothing (calls already has calls_by_account).
CREATE INDEX chain_deposits_by_account ON chain_deposits(account_id, created_at) WHERE account_id IS NOT NULL;
CREATE INDEX vouchers_by_account ON vouchers(account_id, created_at);
CREATE INDEX chain_exits_by_account ON chain_exits(account_id, created_at) WHERE account_id IS NOT NULL;
`,
  },
  {
    version: 29,
    sql: `
-- What the settled batches paid, per (payer, seller): their calls' sums, added by the database as a batch is marked
-- settled (the trigger below, in the transaction that marks it), so the reconciliation after each batch and a seller's
-- earnings read one row per pair instead of every call ever settled (a pass over the holds took 0.9 s at a million
-- calls, on the event loop, after every batch). The reconciliation's first pass in a process checks these rows
-- against the holds (./reconcile.ts).
CREATE TABLE settled_pair_totals (
  account_id        TEXT NOT NULL REFERENCES accounts(id),
  seller_account_id TEXT NOT NULL REFERENCES accounts(id),
  calls             INTEGER NOT NULL CHECK (calls > 0),
  debits            INTEGER NOT NULL CHECK (debits > 0),
  credits           INTEGER NOT NULL CHECK (credits >= 0),
  PRIMARY KEY (account_id, seller_account_id)
);
CREATE INDEX settled_pair_totals_by_seller ON settled_pair_totals(seller_account_id);
CREATE TRIGGER settlement_batches_settled_totals AFTER UPDATE OF status ON settlement_batches
WHEN OLD.status = 'pending' AND NEW.status = 'settled'
BEGIN
  INSERT INTO settled_pair_totals (account_id, seller_account_id, calls, debits, credits)
  SELECT account_id, seller_account_id, COUNT(*), SUM(amount), SUM(seller_amount) FROM holds
  WHERE batch_number = NEW.number GROUP BY account_id, seller_account_id
  ON CONFLICT (account_id, seller_account_id) DO UPDATE SET
    calls = calls + excluded.calls, debits = debits + excluded.debits, credits = credits + excluded.credits;
END;
-- A pair's totals only grow, a batch at a time, and are never deleted.
CREATE TRIGGER settled_pair_totals_grow BEFORE UPDATE ON settled_pair_totals
WHEN NOT (NEW.account_id = OLD.account_id AND NEW.seller_account_id = OLD.seller_account_id
          AND NEW.calls > OLD.calls AND NEW.debits > OLD.debits AND NEW.credits >= OLD.credits)
BEGIN
  SELECT RAISE(ABORT, 'the settled totals only grow, by the batches marked settled');
END;
CREATE TRIGGER settled_pair_totals_kept BEFORE DELETE ON settled_pair_totals
BEGIN
  SELECT RAISE(ABORT, 'the settled totals cannot be deleted');
END;
INSERT INTO settled_pair_totals (account_id, seller_account_id, calls, debits, credits)
SELECT h.account_id, h.seller_account_id, COUNT(*), SUM(h.amount), SUM(h.seller_amount)
FROM holds h JOIN settlement_batches b ON b.number = h.batch_number
WHERE b.status = 'settled'
GROUP BY h.account_id, h.seller_account_id;
-- What a batch sums to cannot move under it: a call joins only a pending batch, and once in a batch its hold changes no
-- more and is never deleted (moving it to another batch is holds_batch_once's refusal, version 4).
CREATE TRIGGER holds_into_pending_batch BEFORE UPDATE OF batch_number ON holds
WHEN OLD.batch_number IS NULL AND NEW.batch_number IS NOT NULL
 AND (SELECT status FROM settlement_batches WHERE number = NEW.batch_number) IS NOT 'pending'
BEGIN
  SELECT RAISE(ABORT, 'a hold joins only a pending settlement batch');
END;
CREATE TRIGGER holds_batched_final BEFORE UPDATE ON holds
WHEN OLD.batch_number IS NOT NULL AND NEW.batch_number IS OLD.batch_number
BEGIN
  SELECT RAISE(ABORT, 'a hold in a settlement batch cannot change');
END;
CREATE TRIGGER holds_batched_kept BEFORE DELETE ON holds
WHEN OLD.batch_number IS NOT NULL
BEGIN
  SELECT RAISE(ABORT, 'a hold in a settlement batch cannot be deleted');
END;
`,
  },
];
