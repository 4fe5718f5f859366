import type { ErrorCode, Refusal } from "../errors";
import type { Endpoint } from "./calls-store";
import type { RateDecision } from "./rate-limit";

/**
 * How a call ended, as the gateway decided it: the backend's data, or the code and message of the refusal or
 * failure. The HTTP layer renders it (CallAnswers) into the status and body.
 */
export interface CallEnd {
  endpoint: Endpoint;
  skillSlug: string;
  responseTimeMs: number;
  chargedMicros: bigint;
  /**
   * The call's id, when the call has (or will have) a line in the calls log: the answer names it in its metadata as
   * well as in X-Call-Id, so that a stored body replayed later still says which call it was.
   */
  callId?: string;
  result:
    | { ok: true; data: unknown }
    | {
        ok: false;
        code: ErrorCode;
        message: string;
        /** Facts for the client beside the message (a refusal's details: a 402's numbers), as Refusal.details. */
        details?: Record<string, unknown>;
      };
}

/**
 * What the payer of a paid call has left once it is charged, read in the transaction that charged it (a keyed call's:
 * ./ledger-payment.ts). The answer carries it in X-Balance-Available and X-Key-Spend-Remaining.
 */
export interface CallBudget {
  /** The account's available balance after the charge. */
  availableMicros: bigint;
  /** What the key may still spend in its current period (never below 0); undefined for a key without a spending limit. */
  keySpendRemainingMicros?: bigint;
}

/** A call's answer as the client gets it: the status and the JSON body, serialized. */
export interface CallAnswer {
  status: number;
  /** Sent byte for byte, and stored for an idempotent replay in the same commit as the charge. */
  body: string;
}

/**
 * The HTTP layer's rendering of a call's end (server/http/call-answer.ts). The pipeline renders before the commit
 * of the charge, because the final body is stored for an idempotent replay and its status is counted in the calls
 * log, in that commit; what the body says is HTTP's.
 */
export interface CallAnswers {
  /** The answer; undefined when the backend's data cannot be serialized again (JSON nested too deep). */
  render(end: CallEnd): CallAnswer | undefined;
}

/**
 * What a call came to: a stored answer replayed; a request refused before any call began (no such skill, an
 * idempotency key in use or reused), which has no call id and no metadata; or the answer of a call. `N` is what
 * the payment adds to an answer (x402's protocol headers).
 */
export type CallResult<N = never> =
  | ({ kind: "replayed" } & CallAnswer)
  | { kind: "refused"; refusal: Refusal }
  | ({
      kind: "answered";
      /** The call's id: present when the call has a line in the calls log, or will have (recovery writes it). */
      callId?: string;
      /** The code of a refusal or failure; absent on success. */
      code?: ErrorCode;
      /** The caller's headline rate limit as it stands after this call; absent for a caller without limits. */
      rate?: RateDecision;
      /** When a refused call may be tried again (rate limit, daily cap). */
      retryAfterMs?: number;
      /** What the payment adds to the answer. */
      note?: N;
      /** A charged call's payer's budget after the charge; absent for a call not charged, and for a payer without one (x402). */
      budget?: CallBudget;
    } & CallAnswer);
