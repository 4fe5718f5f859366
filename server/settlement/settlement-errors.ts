/**
 * How settlement fails: for good (SettlementHaltedError, the loop stops) or for now (SettlementSendError, retried).
 */
import { BaseError } from "viem";
import type { ReconcileDifference } from "./reconcile";
import { decodeRevert, type DecodedRevert } from "./reverts";

/** Why settlement stopped for good, until someone looks. */
export type SettlementHaltCode =
  /** The escrow refused the batch for a reason retrying cannot change (EscrowInsufficientBalance, a missing role, …). */
  | "batch_cannot_settle"
  /** A recorded batch no longer rebuilds to what was recorded, or the chain holds another root under its number. */
  | "batch_mismatch"
  /** The chain has batches the ledger never recorded (another settler, or a ledger restored from an old backup). */
  | "chain_ahead"
  /** The ledger has batches settled that the chain does not (a reset chain, or the wrong escrow). */
  | "chain_behind"
  /** The escrow's treasury is not `platformAddress`. */
  | "treasury_mismatch"
  /** Reconciliation found the chain and the ledger's settled view apart. */
  | "reconcile_failed";

// Internal error, plain on purpose: an operator's concern (logged; readiness reports the halt, not its reason), never a client's answer; its code is the settler's own.
/** A failure retrying will not fix. The loop stops on it; `runOnce` keeps throwing it. */
export class SettlementHaltedError extends Error {
  override name = "SettlementHaltedError";
  constructor(
    readonly code: SettlementHaltCode,
    message: string,
    readonly details: { batchNumber?: number; revert?: DecodedRevert; differences?: ReconcileDifference[]; cause?: unknown } = {},
  ) {
    super(`settlement halted (${code}): ${message}`, { cause: details.cause });
  }
}

// Internal error, plain on purpose: the settler's retry loop catches it; no client request waits on it.
/** A send that failed in a way worth retrying (RPC down, no receipt in time, a reverted transaction). */
export class SettlementSendError extends Error {
  override name = "SettlementSendError";
  constructor(
    message: string,
    readonly batchNumber: number,
    readonly revert?: DecodedRevert,
    cause?: unknown,
  ) {
    super(message, { cause });
  }
}

/** Reverts that say the batch as built can never be applied. */
const PERMANENT_REVERTS: ReadonlySet<string> = new Set([
  "EscrowInsufficientBalance",
  "EscrowInvalidAccount",
  "EscrowZeroAmount",
  "EscrowEmptyBatch",
  "EscrowMissingReceiptsRoot",
  "EscrowBatchUnbalanced",
  "AccessControlUnauthorizedAccount",
]);

/**
 * What a failed simulation or send of batch `number` means: a halt when the escrow reverts with an error that
 * no retry can change (PERMANENT_REVERTS), otherwise a SettlementSendError to retry.
 */
export function classifySendFailure(error: unknown, number: number, doing: string): Error {
  const revert = decodeRevert(error);
  if (revert && PERMANENT_REVERTS.has(revert.errorName)) {
    return new SettlementHaltedError(
      "batch_cannot_settle",
      `batch ${number} reverts with ${revert.errorName}(${revert.args.map(String).join(", ")}) while ${doing}; retrying cannot change that`,
      { batchNumber: number, revert, cause: error },
    );
  }
  const reason = revert
    ? `${revert.errorName}(${revert.args.map(String).join(", ")})`
    : error instanceof BaseError
      ? error.shortMessage
      : (error as Error).message;
  return new SettlementSendError(`batch ${number}: failed while ${doing}: ${reason}`, number, revert, error);
}
