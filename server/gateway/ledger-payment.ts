import { isDatabaseUnavailable } from "../db/sql";
import { GatewayError, refusal } from "../errors";
import type { Charge } from "../ledger/fees";
import type { Budget, Hold, HoldInput, HoldResult, Ledger } from "../ledger/ledger";
import { microsToUsd, usdDisplay } from "../ledger/money";
import type { CallPayment, PaidCall, PaymentRefusal, RecordCall, Settlement } from "./payment";

/**
 * The ledger's side of a keyed call: its hold, and the capture or release that ends it with the call's line. Written
 * on the event loop's connection (LedgerHolds, below), or on the SQLite ledger writer's thread, which runs the same
 * LedgerHolds on a connection of its own (./ledger-writer.ts).
 */
export interface HoldBook {
  /** The hold: the balance covers the price, then the key's spending limit allows it, in one transaction. */
  hold(input: HoldInput): Promise<HoldResult>;
  /**
   * The capture (of `captured`, a usage-priced call's charge, or of the whole hold), the call's `record` and the budget
   * left after it, in one durable transaction shared with the other charges.
   */
  settle(holdId: string, key: { apiKeyId: string; nowMs: number }, record: RecordCall, captured?: Charge): Promise<Budget>;
  /**
   * The release and the call's `record`, in one transaction that need not wait for the disk (the writer thread answers
   * once it is committed, which there is with its fsync).
   */
  void(holdId: string, record: RecordCall): Promise<void>;
  /** The release alone (a fault ended the call). */
  release(holdId: string): Promise<void>;
}

/** A HoldBook on the ledger's own database: the transactions run on this thread. */
export class LedgerHolds implements HoldBook {
  constructor(private readonly ledger: Ledger) {}

  hold(input: HoldInput): Promise<HoldResult> {
    return this.ledger.hold(input);
  }

  settle(holdId: string, key: { apiKeyId: string; nowMs: number }, record: RecordCall, captured?: Charge): Promise<Budget> {
    return this.ledger.db.transaction(
      async (tx) => {
        // A usage-priced call's capture takes what it came to and gives the rest back to the balance and the key.
        // The call's line follows the capture, never beside it: a statement that failed stops the transaction's
        // function before anything else is written (SQLite may have rolled the whole transaction back already).
        const taken = await this.ledger.captureWithBudget(holdId, key, tx, captured);
        if (!taken.ok) throw new Error(`hold ${holdId} was not open at capture`);
        await record.run(tx);
        return taken.budget;
      },
      { durable: true, group: true },
    );
  }

  async void(holdId: string, record: RecordCall): Promise<void> {
    await this.ledger.db.transaction(async (tx) => {
      await this.ledger.release(holdId, tx);
      await record.run(tx);
    });
  }

  async release(holdId: string): Promise<void> {
    await this.ledger.release(holdId);
  }
}

/**
 * A keyed call's payment: a hold on the account's prepaid balance in the ledger, counted against the key's spending
 * limit in the hold's own transaction. Settled by capturing the hold (the seller's 90% and the platform's fee) in a
 * durable transaction shared with the other charges of this replica; voided by releasing it.
 */
export class LedgerPayment implements CallPayment {
  readonly payer: { accountId: string; apiKeyId: string };
  readonly logsRefusals = true;
  private hold: Hold | null = null;

  constructor(
    private readonly ledger: Ledger,
    /** Where the hold and its end are written (LedgerHolds, or the SQLite ledger writer's thread). */
    private readonly holds: HoldBook,
    key: { accountId: string; apiKeyId: string },
    /** The clock the key's spending period is read by (ms since the epoch). */
    private readonly now: () => number,
  ) {
    this.payer = key;
  }

  get holdId(): string | null {
    return this.hold?.id ?? null;
  }

  /** A keyed call's key was authenticated before the call began: there is no other offer to check. */
  offer(): undefined {
    return undefined;
  }

  /** The hold: the balance covers the price (402 insufficient_balance), then the key's spending limit allows it (402). */
  async reserve(call: PaidCall): Promise<PaymentRefusal | undefined> {
    const { accountId, apiKeyId } = this.payer;
    const held = await this.holds.hold({
      accountId,
      sellerAccountId: call.skill.sellerAccountId,
      skillId: call.skill.id,
      charge: call.charge,
      apiKeyId,
      nowMs: this.now(),
    });
    if (held.ok) {
      this.hold = held.hold;
      return undefined;
    }
    if (held.reason === "key_spend_limit_reached") {
      return refusal("key_spend_limit_reached", spendLimitMessage(held), { details: refusalDetails(held) });
    }
    const message = (await this.ledger.hasExitShortfall(accountId))
      ? "Insufficient balance: an exit from the escrow is pending for this account, and its money is frozen until the exit completes or is cancelled."
      : `Insufficient balance: this call costs ${usdDisplay(held.neededMicros)} and ${usdDisplay(held.availableMicros)} is available. Add funds.`;
    return refusal("insufficient_balance", message, { details: refusalDetails(held) });
  }

  /**
   * The capture, the calls log's line and the idempotent answer commit together, and the answer waits until they are
   * on disk. Charges share commits (and flushes) with the others of this replica: they all post to the platform's
   * balance row, whose lock each would otherwise hold through a flush of its own.
   */
  async settle(record: RecordCall, captured?: Charge): Promise<Settlement> {
    const hold = this.open();
    // What the account and the key have left is read in the capture's transaction: the answer's X-Balance-Available
    // and X-Key-Spend-Remaining say what this very charge left, whatever other calls commit around it.
    let budget;
    try {
      budget = await this.holds.settle(hold.id, { apiKeyId: this.payer.apiKeyId, nowMs: this.now() }, record, captured);
    } catch (error) {
      // The capture's COMMIT went to a database that did not answer: it may commit when the server reads it. The call
      // is answered 503 all the same (no 200 without a durable capture), saying so; the hold is released once the
      // database answers (abandon), which leaves it captured if the capture did commit, and then a retry with the same
      // Idempotency-Key replays the answer stored with it.
      if (isDatabaseUnavailable(error) && error.mayHaveCommitted) {
        throw new GatewayError("database_unavailable", CHARGE_UNKNOWN, { details: { charge_unknown: true }, cause: error });
      }
      throw error;
    }
    const limit = budget.keyLimit;
    return {
      budget: {
        availableMicros: budget.availableMicros,
        ...(limit ? { keySpendRemainingMicros: limit.limitMicros > limit.spentMicros ? limit.limitMicros - limit.spentMicros : 0n } : {}),
      },
    };
  }

  /** The release, the line and the key's fate, in one transaction that need not wait for the disk (a lost release is a hold released at the next start). */
  async void(record: RecordCall): Promise<void> {
    await this.holds.void(this.open().id, record);
  }

  /** Releases the hold; when the database does not answer, once it does (the call's answer does not wait for that). */
  async abandon(): Promise<void> {
    if (!this.hold) return;
    try {
      await this.holds.release(this.hold.id);
    } catch (error) {
      if (!isDatabaseUnavailable(error)) throw error;
      this.ledger.releaseWhenAvailable(this.hold.id);
    }
  }

  unchargedNote(): string {
    return "You were not charged.";
  }

  private open(): Hold {
    if (!this.hold) throw new Error("the call's payment was not reserved");
    return this.hold;
  }
}

/** The answer to a call whose capture's fate the database left unknown. */
const CHARGE_UNKNOWN =
  "The gateway's database did not answer while this call's charge was being recorded, so it may have been charged. " +
  "Retry with the same Idempotency-Key to get its answer without paying twice (without one, check your usage before calling again).";

const PER_PERIOD = { day: "per day", month: "per month", total: "in total" } as const;

/**
 * A 402's numbers, for a client to act on without reading the message: the body's `details` (beside `error` and
 * `code`), USD as the API's JSON writes it. `price` is what the call would have cost and `available` the account's
 * balance; a key's spending limit adds its `limit`, `period`, what the period has `spent` (calls in flight included)
 * and when it `resets_at` (null: never).
 */
function refusalDetails(refused: Exclude<HoldResult, { ok: true }>): { details: Record<string, unknown> } {
  const numbers: Record<string, unknown> = { price: microsToUsd(refused.neededMicros), available: microsToUsd(refused.availableMicros) };
  if (refused.reason === "key_spend_limit_reached") {
    numbers.limit = microsToUsd(refused.limitMicros);
    numbers.spent = microsToUsd(refused.spentMicros);
    numbers.period = refused.period;
    numbers.resets_at = refused.resetsAtMs === null ? null : new Date(refused.resetsAtMs).toISOString();
  }
  return { details: numbers };
}

/**
 * The refusal of a call its key's spending limit does not allow: the limit, its period, what is spent, and when it
 * resets (a UTC boundary, to the second) or that it never does.
 */
function spendLimitMessage(refused: Extract<HoldResult, { reason: "key_spend_limit_reached" }>): string {
  const spent = `${usdDisplay(refused.spentMicros)} spent, this call costs ${usdDisplay(refused.neededMicros)}`;
  const resets =
    refused.resetsAtMs === null
      ? "it does not reset: raise or remove the limit to go on"
      : `it resets at ${new Date(refused.resetsAtMs).toISOString().replace(/\.\d{3}Z$/, "Z")}`;
  if (refused.neededMicros > refused.limitMicros) {
    // Waiting for the reset would not help: this call alone costs more than the whole limit.
    return `This call costs ${usdDisplay(refused.neededMicros)}, more than this key's whole spending limit of ${usdDisplay(refused.limitMicros)} ${PER_PERIOD[refused.period]}: raise the limit to make it.`;
  }
  return `This key's spending limit of ${usdDisplay(refused.limitMicros)} ${PER_PERIOD[refused.period]} is reached (${spent}); ${resets}.`;
}
