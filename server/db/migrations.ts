import type Database from "better-sqlite3";

/**
 * The schema, as an append-only list of migrations. A migration is never edited once it
 * has shipped; a change is a new entry. Money columns are INTEGER base units.
 */
export interface Migration {
  version: number;
  name: string;
  /** The schema change, run as one script inside the migration's transaction. */
  sql: string;
  /**
   * Set when the migration rebuilds a table that other tables reference (SQLite changes a CHECK only by
   * copying the table): foreign keys are switched off around its transaction, as SQLite's documented
   * procedure for such changes asks, and `PRAGMA foreign_key_check` must come back empty before it commits.
   */
  rebuildsTables?: boolean;
  /** Runs before `sql`, in the same transaction: a check that refuses, with a clear message, data `sql` cannot convert. */
  before?: (db: Database.Database) => void;
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: "ledger, skills, keys, calls, idempotency",
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

CREATE TABLE skills (
  id                 TEXT PRIMARY KEY,
  slug               TEXT NOT NULL UNIQUE,
  name               TEXT NOT NULL,
  description        TEXT NOT NULL DEFAULT '',
  price_micros       INTEGER NOT NULL CHECK (price_micros >= 0),
  seller_account_id  TEXT NOT NULL REFERENCES accounts(id),
  backend_url        TEXT NOT NULL,
  timeout_ms         INTEGER NOT NULL CHECK (timeout_ms > 0),
  rate_limit_per_min INTEGER CHECK (rate_limit_per_min IS NULL OR rate_limit_per_min > 0),
  input_schema       TEXT,
  signing_secret     TEXT NOT NULL,
  active             INTEGER NOT NULL DEFAULT 1,
  created_at         INTEGER NOT NULL,
  updated_at         INTEGER NOT NULL
);

CREATE TABLE api_keys (
  id          TEXT PRIMARY KEY,
  account_id  TEXT NOT NULL REFERENCES accounts(id),
  name        TEXT NOT NULL DEFAULT '',
  prefix      TEXT NOT NULL,
  hash        TEXT NOT NULL UNIQUE,
  rate_limit_per_min INTEGER CHECK (rate_limit_per_min IS NULL OR rate_limit_per_min > 0),
  created_at  INTEGER NOT NULL,
  revoked_at  INTEGER
);
CREATE INDEX api_keys_by_account ON api_keys(account_id);

CREATE TABLE calls (
  id              TEXT PRIMARY KEY,
  account_id      TEXT NOT NULL REFERENCES accounts(id),
  api_key_id      TEXT NOT NULL,
  skill_id        TEXT NOT NULL,
  endpoint        TEXT NOT NULL CHECK (endpoint IN ('call', 'skill_call')),
  http_status     INTEGER NOT NULL,
  outcome         TEXT NOT NULL,
  charged_micros  INTEGER NOT NULL DEFAULT 0 CHECK (charged_micros >= 0),
  hold_id         TEXT,
  latency_us      INTEGER NOT NULL,
  created_at      INTEGER NOT NULL
);
CREATE INDEX calls_by_account ON calls(account_id, created_at);

CREATE TABLE idempotency_keys (
  account_id    TEXT NOT NULL,
  key           TEXT NOT NULL,
  request_hash  TEXT NOT NULL,
  state         TEXT NOT NULL CHECK (state IN ('in_progress', 'completed')),
  status_code   INTEGER,
  response_body TEXT,
  created_at    INTEGER NOT NULL,
  PRIMARY KEY (account_id, key)
) WITHOUT ROWID;
CREATE INDEX idempotency_by_age ON idempotency_keys(created_at);
`,
  },
  {
    version: 2,
    name: "balances maintained by the database from postings",
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
    version: 3,
    name: "on-chain addresses, escrow deposits, indexer progress",
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
    name: "settlement batches, each captured hold's batch",
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

-- A receipt names its call by the call's id; the settler finds it from the hold.
CREATE INDEX calls_by_hold ON calls(hold_id) WHERE hold_id IS NOT NULL;
`,
  },
  {
    version: 5,
    name: "withdrawal vouchers",
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
    name: "unilateral exits seen by the indexer, and the ledger entries that freeze them",
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
    version: 7,
    name: "identities and sessions",
    sql: `
-- Who a person is to the outside world: a wallet (SIWE), an e-mail address, a GitHub or a
-- Google account. One account may have several; an identity belongs to one account.
CREATE TABLE identities (
  provider    TEXT NOT NULL CHECK (provider IN ('siwe', 'email', 'github', 'google')),
  subject     TEXT NOT NULL,
  account_id  TEXT NOT NULL REFERENCES accounts(id),
  created_at  INTEGER NOT NULL,
  PRIMARY KEY (provider, subject)
) WITHOUT ROWID;
CREATE INDEX identities_by_account ON identities(account_id);

-- Dashboard sessions. Only the SHA-256 of the session token is stored, like API keys.
CREATE TABLE sessions (
  token_hash  TEXT PRIMARY KEY,
  account_id  TEXT NOT NULL REFERENCES accounts(id),
  csrf_token  TEXT NOT NULL,
  created_at  INTEGER NOT NULL,
  expires_at  INTEGER NOT NULL,
  revoked_at  INTEGER
) WITHOUT ROWID;
CREATE INDEX sessions_by_account ON sessions(account_id);
`,
  },
  {
    version: 8,
    name: "SIWE nonces, API keys' last use",
    sql: `
-- Nonces the gateway issued for Sign-In With Ethereum (server/identity/siwe.ts). A nonce is
-- good once, until expires_at: verification sets used_at in the same statement that checks
-- it is unset and unexpired, so two requests cannot both use one.
CREATE TABLE siwe_nonces (
  nonce       TEXT PRIMARY KEY,
  created_at  INTEGER NOT NULL,
  expires_at  INTEGER NOT NULL,
  used_at     INTEGER
) WITHOUT ROWID;
CREATE INDEX siwe_nonces_by_expiry ON siwe_nonces(expires_at);

-- When a key last authenticated a request, to the minute (ApiKeys writes it at most once a
-- minute per key, in the background, never on the call path).
ALTER TABLE api_keys ADD COLUMN last_used_at INTEGER;
`,
  },
  {
    version: 9,
    name: "e-mail sign-in links, outbox, OAuth states",
    sql: `
-- E-mail magic links (server/identity/email.ts). Only the SHA-256 of a link's token is
-- kept. Consuming sets used_at in the same statement that checks it is unset and
-- unexpired, so a link signs in once. link_to: the signed-in account that asked for it.
CREATE TABLE email_sign_in_tokens (
  token_hash  TEXT PRIMARY KEY,
  email       TEXT NOT NULL,
  link_to     TEXT REFERENCES accounts(id),
  created_at  INTEGER NOT NULL,
  expires_at  INTEGER NOT NULL,
  used_at     INTEGER
) WITHOUT ROWID;
CREATE INDEX email_sign_in_tokens_by_email ON email_sign_in_tokens(email, created_at);

-- The default mailer's outbox: every message the gateway would have sent, for a developer
-- to read when no SMTP server is configured.
CREATE TABLE outbox (
  id          INTEGER PRIMARY KEY,
  to_address  TEXT NOT NULL,
  subject     TEXT NOT NULL,
  body        TEXT NOT NULL,
  created_at  INTEGER NOT NULL
);

-- Started GitHub/Google sign-ins (server/identity/oauth.ts): the state's SHA-256, the PKCE
-- verifier and OIDC nonce that go with it, good once until expires_at.
CREATE TABLE oauth_states (
  state_hash     TEXT PRIMARY KEY,
  provider       TEXT NOT NULL CHECK (provider IN ('github', 'google')),
  code_verifier  TEXT NOT NULL,
  nonce          TEXT NOT NULL,
  link_to        TEXT REFERENCES accounts(id),
  created_at     INTEGER NOT NULL,
  expires_at     INTEGER NOT NULL,
  used_at        INTEGER
) WITHOUT ROWID;
`,
  },
  {
    version: 10,
    name: "embedded wallets",
    sql: `
-- Each account's embedded wallet: an ERC-4337 SimpleAccount (EntryPoint v0.7) at a counterfactual address,
-- where the user sends USDC and the gateway moves it into the escrow (server/wallets/wallets.ts). The owner
-- is the user's own wallet for SIWE accounts ('siwe': no key here) or a key the server generated ('server'),
-- stored only encrypted: AES-256-GCM under WALLET_ENCRYPTION_KEY, bound to the account and the address.
-- Addresses lowercase, like account_addresses.
CREATE TABLE embedded_wallets (
  account_id           TEXT PRIMARY KEY REFERENCES accounts(id),
  address              TEXT NOT NULL UNIQUE,
  owner_kind           TEXT NOT NULL CHECK (owner_kind IN ('siwe', 'server')),
  owner_address        TEXT NOT NULL,
  encrypted_owner_key  BLOB,
  created_at           INTEGER NOT NULL,
  CHECK ((owner_kind = 'server') = (encrypted_owner_key IS NOT NULL))
) WITHOUT ROWID;
`,
  },
  {
    version: 11,
    name: "card top-ups",
    sql: `
-- Card top-ups (server/payments/card.ts): one row per checkout at the payment provider, keyed by the provider's
-- checkout id, which is also what makes a repeated provider notification harmless: only the move out of
-- 'created' acts. A paid checkout is funded on-chain (test USDC minted to the gateway's funding wallet, then
-- depositFor the account's address); the ledger credit comes from the deposit indexer, never from here.
-- mint_tx and deposit_tx are recorded as soon as sent, so a retry does not send them twice.
CREATE TABLE card_checkouts (
  id            TEXT PRIMARY KEY,
  provider      TEXT NOT NULL,
  account_id    TEXT NOT NULL REFERENCES accounts(id),
  address       TEXT NOT NULL,
  amount        INTEGER NOT NULL CHECK (amount > 0),
  status        TEXT NOT NULL CHECK (status IN ('created', 'paid', 'declined', 'abandoned', 'funded')),
  decline_code  TEXT,
  mint_tx       TEXT,
  deposit_tx    TEXT,
  created_at    INTEGER NOT NULL,
  expires_at    INTEGER NOT NULL,
  updated_at    INTEGER NOT NULL,
  CHECK (status <> 'funded' OR deposit_tx IS NOT NULL),
  CHECK (status IN ('paid', 'funded') OR (mint_tx IS NULL AND deposit_tx IS NULL))
) WITHOUT ROWID;
CREATE INDEX card_checkouts_by_account ON card_checkouts(account_id, created_at);
`,
  },
  {
    version: 12,
    name: "an account's money history, by account",
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
    version: 13,
    name: "entries and postings are append-only",
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
    version: 14,
    name: "sign-in state bounded per client and pruned by expiry",
    sql: `
-- Anyone may ask for a SIWE nonce, so what one client address holds is bounded
-- (server/identity/siwe.ts): each nonce keeps the rate-limit key of the address that asked
-- (an IPv4 address, or an IPv6 /64), for the 10 minutes it lives. NULL for older rows.
ALTER TABLE siwe_nonces ADD COLUMN client TEXT;
CREATE INDEX siwe_nonces_by_client ON siwe_nonces(client, created_at);

-- The periodic prune (server/index.ts) deletes by expiry; these make it, and the counts of
-- what is outstanding, range scans rather than table scans.
CREATE INDEX email_sign_in_tokens_by_expiry ON email_sign_in_tokens(expires_at);
CREATE INDEX oauth_states_by_expiry ON oauth_states(expires_at);
CREATE INDEX sessions_by_expiry ON sessions(expires_at);
CREATE INDEX sessions_revoked ON sessions(revoked_at) WHERE revoked_at IS NOT NULL;
`,
  },
  {
    version: 15,
    name: "one entry kind per money movement, linked by columns",
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
];

/**
 * Migration 15's guard: a 'withdrawal' entry that is none of the four movements (no voucher names it, no exit
 * links it, its memo is not a voucher return's) cannot be given a kind; the migration stops and names it.
 */
function refuseUnclassifiableWithdrawals(db: Database.Database): void {
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

/** Applies every migration the database has not seen yet, each in its own transaction. */
export function migrate(db: Database.Database): number {
  db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`);
  const applied = new Set(
    db
      .prepare("SELECT version FROM schema_migrations")
      .all()
      .map((r) => Number((r as { version: bigint }).version)),
  );
  let count = 0;
  for (const m of MIGRATIONS) {
    if (applied.has(m.version)) continue;
    // PRAGMA foreign_keys is a no-op inside a transaction, so it is switched here, around it.
    const foreignKeys = db.pragma("foreign_keys", { simple: true });
    if (m.rebuildsTables) db.pragma("foreign_keys = OFF");
    try {
      db.transaction(() => {
        m.before?.(db);
        db.exec(m.sql);
        if (m.rebuildsTables) {
          const broken = db.pragma("foreign_key_check") as unknown[];
          if (broken.length > 0)
            throw new Error(
              `migration ${m.version} broke ${broken.length} foreign key(s): ${JSON.stringify(broken[0], (_k, x) => (typeof x === "bigint" ? x.toString() : x))}`,
            );
        }
        db.prepare("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)").run(m.version, m.name, Date.now());
      })();
    } finally {
      if (m.rebuildsTables) db.pragma(`foreign_keys = ${foreignKeys ? "ON" : "OFF"}`);
    }
    count++;
  }
  return count;
}
