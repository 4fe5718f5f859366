import { DeferredWrites } from "../db/deferred-writes";
import { BalanceRollUp } from "./balance-roll-up";
import { uuidv7 } from "../db/ids";
import { type Database, type Sql, isDatabaseUnavailable, within } from "../db/sql";
import type { Charge } from "./fees";
import { ENTRY_SUMS_TO_ZERO, LedgerInvariantError } from "./invariants";
import { ExitFreezes, type ExitKey } from "./exit-freezes";
import { COLUMNS as LIMIT_COLUMNS, type LimitRow, SpendLimits, type SpendLimitStatus, periodStartMs, statusOf } from "./spend-limits";

export type AccountKind = "user" | "seller" | "platform" | "system";
export type Bucket = "available" | "held" | "earned" | "fees" | "source";
export type CreditKind = "dev_credit" | "deposit";
/**
 * What an entry does: one kind per movement, so the journal says what happened without reading a memo.
 * `voucher_withdrawal`/`voucher_return` take a voucher's amount out and give an expired one back;
 * `exit_freeze`/`exit_return` freeze money for a unilateral exit and give (part of) a freeze back.
 */
export type EntryKind =
  | "dev_credit"
  | "deposit"
  | "hold"
  | "capture"
  | "release"
  | "voucher_withdrawal"
  | "voucher_return"
  | "exit_freeze"
  | "exit_return"
  | "x402_payment";
/** The entry kinds that move money between an account and the escrow's side of the books (money out). */
export const WITHDRAWAL_KINDS: readonly EntryKind[] = ["voucher_withdrawal", "voucher_return", "exit_freeze", "exit_return"];
type Posting = [accountId: string, bucket: Bucket, amountMicros: bigint];

/** The platform's own account: it earns the fee on every captured call. */
export const PLATFORM_ACCOUNT_ID = "platform";
/** Where money credited by the `dev_credit` seed step comes from. It is not a deposit. */
export const DEV_CREDIT_SOURCE_ID = "system:dev_credit";
/** Where on-chain escrow deposits come from (used once the chain is joined to the ledger). */
export const ESCROW_SOURCE_ID = "system:escrow";
/**
 * Where calls paid per call with x402 authorizations come from: payers with no account here, whose USDC the escrow
 * collects before the call (collectX402) and credits to the seller and the treasury once it succeeded (completeX402).
 * Their calls are logged under it.
 */
export const X402_SOURCE_ID = "system:x402";

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

/** What a call's hold asks for: its charge, and the API key whose spending limit (if it has one) the charge counts against. */
export interface HoldInput {
  accountId: string;
  sellerAccountId: string;
  skillId: string;
  charge: Charge;
  /** The key the call was made with: its spending limit is checked and counted in the hold's transaction. Absent: none. */
  apiKeyId?: string;
  /** The time the key's spending period is read at (ms since the epoch); Date.now() when absent. */
  nowMs?: number;
}

export type HoldResult =
  | { ok: true; hold: Hold }
  | { ok: false; reason: "insufficient_balance"; availableMicros: bigint; neededMicros: bigint }
  | ({ ok: false; reason: "key_spend_limit_reached"; availableMicros: bigint; neededMicros: bigint } & SpendLimitStatus);

export type SettleResult = { ok: true; hold: Hold } | { ok: false; reason: "hold_not_open" };

/**
 * What an account and the key it calls with have left, as read in the transaction of a charge: the numbers a paid
 * call's answer carries (X-Balance-Available, X-Key-Spend-Remaining).
 */
export interface Budget {
  /** The account's available balance. */
  availableMicros: bigint;
  /** The key's spending limit as it stands (what its period has spent, calls in flight included); null without one. */
  keyLimit: SpendLimitStatus | null;
}

/** A capture, with the budget read in its transaction. */
export type CaptureResult = { ok: true; hold: Hold; budget: Budget } | { ok: false; reason: "hold_not_open" };

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
 * statement (a trigger), except that on PostgreSQL a capture's postings (out of `held`, into
 * `earned` and `fees`) wait as pending deltas, which balance reads add and ./balance-roll-up.ts
 * folds in later (migration 0016; Dialect.balances). A user's money is in `available` or `held`; a call reserves its price by
 * moving it to `held` (hold), then either pays it out to the seller's `earned` and the
 * platform's `fees` (capture) or gives it back (release). The invariants that must hold
 * after every commit are in ./invariants.ts.
 *
 * The books live on either engine (server/db/sql.ts). Each operation is atomic: given a caller's
 * transaction (`tx`) it joins it, otherwise it runs in one of its own. On SQLite the operations share
 * durable commits (group commit); a caller that reports a result to a client asks for a durable
 * transaction or awaits `db.durable()` first. On PostgreSQL several gateway replicas share the books: a
 * hold locks the balance it reads until its commit, so no two replicas can spend the same money.
 */
export class Ledger {
  /** The unilateral exits' freezes and their shortfalls (./exit-freezes.ts), written through this Ledger's entries. */
  private readonly freezes: ExitFreezes;
  /** API keys' spending limits (./spend-limits.ts), counted by hold and given back by release. */
  private readonly limits: SpendLimits;
  /** Releases the database did not take when they were due: done once it answers again (releaseWhenAvailable). */
  private readonly deferred: DeferredWrites;
  /** Folds the pending balance deltas of captures into their rows (PostgreSQL; ./balance-roll-up.ts). */
  readonly rollUp: BalanceRollUp;
  /**
   * What a balance read outside a transaction waits for first, when another connection writes holds and answers them
   * before they are committed (SQLite's ledger writer thread): until they are, this connection would not see them.
   */
  otherWriter?: { caughtUp(): Promise<void> };

  private constructor(
    readonly db: Database,
    /** The replica whose calls this Ledger's holds belong to (holds.replica_id); null for a single gateway. */
    private readonly replicaId: string | null,
    log?: (message: string, error?: unknown) => void,
  ) {
    this.deferred = new DeferredWrites({ log });
    this.rollUp = new BalanceRollUp(db, { log });
    this.limits = new SpendLimits(db);
    this.freezes = new ExitFreezes({
      availableOf: (tx, accountId) => this.lockedBalance(tx, accountId, "available"),
      freeze: async (tx, accountId, amountMicros, exit, memo) => {
        const entryId = await this.entry(tx, "exit_freeze", { exit }, memo);
        await this.post(tx, entryId, [
          [accountId, "available", -amountMicros],
          [ESCROW_SOURCE_ID, "source", amountMicros],
        ]);
        return entryId;
      },
      unfreeze: async (tx, accountId, amountMicros, exit, memo) => {
        const entryId = await this.entry(tx, "exit_return", { exit }, memo);
        await this.post(tx, entryId, [
          [ESCROW_SOURCE_ID, "source", -amountMicros],
          [accountId, "available", amountMicros],
        ]);
        return entryId;
      },
    });
  }

  /**
   * The ledger of `db`: its platform and system accounts made if missing, and exits' freezes topped up.
   * `replicaId` names this gateway replica in the holds it takes, when several share the database.
   */
  static async open(db: Database, options: { replicaId?: string; log?: (message: string, error?: unknown) => void } = {}): Promise<Ledger> {
    const ledger = new Ledger(db, options.replicaId ?? null, options.log);
    // Replicas share the books: an exit recorded by another replica's indexer (the leader's) leaves no trace in
    // this process, so every movement checks for a short exit (one indexed query) from the start.
    if (options.replicaId !== undefined) ledger.noteExitShortfall();
    await db.transaction(async (tx) => {
      await ledger.ensureAccount({ id: PLATFORM_ACCOUNT_ID, kind: "platform", name: "Platform" }, tx);
      await ledger.ensureAccount({ id: DEV_CREDIT_SOURCE_ID, kind: "system", name: "Development credits (not deposits)" }, tx);
      await ledger.ensureAccount({ id: ESCROW_SOURCE_ID, kind: "system", name: "On-chain escrow deposits" }, tx);
      await ledger.ensureAccount({ id: X402_SOURCE_ID, kind: "system", name: "x402 payers (paid per call on-chain)" }, tx);
      await ledger.freezes.open(tx);
    });
    // A replica keeps the captures' pending balance deltas few (reads add them, so only their cost depends on it).
    if (options.replicaId !== undefined) ledger.rollUp.start();
    return ledger;
  }

  /** Creates an account (and its buckets) unless one with this id exists; returns it. */
  ensureAccount(input: { id?: string; kind: AccountKind; name: string; dailyCallCap?: number | null }, tx?: Sql): Promise<Account> {
    return within(this.db, tx, async (tx) => {
      const id = input.id ?? uuidv7();
      const inserted = await tx.run(
        "INSERT INTO accounts (id, kind, name, daily_call_cap, created_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
        [id, input.kind, input.name, input.dailyCallCap ?? null, Date.now()],
      );
      if (inserted === 1) {
        const buckets: Bucket[] =
          input.kind === "system" ? ["source"] : input.kind === "platform" ? ["fees"] : ["available", "held", "earned"];
        for (const bucket of buckets)
          await tx.run("INSERT INTO ledger_accounts (account_id, bucket, balance) VALUES (?, ?, 0)", [id, bucket]);
      }
      return (await this.getAccount(id, tx))!;
    });
  }

  async getAccount(id: string, sql: Sql = this.db): Promise<Account | undefined> {
    const row = await sql.one<{ id: string; kind: AccountKind; name: string; daily_call_cap: bigint | null }>(
      "SELECT id, kind, name, daily_call_cap FROM accounts WHERE id = ?",
      [id],
    );
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
  async credit(accountId: string, amountMicros: bigint, kind: CreditKind, memo = "", tx?: Sql): Promise<void> {
    await this.creditEntry(accountId, amountMicros, kind, {}, memo, tx);
  }

  /**
   * Credits one escrow Deposited log to an account as a `deposit` entry linked to the log, and returns the
   * entry's id. The database refuses a second entry for the same log. Like credit(kind "deposit"), it leaves
   * the exit top-up to its caller (server/settlement/indexer.ts), which records the deposit first.
   */
  async creditChainDeposit(accountId: string, amountMicros: bigint, log: LogKey, memo = "", tx?: Sql): Promise<bigint> {
    return this.creditEntry(accountId, amountMicros, "deposit", { deposit: log }, memo, tx);
  }

  private async creditEntry(
    accountId: string,
    amountMicros: bigint,
    kind: CreditKind,
    link: EntryLink,
    memo: string,
    tx?: Sql,
  ): Promise<bigint> {
    if (amountMicros <= 0n) throw new RangeError(`credit must be positive, got ${amountMicros}`);
    return within(this.db, tx, async (tx) => {
      const entryId = await this.entry(tx, kind, link, memo);
      await this.post(tx, entryId, [
        [SOURCE_FOR[kind], "source", -amountMicros],
        [accountId, "available", amountMicros],
      ]);
      // A chain deposit is topped up by its caller (server/settlement/indexer.ts), right after the caller has
      // identified its entry as the newest one (creditChainDeposit); here it would come first.
      if (kind !== "deposit") await this.freezes.topUp(tx, accountId);
      return entryId;
    });
  }

  /**
   * Takes a voucher's amount out of the ledger (a `voucher_withdrawal` linked to the voucher): it leaves
   * the account's available balance for the escrow's side of the books. Throws if the available
   * balance does not cover it; callers check first. Returns the entry id.
   */
  async withdrawByVoucher(accountId: string, amountMicros: bigint, voucher: VoucherKey, memo = "", tx?: Sql): Promise<bigint> {
    if (amountMicros <= 0n) throw new RangeError(`withdrawal must be positive, got ${amountMicros}`);
    return within(this.db, tx, async (tx) => {
      // A pending exit's freeze comes before any other withdrawal of the same money.
      await this.freezes.topUp(tx, accountId);
      const available = await this.lockedBalance(tx, accountId, "available");
      if (available < amountMicros) throw new RangeError(`withdrawal of ${amountMicros} exceeds available ${available}`);
      const entryId = await this.entry(tx, "voucher_withdrawal", { voucher }, memo);
      await this.post(tx, entryId, [
        [accountId, "available", -amountMicros],
        [ESCROW_SOURCE_ID, "source", amountMicros],
      ]);
      return entryId;
    });
  }

  /** Gives back a voucher's amount that never left the escrow (it expired unredeemed): a linked `voucher_return`. */
  async returnVoucher(accountId: string, amountMicros: bigint, voucher: VoucherKey, memo = "", tx?: Sql): Promise<bigint> {
    if (amountMicros <= 0n) throw new RangeError(`returned withdrawal must be positive, got ${amountMicros}`);
    return within(this.db, tx, async (tx) => {
      const entryId = await this.entry(tx, "voucher_return", { voucher }, memo);
      await this.post(tx, entryId, [
        [ESCROW_SOURCE_ID, "source", -amountMicros],
        [accountId, "available", amountMicros],
      ]);
      await this.freezes.topUp(tx, accountId);
      return entryId;
    });
  }

  /*
   * Unilateral exits (server/settlement/exits.ts): the rule and its bookkeeping are in ./exit-freezes.ts;
   * these are its operations as the Ledger's API.
   */

  /** Whether a pending exit of the account is still short of its freeze (so its money is frozen). */
  hasExitShortfall(accountId: string, sql: Sql = this.db): Promise<boolean> {
    return this.freezes.hasShortfall(sql, accountId);
  }

  /** Says an exit with a shortfall may now exist: from here on, money reaching an account checks for it. */
  noteExitShortfall(): void {
    this.freezes.noteShortfall();
  }

  /**
   * Moves the account's available balance into the freezes of its pending exits that are still short,
   * oldest request first, each move an 'exit_freeze' entry linked to its exit; returns the total moved.
   */
  topUpExitFreezes(accountId: string, tx?: Sql): Promise<bigint> {
    return within(this.db, tx, (tx) => this.freezes.topUp(tx, accountId));
  }

  /**
   * Gives back `amountMicros` of an exit's freeze (a cancelled or replaced request, or one the escrow paid
   * less than frozen), as a linked 'exit_return' entry; other short exits of the account are topped up from it.
   */
  returnExitFreeze(exit: ExitKey, accountId: string, amountMicros: bigint, memo: string, tx?: Sql): Promise<bigint> {
    return within(this.db, tx, (tx) => this.freezes.giveBack(tx, exit, accountId, amountMicros, memo));
  }

  /**
   * Reserves a call's charge from the caller's available balance, or says why it cannot. The balance is
   * read under a row lock (PostgreSQL) or inside the single writer's turn (SQLite), so two calls, on one
   * replica or several, never both spend the same money; the balance's CHECK (>= 0) is the backstop.
   *
   * With `apiKeyId`, the charge also counts against that key's spending limit (./spend-limits.ts), in this same
   * transaction: refused when the key's period has too little left, counted in it otherwise. The balance comes
   * first (a poor account is told so, whatever its key's limit), and its lock is taken before the key's row: every
   * transaction that takes both (a hold, a release) takes the account's available balance first, so they queue
   * on it and never deadlock over the two.
   */
  async hold(input: HoldInput, tx?: Sql): Promise<HoldResult> {
    const { chargedMicros } = input.charge;
    if (chargedMicros <= 0n) throw new RangeError(`hold must be positive, got ${chargedMicros}`);
    const id = uuidv7();
    try {
      if (this.db.engine === "postgres") {
        // Without a caller's transaction, the hold shares one with the other holds of this replica waiting for theirs
        // (a group: their statements in one write, one COMMIT), the group's rows locked in its accounts' order.
        const held = await (tx
          ? this.holdOnServer(id, input, tx)
          : this.db.transaction((grouped) => this.holdOnServer(id, input, grouped), { group: true, groupOrder: input.accountId }));
        if (held) return held;
      }
      return await this.takeHold(id, input, tx);
    } catch (error) {
      // The hold's own transaction, its COMMIT sent to a database that did not answer, may commit all the same: an open
      // hold nobody would end. It is released once the database answers (if it never committed, that changes nothing).
      if (tx === undefined && isDatabaseUnavailable(error) && error.mayHaveCommitted) {
        this.deferred.defer(`release of hold ${id}, if it was taken`, async () => {
          const status = await this.db.value<string>("SELECT status FROM holds WHERE id = ?", [id]);
          if (status === undefined) return "not_yet";
          if (status === "open") await this.release(id);
        });
      }
      throw error;
    }
  }

  /**
   * The hold on PostgreSQL: takeHold's rules as one statement, the server-side function ledger_hold
   * (server/db/postgres/migrations/0013_ledger_functions.sql), so the account's balance row is locked for the
   * microseconds the statement runs rather than for takeHold's round trips, and until its transaction commits (hold()
   * groups the holds of a replica: one COMMIT, without waiting for the WAL flush, as takeHold's own transaction
   * does). Undefined when the account has a pending exit short of its freeze: takeHold then freezes first and holds,
   * as on SQLite. The calendar stays here: the function gets the start of the day and of the month at `nowMs`.
   */
  private async holdOnServer(id: string, input: HoldInput, tx: Sql): Promise<HoldResult | undefined> {
    const { chargedMicros, sellerMicros, feeMicros } = input.charge;
    const nowMs = input.nowMs ?? Date.now();
    const row = await tx.one<{ outcome: string; available: bigint } & { [C in keyof LimitRow]: LimitRow[C] | null }>(
      `SELECT outcome, available, ${LIMIT_COLUMNS} FROM ledger_hold(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      [
        id,
        input.accountId,
        input.sellerAccountId,
        input.skillId,
        chargedMicros,
        sellerMicros,
        feeMicros,
        Date.now(),
        this.replicaId,
        input.apiKeyId ?? null,
        periodStartMs("day", nowMs),
        periodStartMs("month", nowMs),
        0, // p_async: the transaction's own commit says whether it waits for the flush
      ],
    );
    if (!row) throw new Error("ledger_hold returned no row");
    const { outcome, available, ...limit } = row;
    switch (outcome) {
      case "held":
        return { ok: true, hold: holdOf(id, input) };
      case "insufficient_balance":
        return { ok: false, reason: "insufficient_balance", availableMicros: available, neededMicros: chargedMicros };
      case "key_spend_limit_reached":
        return {
          ok: false,
          reason: "key_spend_limit_reached",
          availableMicros: available,
          neededMicros: chargedMicros,
          ...statusOf(limit as LimitRow & { limit_micros: bigint }, nowMs),
        };
      case "exit_short":
        return undefined;
      default:
        throw new Error(`ledger_hold answered an unknown outcome: ${outcome}`);
    }
  }

  private takeHold(id: string, input: HoldInput, tx: Sql | undefined): Promise<HoldResult> {
    const { chargedMicros, sellerMicros, feeMicros } = input.charge;
    return within(this.db, tx, async (tx) => {
      // Normally a no-op (a short account's available balance is already zero); it closes the one gap,
      // a deposit credited by linking an address (see credit()), before money could be spent.
      await this.freezes.topUp(tx, input.accountId);
      // The balance, locked, and whether the key has a limit, in one statement: a key without one (most) costs the
      // hold no round trip more under the balance's lock. (The key's row is read from the statement's snapshot: a
      // first limit committed while this hold waited for the lock does not count it, as if it came just before.)
      const { available, limited } = await this.lockedAvailable(tx, input.accountId, input.apiKeyId);
      if (available < chargedMicros) {
        return { ok: false as const, reason: "insufficient_balance" as const, availableMicros: available, neededMicros: chargedMicros };
      }
      let spendPeriodSeq: bigint | null = null;
      if (input.apiKeyId !== undefined && limited) {
        const taken = await this.limits.take(tx, input.apiKeyId, chargedMicros, input.nowMs ?? Date.now());
        if (!taken.ok) {
          const { ok: _ok, ...status } = taken;
          return {
            ok: false as const,
            reason: "key_spend_limit_reached" as const,
            availableMicros: available,
            neededMicros: chargedMicros,
            ...status,
          };
        }
        spendPeriodSeq = taken.periodSeq;
      }
      const hold = holdOf(id, input);
      await tx.run(
        `INSERT INTO holds (id, account_id, seller_account_id, skill_id, amount, seller_amount, fee_amount, status, created_at, replica_id,
                            spend_key_id, spend_period_seq)
         VALUES (?, ?, ?, ?, ?, ?, ?, 'open', ?, ?, ?, ?)`,
        [
          hold.id,
          hold.accountId,
          hold.sellerAccountId,
          hold.skillId,
          chargedMicros,
          sellerMicros,
          feeMicros,
          Date.now(),
          this.replicaId,
          spendPeriodSeq === null ? null : input.apiKeyId!,
          spendPeriodSeq,
        ],
      );
      await this.post(tx, await this.entry(tx, "hold", { holdId: hold.id }, ""), [
        [hold.accountId, "available", -chargedMicros],
        [hold.accountId, "held", chargedMicros],
      ]);
      return { ok: true as const, hold };
    });
  }

  /**
   * Pays a held charge out: the seller's share to the seller, the fee to the platform. What a key's limit counted stays
   * counted. With `captured` (a usage-priced call: what it came to, split per the fee mode, never more than the hold),
   * only that is paid out and the rest goes back to the caller's available balance and its key's period in the same
   * entry (captureLess); a capture of nothing is the hold's release. On PostgreSQL a whole hold's capture is one
   * statement (captureOnServer); a usage-priced one takes the statements below on both engines.
   */
  capture(holdId: string, tx?: Sql, captured?: Charge): Promise<SettleResult> {
    if (captured?.chargedMicros === 0n) return this.release(holdId, tx);
    if (captured === undefined && this.db.engine === "postgres") return this.captureOnServer(holdId, null, tx);
    return within(this.db, tx, async (tx) => {
      const taken = await this.takeOpenHold(tx, holdId, "captured");
      if (!taken) return { ok: false as const, reason: "hold_not_open" as const };
      if (captured && captured.chargedMicros !== taken.hold.amountMicros)
        return { ok: true as const, hold: await this.captureLess(tx, taken, captured) };
      const { hold } = taken;
      const postings: Posting[] = [[hold.accountId, "held", -hold.amountMicros]];
      if (hold.sellerMicros > 0n) postings.push([hold.sellerAccountId, "earned", hold.sellerMicros]);
      if (hold.feeMicros > 0n) postings.push([PLATFORM_ACCOUNT_ID, "fees", hold.feeMicros]);
      await this.post(tx, await this.entry(tx, "capture", { holdId: hold.id }, ""), postings);
      return { ok: true as const, hold };
    });
  }

  /**
   * The capture of less than was held (usage pricing, issue 27): the hold's row is rewritten to what was captured (the
   * settlement batch, the receipts and the key's count read it), and one capture entry takes the whole hold out of
   * `held`, pays the captured split and gives the rest back to `available`; the rest also goes back to the key's period.
   */
  private async captureLess(
    tx: Sql,
    taken: { hold: Hold; spend: { keyId: string; periodSeq: bigint } | null },
    captured: Charge,
  ): Promise<Hold> {
    const { hold: held, spend } = taken;
    const { chargedMicros, sellerMicros, feeMicros } = captured;
    if (
      chargedMicros <= 0n ||
      chargedMicros > held.amountMicros ||
      sellerMicros < 0n ||
      feeMicros < 0n ||
      sellerMicros + feeMicros !== chargedMicros
    ) {
      throw new RangeError(
        `capture of ${chargedMicros} (seller ${sellerMicros}, fee ${feeMicros}) does not fit hold ${held.id} of ${held.amountMicros}`,
      );
    }
    await tx.run("UPDATE holds SET amount = ?, seller_amount = ?, fee_amount = ? WHERE id = ?", [
      chargedMicros,
      sellerMicros,
      feeMicros,
      held.id,
    ]);
    const rest = held.amountMicros - chargedMicros;
    const postings: Posting[] = [
      [held.accountId, "held", -held.amountMicros],
      [held.accountId, "available", rest],
    ];
    if (sellerMicros > 0n) postings.push([held.sellerAccountId, "earned", sellerMicros]);
    if (feeMicros > 0n) postings.push([PLATFORM_ACCOUNT_ID, "fees", feeMicros]);
    await this.post(tx, await this.entry(tx, "capture", { holdId: held.id }, ""), postings);
    if (spend) await this.limits.giveBack(tx, spend.keyId, spend.periodSeq, rest);
    await this.freezes.topUp(tx, held.accountId);
    return { ...held, amountMicros: chargedMicros, sellerMicros, feeMicros };
  }

  /**
   * A capture (as capture() makes it), and the budget left once it is made: the account's available balance and the
   * spending limit of the key `apiKeyId` as it stands at `nowMs`, read by one statement in the capture's own
   * transaction. A paid call's answer carries these numbers from the commit that charged it, not from a read of its
   * own after it, which could see other calls' charges and not this one's, or the other way round.
   */
  captureWithBudget(holdId: string, key: { apiKeyId: string; nowMs: number }, tx?: Sql, charge?: Charge): Promise<CaptureResult> {
    if (charge === undefined && this.db.engine === "postgres") return this.captureOnServer(holdId, key, tx);
    return within(this.db, tx, async (tx) => {
      const captured = await this.capture(holdId, tx, charge);
      if (!captured.ok) return captured;
      return { ...captured, budget: await this.budgetIn(tx, captured.hold.accountId, key.apiKeyId, key.nowMs) };
    });
  }

  /**
   * capture() and captureWithBudget() on PostgreSQL: one statement, the server-side function ledger_capture
   * (server/db/postgres/migrations/0013_ledger_functions.sql), which closes the hold, posts its capture and reads the
   * budget after it, as those two do in their statements. A capture is one round trip of the charges' shared commit.
   */
  private async captureOnServer(holdId: string, key: null, tx: Sql | undefined): Promise<SettleResult>;
  private async captureOnServer(holdId: string, key: { apiKeyId: string; nowMs: number }, tx: Sql | undefined): Promise<CaptureResult>;
  private async captureOnServer(
    holdId: string,
    key: { apiKeyId: string; nowMs: number } | null,
    tx: Sql | undefined,
  ): Promise<SettleResult | CaptureResult> {
    const row = await this.unbalancedAsInvariant(
      holdId,
      (tx ?? this.db).one<
        {
          account_id: string;
          seller_account_id: string;
          skill_id: string;
          amount: bigint;
          seller_amount: bigint;
          fee_amount: bigint;
          available: bigint | null;
        } & { [C in keyof LimitRow]: LimitRow[C] | null }
      >(
        `SELECT account_id, seller_account_id, skill_id, amount, seller_amount, fee_amount, available, ${LIMIT_COLUMNS}
       FROM ledger_capture(?, ?, ?)`,
        [holdId, Date.now(), key?.apiKeyId ?? null],
      ),
    );
    if (!row) return { ok: false, reason: "hold_not_open" };
    const { account_id, seller_account_id, skill_id, amount, seller_amount, fee_amount, available, ...limit } = row;
    const hold: Hold = {
      id: holdId,
      accountId: account_id,
      sellerAccountId: seller_account_id,
      skillId: skill_id,
      amountMicros: amount,
      sellerMicros: seller_amount,
      feeMicros: fee_amount,
    };
    if (key === null) return { ok: true, hold };
    const keyLimit =
      limit.key_id === null || limit.limit_micros === null ? null : statusOf(limit as LimitRow & { limit_micros: bigint }, key.nowMs);
    return { ok: true, hold, budget: { availableMicros: available ?? 0n, keyLimit } };
  }

  /** ledger_capture's refusal of an entry that would not sum to zero (SQLSTATE SG001), thrown as post() throws it. */
  private async unbalancedAsInvariant<T>(holdId: string, work: Promise<T>): Promise<T> {
    try {
      return await work;
    } catch (error) {
      const { code, detail } = error as { code?: unknown; detail?: unknown };
      if (code !== "SG001") throw error;
      const rows = [{ entry_id: null, hold_id: holdId, total: BigInt(String(detail)) }];
      throw new LedgerInvariantError([{ rule: ENTRY_SUMS_TO_ZERO, rows }]);
    }
  }

  /**
   * Gives a held charge back to the caller's available balance, and what it counted against its key's spending
   * limit back to the period it was counted in (after the balances: the lock order hold() describes).
   */
  release(holdId: string, tx?: Sql): Promise<SettleResult> {
    return within(this.db, tx, async (tx) => {
      const taken = await this.takeOpenHold(tx, holdId, "released");
      if (!taken) return { ok: false as const, reason: "hold_not_open" as const };
      const { hold, spend } = taken;
      await this.post(tx, await this.entry(tx, "release", { holdId: hold.id }, ""), [
        [hold.accountId, "held", -hold.amountMicros],
        [hold.accountId, "available", hold.amountMicros],
      ]);
      if (spend) await this.limits.giveBack(tx, spend.keyId, spend.periodSeq, hold.amountMicros);
      // A call in flight when its account asked to exit gives its money to the exit's freeze.
      await this.freezes.topUp(tx, hold.accountId);
      return { ok: true as const, hold };
    });
  }

  /**
   * Releases `holdId` once the database answers again, retrying in the background: for a call whose release (or whose
   * hold's own commit) the database did not take. A hold captured meanwhile stays captured: the release finds it not
   * open and changes nothing.
   */
  releaseWhenAvailable(holdId: string): void {
    this.deferred.defer(`release of hold ${holdId}`, async () => {
      await this.release(holdId);
    });
  }

  /** How many releases wait for the database (releaseWhenAvailable). */
  get releasesWaiting(): number {
    return this.deferred.size;
  }

  /** Tries the waiting releases once more, then stops retrying them, and stops the balance roll-up (the gateway's close). */
  async closeDeferred(): Promise<void> {
    await this.rollUp.stop();
    await this.deferred.flush();
    this.deferred.close();
  }

  /**
   * Puts a captured hold in settlement batch `batchNumber`: from then on its money is the batch's, and the
   * hold cannot be batched again. Throws if the hold is not captured or is in a batch already (a bug: the
   * batch builder reads only unbatched captured holds, in the same ledger operation).
   */
  async assignHoldToBatch(holdId: string, batchNumber: number, tx: Sql): Promise<void> {
    const changed = await tx.run("UPDATE holds SET batch_number = ? WHERE id = ? AND status = 'captured' AND batch_number IS NULL", [
      batchNumber,
      holdId,
    ]);
    if (changed !== 1) throw new Error(`hold ${holdId} was batched twice`);
  }

  /**
   * Releases open holds whose call can no longer end: at startup of a single gateway, every open hold (its
   * process died, so the call's outcome is unknown and the caller is not charged for it); on a shared
   * database, those of the replicas named in `ofReplicas` (dead ones: server/db/postgres/replicas.ts), and
   * holds naming no replica; or, with `takenBefore` (ms since the epoch), the holds taken before it, older than
   * any call can last (a release that failed with its call). Returns how many were released.
   */
  async recoverOpenHolds(options: { ofReplicas?: readonly string[]; takenBefore?: number } = {}, tx?: Sql): Promise<number> {
    return within(this.db, tx, async (tx) => {
      const replicas = options.ofReplicas;
      // Sorted here, not by the statement: ORDER BY id made SQLite walk the primary key's index over every hold ever
      // taken rather than the open ones' partial index (at every start). Released in one order (hold ids are ASCII
      // UUIDs: JavaScript's order is their bytes', as PostgreSQL's "C" collation's), so two recoveries lock the same
      // rows in the same order.
      const ids = (
        options.takenBefore !== undefined
          ? await tx.all<{ id: string }>("SELECT id FROM holds WHERE status = 'open' AND created_at < ?", [options.takenBefore])
          : replicas === undefined
            ? await tx.all<{ id: string }>("SELECT id FROM holds WHERE status = 'open'")
            : await tx.all<{ id: string }>(
                `SELECT id FROM holds WHERE status = 'open'
               AND (replica_id IS NULL${replicas.length > 0 ? ` OR replica_id IN (${replicas.map(() => "?").join(", ")})` : ""})`,
                replicas,
              )
      )
        .map((row) => row.id)
        .sort();
      let released = 0;
      for (const id of ids) if ((await this.release(id, tx)).ok) released++;
      return released;
    });
  }

  /** How many holds are open now: money reserved for calls in flight (a metric). */
  async openHoldCount(): Promise<number> {
    return Number(await this.db.value<bigint>("SELECT COUNT(*) FROM holds WHERE status = 'open'"));
  }

  async balance(accountId: string, sql: Sql = this.db): Promise<Balance> {
    if (sql === this.db) await this.caughtUp();
    // One statement: the other writer commits on a thread of its own, and could land between two reads.
    const rows = await sql.all<{ bucket: Bucket; balance: bigint }>(
      `SELECT bucket, balance FROM ${sql.dialect.balances} WHERE account_id = ? AND bucket IN ('available', 'held')`,
      [accountId],
    );
    const of = (bucket: Bucket) => rows.find((row) => row.bucket === bucket)?.balance ?? 0n;
    return { availableMicros: of("available"), heldMicros: of("held") };
  }

  /**
   * Waits until what the other writer (`otherWriter`) has answered is committed, so that a read outside a transaction
   * sees it. Inside a transaction it does not wait: the other writer cannot commit before that transaction ends (the
   * two take turns on the file), and has committed everything it answered before it began.
   */
  async caughtUp(): Promise<void> {
    if (this.otherWriter && !this.db.insideTransaction?.()) await this.otherWriter.caughtUp();
  }

  async balanceOf(accountId: string, bucket: Bucket, sql: Sql = this.db): Promise<bigint> {
    return (
      (await sql.value<bigint>(`SELECT balance FROM ${sql.dialect.balances} WHERE account_id = ? AND bucket = ?`, [accountId, bucket])) ??
      0n
    );
  }

  /**
   * The account's available balance, its row locked until `tx` ends (PostgreSQL; SQLite's transactions take turns
   * anyway). A caller that decides on the account's state and then writes (a withdrawal voucher's bounds) takes it
   * first: it then queues behind every other operation on the account's money, which takes this row first too,
   * and reads what they committed.
   */
  lockAvailable(accountId: string, tx: Sql): Promise<bigint> {
    return this.lockedBalance(tx, accountId, "available");
  }

  /** A balance read under the row's lock until the transaction ends (./sql.ts Dialect.forUpdate). */
  /** The account's available balance, locked, and whether `keyId` (if any) has a spending limit set. */
  private async lockedAvailable(tx: Sql, accountId: string, keyId: string | undefined): Promise<{ available: bigint; limited: boolean }> {
    if (keyId === undefined) return { available: await this.lockedBalance(tx, accountId, "available"), limited: false };
    const row = await tx.one<{ balance: bigint; limited: bigint }>(
      `SELECT la.balance,
              CASE WHEN EXISTS (SELECT 1 FROM key_spend_limits k WHERE k.key_id = ? AND k.limit_micros IS NOT NULL) THEN 1 ELSE 0 END AS limited
       FROM ledger_accounts la WHERE la.account_id = ? AND la.bucket = 'available'${tx.dialect.forBalanceUpdate}`,
      [keyId, accountId],
    );
    return { available: row ? BigInt(row.balance) : 0n, limited: row ? BigInt(row.limited) === 1n : false };
  }

  /**
   * The account's available balance and the key's spending limit (if it has one) as of `nowMs`, in one statement of
   * `tx`. Nothing is locked: the numbers are what the transaction sees, to report, not to decide on.
   */
  private async budgetIn(tx: Sql, accountId: string, keyId: string, nowMs: number): Promise<Budget> {
    const columns = LIMIT_COLUMNS.split(", ")
      .map((column) => `k.${column}`)
      .join(", ");
    const row = await tx.one<{ balance: bigint } & { [C in keyof LimitRow]: LimitRow[C] | null }>(
      `SELECT la.balance, ${columns}
       FROM ledger_accounts la LEFT JOIN key_spend_limits k ON k.key_id = ? AND k.limit_micros IS NOT NULL
       WHERE la.account_id = ? AND la.bucket = 'available'`,
      [keyId, accountId],
    );
    if (!row) return { availableMicros: 0n, keyLimit: null };
    const { balance, ...limit } = row;
    return {
      availableMicros: balance,
      keyLimit: limit.key_id === null || limit.limit_micros === null ? null : statusOf(limit as LimitRow & { limit_micros: bigint }, nowMs),
    };
  }

  /** Only `available`, which every posting moves at once: a balance a capture posts to may have deltas pending. */
  private async lockedBalance(tx: Sql, accountId: string, bucket: "available"): Promise<bigint> {
    const sql = `SELECT balance FROM ledger_accounts WHERE account_id = ? AND bucket = ?${tx.dialect.forBalanceUpdate}`;
    return (await tx.value<bigint>(sql, [accountId, bucket])) ?? 0n;
  }

  /**
   * Closes an open hold as `status` and returns it, with the key period it counted in (if any); undefined when it
   * is not open (closed already, by anyone).
   */
  private async takeOpenHold(
    tx: Sql,
    holdId: string,
    status: "captured" | "released",
  ): Promise<{ hold: Hold; spend: { keyId: string; periodSeq: bigint } | null } | undefined> {
    // One conditional UPDATE: of two transactions closing the same hold (two replicas, or a recovery and
    // the call itself), the second waits for the first's row lock, then finds it closed and changes nothing.
    const row = await tx.one<{
      id: string;
      account_id: string;
      seller_account_id: string;
      skill_id: string;
      amount: bigint;
      seller_amount: bigint;
      fee_amount: bigint;
      spend_key_id: string | null;
      spend_period_seq: bigint | null;
    }>(
      `UPDATE holds SET status = ?, closed_at = ? WHERE id = ? AND status = 'open'
       RETURNING id, account_id, seller_account_id, skill_id, amount, seller_amount, fee_amount, spend_key_id, spend_period_seq`,
      [status, Date.now(), holdId],
    );
    if (!row) return undefined;
    const hold: Hold = {
      id: row.id,
      accountId: row.account_id,
      sellerAccountId: row.seller_account_id,
      skillId: row.skill_id,
      amountMicros: row.amount,
      sellerMicros: row.seller_amount,
      feeMicros: row.fee_amount,
    };
    const spend =
      row.spend_key_id !== null && row.spend_period_seq !== null ? { keyId: row.spend_key_id, periodSeq: row.spend_period_seq } : null;
    return { hold, spend };
  }

  /**
   * Records a call paid with an x402 authorization, settled on-chain (the escrow's completeX402 credited the seller's
   * share and the fee in the transaction `txHash`): one entry paying the seller's `earned` and the platform's `fees`
   * from the x402 payers' source. Joins the caller's transaction, which marks the payment settled with the entry's id.
   */
  async recordX402Payment(
    payment: { callId: string; sellerAccountId: string; sellerMicros: bigint; feeMicros: bigint; txHash: string },
    tx: Sql,
  ): Promise<bigint> {
    const { sellerMicros, feeMicros } = payment;
    if (sellerMicros < 0n || feeMicros < 0n || sellerMicros + feeMicros <= 0n) {
      throw new Error(`an x402 payment moves a positive amount (seller ${sellerMicros}, fee ${feeMicros})`);
    }
    const postings: Posting[] = [[X402_SOURCE_ID, "source", -(sellerMicros + feeMicros)]];
    if (sellerMicros > 0n) postings.push([payment.sellerAccountId, "earned", sellerMicros]);
    if (feeMicros > 0n) postings.push([PLATFORM_ACCOUNT_ID, "fees", feeMicros]);
    const entryId = await this.entry(tx, "x402_payment", {}, `x402 call ${payment.callId}, settled in ${payment.txHash}`);
    await this.post(tx, entryId, postings);
    return entryId;
  }

  /** Writes an entry row: its kind, the record it belongs to (link columns), and a note for people (nothing reads it). */
  private async entry(tx: Sql, kind: EntryKind, link: EntryLink, memo: string): Promise<bigint> {
    const id = await tx.value<bigint>(
      `INSERT INTO entries (kind, hold_id, voucher_address, voucher_nonce, deposit_tx_hash, deposit_log_index,
                            exit_tx_hash, exit_log_index, memo, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
      [
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
      ],
    );
    return id!;
  }

  /**
   * Writes an entry's postings (one statement); the database moves the balances.
   *
   * The entry must balance, and that is checked here, before anything is written, rather than only by
   * assertBalanced at startup: an unbalanced entry can only come from a bug (a caller's arithmetic, or a hold
   * row whose split no longer adds up), and money created or destroyed must never reach the disk. The throw
   * undoes the caller's whole transaction, entry row included.
   *
   * On PostgreSQL the balance rows are locked first, in one order (account, then bucket), so that two
   * transactions moving the same balances (a hold and a release of one account) queue instead of deadlocking.
   */
  private async post(tx: Sql, entryId: bigint, postings: Posting[]): Promise<void> {
    let totalMicros = 0n;
    const params: (string | bigint)[] = [];
    for (const [accountId, bucket, amountMicros] of postings) {
      totalMicros += amountMicros;
      params.push(entryId, accountId, bucket, amountMicros);
    }
    if (totalMicros !== 0n) {
      const rows = [{ entry_id: entryId, total: totalMicros, postings: postings.map(([a, b, m]) => `${a}/${b} ${m}`) }];
      throw new LedgerInvariantError([{ rule: ENTRY_SUMS_TO_ZERO, rows }]);
    }
    if (tx.dialect.forBalanceUpdate !== "") {
      const keys = postings.flatMap(([accountId, bucket]) => [accountId, bucket]);
      await tx.run(
        `SELECT 1 FROM ledger_accounts WHERE (account_id, bucket) IN (${postings.map(() => "(?, ?)").join(", ")})
         ORDER BY account_id, bucket${tx.dialect.forBalanceUpdate}`,
        keys,
      );
    }
    await tx.run(
      `INSERT INTO postings (entry_id, account_id, bucket, amount) VALUES ${postings.map(() => "(?, ?, ?, ?)").join(", ")}`,
      params,
    );
  }
}

/** The hold `id` takes for `input`, as both ways of taking it (takeHold, holdOnServer) return it. */
function holdOf(id: string, input: HoldInput): Hold {
  const { chargedMicros, sellerMicros, feeMicros } = input.charge;
  return {
    id,
    accountId: input.accountId,
    sellerAccountId: input.sellerAccountId,
    skillId: input.skillId,
    amountMicros: chargedMicros,
    sellerMicros,
    feeMicros,
  };
}
