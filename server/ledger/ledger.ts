import { uuidv7 } from "../db/ids";
import type { Db } from "../db/db";
import type { Charge } from "./fees";
import { GroupCommit } from "../db/group-commit";
import { ENTRY_SUMS_TO_ZERO, LedgerInvariantError } from "./invariants";
import { ExitFreezes, type ExitKey } from "./exit-freezes";

export type AccountKind = "user" | "seller" | "platform" | "system";
export type Bucket = "available" | "held" | "earned" | "fees" | "source";
export type CreditKind = "dev_credit" | "deposit";
/**
 * What an entry does: one kind per movement, so the journal says what happened without reading a memo.
 * `voucher_withdrawal`/`voucher_return` take a voucher's amount out and give an expired one back;
 * `exit_freeze`/`exit_return` freeze money for a unilateral exit and give (part of) a freeze back.
 */
export type EntryKind =
  "dev_credit" | "deposit" | "hold" | "capture" | "release" | "voucher_withdrawal" | "voucher_return" | "exit_freeze" | "exit_return";
/** The entry kinds that move money between an account and the escrow's side of the books (money out). */
export const WITHDRAWAL_KINDS: readonly EntryKind[] = ["voucher_withdrawal", "voucher_return", "exit_freeze", "exit_return"];
type Posting = [accountId: string, bucket: Bucket, amountMicros: bigint];

/** The platform's own account: it earns the fee on every captured call. */
export const PLATFORM_ACCOUNT_ID = "platform";
/** Where money credited by the `dev_credit` seed step comes from. It is not a deposit. */
export const DEV_CREDIT_SOURCE_ID = "system:dev_credit";
/** Where on-chain escrow deposits come from (used once the chain is joined to the ledger). */
export const ESCROW_SOURCE_ID = "system:escrow";

const SOURCE_FOR: Record<CreditKind, string> = { dev_credit: DEV_CREDIT_SOURCE_ID, deposit: ESCROW_SOURCE_ID };

export interface Account {
  id: string;
  kind: AccountKind;
  name: string;
  dailyCallCap: number | null;
}

export interface Hold {
  id: string;
  accountId: string;
  sellerAccountId: string;
  skillId: string;
  amountMicros: bigint;
  sellerMicros: bigint;
  feeMicros: bigint;
}

export type HoldResult =
  { ok: true; hold: Hold } | { ok: false; reason: "insufficient_balance"; availableMicros: bigint; neededMicros: bigint };

export type SettleResult = { ok: true; hold: Hold } | { ok: false; reason: "hold_not_open" };

/** Names a chain log (a Deposited log: server/settlement/indexer.ts) by its position. */
export interface LogKey {
  txHash: string;
  logIndex: number;
}

/** Names a withdrawal voucher (server/settlement/vouchers.ts): the escrow address it pays and its nonce. */
export interface VoucherKey {
  address: string;
  nonce: bigint;
}

/** The record elsewhere an entry belongs to, stored in the entry's link columns. */
interface EntryLink {
  holdId?: string;
  voucher?: VoucherKey;
  deposit?: LogKey;
  exit?: ExitKey;
}

export interface Balance {
  availableMicros: bigint;
  heldMicros: bigint;
}

/**
 * The double-entry ledger. Every movement is an entry whose postings sum to zero; each
 * posting also moves the materialized balance of its (account, bucket) in the same
 * savepoint. A user's money is in `available` or `held`; a call reserves its price by
 * moving it to `held` (hold), then either pays it out to the seller's `earned` and the
 * platform's `fees` (capture) or gives it back (release). The invariants that must hold
 * after every commit are in ./invariants.ts.
 *
 * All writes go through the GroupCommit, so they share durable commits; a caller that
 * reports a result to a client awaits `commit.durable()` first.
 */
export class Ledger {
  readonly commit: GroupCommit;
  private readonly stmt;
  /** The unilateral exits' freezes and their shortfalls (./exit-freezes.ts), written through this Ledger's entries. */
  private readonly freezes: ExitFreezes;

  constructor(
    readonly db: Db,
    commit?: GroupCommit,
  ) {
    this.commit = commit ?? new GroupCommit(db);
    this.stmt = {
      insertAccount: db.prepare("INSERT INTO accounts (id, kind, name, daily_call_cap, created_at) VALUES (?, ?, ?, ?, ?)"),
      getAccount: db.prepare("SELECT id, kind, name, daily_call_cap FROM accounts WHERE id = ?"),
      insertBucket: db.prepare("INSERT INTO ledger_accounts (account_id, bucket, balance) VALUES (?, ?, 0) ON CONFLICT DO NOTHING"),
      insertEntry: db.prepare(
        `INSERT INTO entries (kind, hold_id, voucher_address, voucher_nonce, deposit_tx_hash, deposit_log_index,
                              exit_tx_hash, exit_log_index, memo, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      ),
      // One statement per entry for its two or three postings; the postings_move_balance
      // trigger moves the balances.
      insertPostings: [1, 2, 3].map((n) =>
        db.prepare(`INSERT INTO postings (entry_id, account_id, bucket, amount) VALUES ${Array(n).fill("(?, ?, ?, ?)").join(", ")}`),
      ),
      getBalance: db.prepare("SELECT balance FROM ledger_accounts WHERE account_id = ? AND bucket = ?").pluck(),
      insertHold: db.prepare(
        `INSERT INTO holds (id, account_id, seller_account_id, skill_id, amount, seller_amount, fee_amount, status, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, 'open', ?)`,
      ),
      getOpenHold: db.prepare(
        `SELECT id, account_id, seller_account_id, skill_id, amount, seller_amount, fee_amount
         FROM holds WHERE id = ? AND status = 'open'`,
      ),
      closeHold: db.prepare("UPDATE holds SET status = ?, closed_at = ? WHERE id = ? AND status = 'open'"),
      openHoldIds: db.prepare("SELECT id FROM holds WHERE status = 'open'").pluck(),
      openHoldCount: db.prepare("SELECT COUNT(*) FROM holds WHERE status = 'open'").pluck(),
      assignToBatch: db.prepare("UPDATE holds SET batch_number = ? WHERE id = ? AND status = 'captured' AND batch_number IS NULL"),
    };
    this.freezes = new ExitFreezes(db, {
      run: (fn) => this.commit.run(fn),
      availableOf: (accountId) => this.balanceOf(accountId, "available"),
      freeze: (accountId, amountMicros, exit, memo) => {
        const entryId = this.entry("exit_freeze", { exit }, memo);
        this.post(entryId, [
          [accountId, "available", -amountMicros],
          [ESCROW_SOURCE_ID, "source", amountMicros],
        ]);
        return entryId;
      },
      unfreeze: (accountId, amountMicros, exit, memo) => {
        const entryId = this.entry("exit_return", { exit }, memo);
        this.post(entryId, [
          [ESCROW_SOURCE_ID, "source", -amountMicros],
          [accountId, "available", amountMicros],
        ]);
        return entryId;
      },
    });
    this.commit.run(() => {
      this.ensureAccount({ id: PLATFORM_ACCOUNT_ID, kind: "platform", name: "Platform" });
      this.ensureAccount({ id: DEV_CREDIT_SOURCE_ID, kind: "system", name: "Development credits (not deposits)" });
      this.ensureAccount({ id: ESCROW_SOURCE_ID, kind: "system", name: "On-chain escrow deposits" });
      this.freezes.topUpAtOpen();
    });
  }

  /** Creates an account (and its buckets) unless one with this id exists; returns it. */
  ensureAccount(input: { id?: string; kind: AccountKind; name: string; dailyCallCap?: number | null }): Account {
    return this.commit.run(() => {
      const id = input.id ?? uuidv7();
      const existing = this.getAccount(id);
      if (existing) return existing;
      this.stmt.insertAccount.run(id, input.kind, input.name, input.dailyCallCap ?? null, Date.now());
      const buckets: Bucket[] =
        input.kind === "system" ? ["source"] : input.kind === "platform" ? ["fees"] : ["available", "held", "earned"];
      for (const bucket of buckets) this.stmt.insertBucket.run(id, bucket);
      return this.getAccount(id)!;
    });
  }

  getAccount(id: string): Account | undefined {
    const row = this.stmt.getAccount.get(id) as { id: string; kind: AccountKind; name: string; daily_call_cap: bigint | null } | undefined;
    if (!row) return undefined;
    return {
      id: row.id,
      kind: row.kind,
      name: row.name,
      dailyCallCap: row.daily_call_cap === null ? null : Number(row.daily_call_cap),
    };
  }

  /**
   * Adds money to an account's available balance. `dev_credit` is the development seed
   * step and is named as such in the ledger; `deposit` is reserved for on-chain deposits
   * (creditChainDeposit links the entry to its log; a deposit entry without one is money the
   * chain does not record, which the reconciliation reports).
   */
  credit(accountId: string, amountMicros: bigint, kind: CreditKind, memo = ""): void {
    this.creditEntry(accountId, amountMicros, kind, {}, memo);
  }

  /**
   * Credits one escrow Deposited log to an account as a `deposit` entry linked to the log, and returns the
   * entry's id. The database refuses a second entry for the same log. Like credit(kind "deposit"), it leaves
   * the exit top-up to its caller (server/settlement/indexer.ts), which records the deposit first.
   */
  creditChainDeposit(accountId: string, amountMicros: bigint, log: LogKey, memo = ""): bigint {
    return this.creditEntry(accountId, amountMicros, "deposit", { deposit: log }, memo);
  }

  private creditEntry(accountId: string, amountMicros: bigint, kind: CreditKind, link: EntryLink, memo: string): bigint {
    if (amountMicros <= 0n) throw new RangeError(`credit must be positive, got ${amountMicros}`);
    return this.commit.run(() => {
      const entryId = this.entry(kind, link, memo);
      this.post(entryId, [
        [SOURCE_FOR[kind], "source", -amountMicros],
        [accountId, "available", amountMicros],
      ]);
      // A chain deposit is topped up by its caller (server/settlement/indexer.ts), right after the caller has
      // identified its entry as the newest one (creditChainDeposit); here it would come first.
      if (kind !== "deposit") this.freezes.topUp(accountId);
      return entryId;
    });
  }

  /**
   * Takes a voucher's amount out of the ledger (a `voucher_withdrawal` linked to the voucher): it leaves
   * the account's available balance for the escrow's side of the books. Throws if the available
   * balance does not cover it; callers check first. Returns the entry id.
   */
  withdrawByVoucher(accountId: string, amountMicros: bigint, voucher: VoucherKey, memo = ""): bigint {
    if (amountMicros <= 0n) throw new RangeError(`withdrawal must be positive, got ${amountMicros}`);
    return this.commit.run(() => {
      // A pending exit's freeze comes before any other withdrawal of the same money.
      this.freezes.topUp(accountId);
      const available = this.balanceOf(accountId, "available");
      if (available < amountMicros) throw new RangeError(`withdrawal of ${amountMicros} exceeds available ${available}`);
      const entryId = this.entry("voucher_withdrawal", { voucher }, memo);
      this.post(entryId, [
        [accountId, "available", -amountMicros],
        [ESCROW_SOURCE_ID, "source", amountMicros],
      ]);
      return entryId;
    });
  }

  /** Gives back a voucher's amount that never left the escrow (it expired unredeemed): a linked `voucher_return`. */
  returnVoucher(accountId: string, amountMicros: bigint, voucher: VoucherKey, memo = ""): bigint {
    if (amountMicros <= 0n) throw new RangeError(`returned withdrawal must be positive, got ${amountMicros}`);
    return this.commit.run(() => {
      const entryId = this.entry("voucher_return", { voucher }, memo);
      this.post(entryId, [
        [ESCROW_SOURCE_ID, "source", -amountMicros],
        [accountId, "available", amountMicros],
      ]);
      this.freezes.topUp(accountId);
      return entryId;
    });
  }

  /*
   * Unilateral exits (server/settlement/exits.ts): the rule and its bookkeeping are in ./exit-freezes.ts;
   * these are its operations as the Ledger's API.
   */

  /** Whether a pending exit of the account is still short of its freeze (so its money is frozen). */
  hasExitShortfall(accountId: string): boolean {
    return this.freezes.hasShortfall(accountId);
  }

  /** Says an exit with a shortfall may now exist: from here on, money reaching an account checks for it. */
  noteExitShortfall(): void {
    this.freezes.noteShortfall();
  }

  /**
   * Moves the account's available balance into the freezes of its pending exits that are still short,
   * oldest request first, each move an 'exit_freeze' entry linked to its exit; returns the total moved.
   */
  topUpExitFreezes(accountId: string): bigint {
    return this.freezes.topUp(accountId);
  }

  /**
   * Gives back `amountMicros` of an exit's freeze (a cancelled or replaced request, or one the escrow paid
   * less than frozen), as a linked 'exit_return' entry; other short exits of the account are topped up from it.
   */
  returnExitFreeze(exit: ExitKey, accountId: string, amountMicros: bigint, memo: string): bigint {
    return this.freezes.giveBack(exit, accountId, amountMicros, memo);
  }

  /** Reserves a call's charge from the caller's available balance, or says why it cannot. */
  hold(input: { accountId: string; sellerAccountId: string; skillId: string; charge: Charge }): HoldResult {
    const { chargedMicros, sellerMicros, feeMicros } = input.charge;
    if (chargedMicros <= 0n) throw new RangeError(`hold must be positive, got ${chargedMicros}`);
    return this.commit.run(() => {
      // Normally a no-op (a short account's available balance is already zero); it closes the one gap,
      // a deposit credited by linking an address (see credit()), before money could be spent.
      this.freezes.topUp(input.accountId);
      const available = this.balanceOf(input.accountId, "available");
      if (available < chargedMicros) {
        return { ok: false as const, reason: "insufficient_balance" as const, availableMicros: available, neededMicros: chargedMicros };
      }
      const hold: Hold = {
        id: uuidv7(),
        accountId: input.accountId,
        sellerAccountId: input.sellerAccountId,
        skillId: input.skillId,
        amountMicros: chargedMicros,
        sellerMicros,
        feeMicros,
      };
      this.stmt.insertHold.run(
        hold.id,
        hold.accountId,
        hold.sellerAccountId,
        hold.skillId,
        chargedMicros,
        sellerMicros,
        feeMicros,
        Date.now(),
      );
      this.post(this.entry("hold", { holdId: hold.id }, ""), [
        [hold.accountId, "available", -chargedMicros],
        [hold.accountId, "held", chargedMicros],
      ]);
      return { ok: true as const, hold };
    });
  }

  /** Pays a held charge out: the seller's share to the seller, the fee to the platform. */
  capture(holdId: string): SettleResult {
    return this.commit.run(() => {
      const hold = this.takeOpenHold(holdId, "captured");
      if (!hold) return { ok: false as const, reason: "hold_not_open" as const };
      const postings: Posting[] = [[hold.accountId, "held", -hold.amountMicros]];
      if (hold.sellerMicros > 0n) postings.push([hold.sellerAccountId, "earned", hold.sellerMicros]);
      if (hold.feeMicros > 0n) postings.push([PLATFORM_ACCOUNT_ID, "fees", hold.feeMicros]);
      this.post(this.entry("capture", { holdId: hold.id }, ""), postings);
      return { ok: true as const, hold };
    });
  }

  /** Gives a held charge back to the caller's available balance. */
  release(holdId: string): SettleResult {
    return this.commit.run(() => {
      const hold = this.takeOpenHold(holdId, "released");
      if (!hold) return { ok: false as const, reason: "hold_not_open" as const };
      this.post(this.entry("release", { holdId: hold.id }, ""), [
        [hold.accountId, "held", -hold.amountMicros],
        [hold.accountId, "available", hold.amountMicros],
      ]);
      // A call in flight when its account asked to exit gives its money to the exit's freeze.
      this.freezes.topUp(hold.accountId);
      return { ok: true as const, hold };
    });
  }

  /**
   * Puts a captured hold in settlement batch `batchNumber`: from then on its money is the batch's, and the
   * hold cannot be batched again. Throws if the hold is not captured or is in a batch already (a bug: the
   * batch builder reads only unbatched captured holds, in the same ledger operation).
   */
  assignHoldToBatch(holdId: string, batchNumber: number): void {
    if (this.stmt.assignToBatch.run(batchNumber, holdId).changes !== 1) throw new Error(`hold ${holdId} was batched twice`);
  }

  /**
   * Releases every hold still open. Run at startup: a hold open then belongs to a call whose
   * process died, so its outcome is unknown and the caller is not charged for it.
   */
  recoverOpenHolds(): number {
    return this.commit.run(() => {
      const ids = this.stmt.openHoldIds.all() as string[];
      for (const id of ids) this.release(id);
      return ids.length;
    });
  }

  /** How many holds are open now: money reserved for calls in flight (a metric). */
  openHoldCount(): number {
    return Number(this.stmt.openHoldCount.get());
  }

  balance(accountId: string): Balance {
    return { availableMicros: this.balanceOf(accountId, "available"), heldMicros: this.balanceOf(accountId, "held") };
  }

  balanceOf(accountId: string, bucket: Bucket): bigint {
    const value = this.stmt.getBalance.get(accountId, bucket) as bigint | undefined;
    return value ?? 0n;
  }

  private takeOpenHold(holdId: string, status: "captured" | "released"): Hold | undefined {
    const row = this.stmt.getOpenHold.get(holdId) as
      | {
          id: string;
          account_id: string;
          seller_account_id: string;
          skill_id: string;
          amount: bigint;
          seller_amount: bigint;
          fee_amount: bigint;
        }
      | undefined;
    if (!row) return undefined;
    this.stmt.closeHold.run(status, Date.now(), holdId);
    return {
      id: row.id,
      accountId: row.account_id,
      sellerAccountId: row.seller_account_id,
      skillId: row.skill_id,
      amountMicros: row.amount,
      sellerMicros: row.seller_amount,
      feeMicros: row.fee_amount,
    };
  }

  /** Writes an entry row: its kind, the record it belongs to (link columns), and a note for people (nothing reads it). */
  private entry(kind: EntryKind, link: EntryLink, memo: string): bigint {
    return this.stmt.insertEntry.run(
      kind,
      link.holdId ?? null,
      link.voucher?.address ?? null,
      link.voucher?.nonce ?? null,
      link.deposit?.txHash ?? null,
      link.deposit?.logIndex ?? null,
      link.exit?.txHash ?? null,
      link.exit?.logIndex ?? null,
      memo,
      Date.now(),
    ).lastInsertRowid as bigint;
  }

  /**
   * Writes an entry's postings (one statement); the database moves the balances.
   *
   * The entry must balance, and that is checked here, before anything is written, rather than only by
   * assertBalanced at startup: an unbalanced entry can only come from a bug (a caller's arithmetic, or a hold
   * row whose split no longer adds up), and money created or destroyed must never reach the disk. The throw
   * undoes the caller's whole operation (its GroupCommit savepoint, entry row included).
   */
  private post(entryId: bigint, postings: Posting[]): void {
    let totalMicros = 0n;
    const params: unknown[] = [];
    for (const [accountId, bucket, amountMicros] of postings) {
      totalMicros += amountMicros;
      params.push(entryId, accountId, bucket, amountMicros);
    }
    if (totalMicros !== 0n) {
      const rows = [{ entry_id: entryId, total: totalMicros, postings: postings.map(([a, b, m]) => `${a}/${b} ${m}`) }];
      throw new LedgerInvariantError([{ rule: ENTRY_SUMS_TO_ZERO, rows }]);
    }
    this.stmt.insertPostings[postings.length - 1].run(...params);
  }
}
