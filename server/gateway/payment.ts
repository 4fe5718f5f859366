import type { Sql } from "../db/sql";
import type { Refusal } from "../errors";
import type { Charge } from "../ledger/fees";
import type { Skill } from "../catalog/skills";
import type { RateRule } from "./rate-limit";
import type { CallBudget } from "./call-result";
import type { CallWrite } from "./call-write";

/**
 * How a call is paid for, as the call pipeline (./pipeline.ts) sees it: one object per call, which reserves the
 * call's price before the backend is called and then either settles it (the call succeeded) or voids it (it did
 * not). Two implementations: the ledger's hold on a prepaid balance (./ledger-payment.ts, keyed calls) and an x402
 * authorization (server/x402/x402-payment.ts). Business outcomes (no funds, a payment that does not verify, a
 * settlement the chain refused) are returned as refusals; only faults throw.
 *
 * The pipeline owns the calls log and the idempotency key: a payment runs the pipeline's `record` inside the
 * transaction that settles or voids it, so a call's line (and its idempotent answer) commits with its money or not
 * at all. A call whose price is 0 is never reserved: the pipeline records it alone.
 */
export interface CallPayment<N = never> {
  /** Who the calls log names: the account and key billed, or the x402 source. */
  readonly payer: { accountId: string; apiKeyId: string };
  /**
   * Whether a call refused before it reached a backend gets a line in the calls log. An account's refusals are its
   * usage (and its daily cap counts them); an anonymous caller's are not logged, since anyone could grow the log.
   */
  readonly logsRefusals: boolean;
  /** The ledger hold the calls log links the call to, once reserved; null for a payment held elsewhere. */
  readonly holdId: string | null;

  /**
   * Checks, before the limits, that a payment is offered at all and can be read (x402: a PAYMENT-SIGNATURE that
   * parses). Undefined when it is; a keyed call's key was checked before the call began.
   */
  offer(call: PaidCall): PaymentRefusal<N> | undefined;

  /** Reserves the call's price; a refusal ends the call before its backend is called, with nothing reserved. */
  reserve(call: PaidCall, admit: Admit): Promise<PaymentRefusal<N> | undefined>;

  /**
   * Takes the reserved price: the call succeeded. `record` is written in the transaction that makes the payment
   * final, which is durable before this returns. Never refused: what could refuse it was checked, and the money
   * taken where it can be taken, before the call was forwarded (x402 collects the payment in `reserve`). An x402
   * completion whose fate is unknown is left to recovery, which writes the call's line when it records it.
   * `captured`: a usage-priced call's charge (at most what was reserved), taken instead of the whole reservation, the
   * rest given back in the same transaction; a payment that cannot take less (x402) is never given one.
   */
  settle(record: RecordCall, captured?: Charge): Promise<Settlement<N>>;

  /** Gives the reservation back: the call failed. `record` is written in the transaction that releases it. */
  void(record: RecordCall): Promise<void>;

  /**
   * A fault ended the call before it was settled or voided (a bug, a database that failed): gives back whatever
   * the payment can still give back. What may already be final stays for recovery to decide.
   */
  abandon(): Promise<void>;

  /** The sentence a failed call's message ends with ("You were not charged."), or "" for a call that reserved nothing to say of. */
  unchargedNote(reserved: boolean): string;
}

/** What a payment's checks know of the call they reserve for. */
export interface PaidCall {
  skill: Skill;
  /** The price, split per the fee mode: what is reserved. Never 0 (a free call is not reserved). */
  charge: Charge;
  callId: string;
  input: unknown;
}

/**
 * The pipeline's limits, for a payment whose payer is known only once its payment verifies (x402): admits the call
 * under `rule` or refuses it (429), `who` naming whose limit it is in the message ("skill \"echo\" from this payer").
 */
export type Admit = (rule: RateRule, who: string) => Promise<Refusal<"rate_limited"> | undefined>;

/** A payment's refusal: the code and message the client gets, and what the payment adds to the answer (its headers). */
export type PaymentRefusal<N = never> = Refusal & { note?: N };

/**
 * The calls log's line and the idempotency key's fate, which a payment writes inside the transaction that settles or
 * voids it: as data (`write`, for a payment whose transaction runs on another thread) and as the pipeline's function
 * that writes that data in a transaction of this thread (`run`). Each reads the call's latency and time when it is
 * used, right before the transaction: read them once, there.
 */
export interface RecordCall {
  readonly write: CallWrite;
  run(tx: Sql): Promise<void>;
}

/** A settled call's payment: what it adds to the answer (x402's PAYMENT-RESPONSE), and what its payer has left. */
export interface Settlement<N = never> {
  note?: N;
  /** The payer's budget, read in the transaction that settled the payment; absent for a payment that has none (x402). */
  budget?: CallBudget;
}
