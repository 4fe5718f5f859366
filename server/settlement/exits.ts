/**
 * Unilateral exits, seen from the gateway. A user can take its escrowed USDC out without the gateway:
 * `requestExit(amount)`, wait `exitDelay`, `completeExit()`, which pays min(requested, balance then)
 * (contracts/SkillEscrow.sol). The settler can still debit the account during the delay, so what the user
 * spent before asking is still collected; what the ledger must prevent is spending the requested amount
 * after asking. The indexer (./indexer.ts) reads the exit logs in block and log order with the deposits,
 * exactly once, and applies each here, inside the indexer's chunk transaction:
 *
 * - ExitRequested: a `chain_exits` row, pending, whose freeze is taken at once from the account's
 *   available balance, up to the requested amount (Ledger.topUpExitFreezes). What available could not
 *   cover is the exit's shortfall: money held by calls in flight, or spent and not yet settled. A released
 *   hold, a deposit or any other money reaching the account tops the freeze up first, so a short account's
 *   available balance stays at zero and no call can spend it. A captured hold's money is spent for good:
 *   the settler debits it on-chain and the escrow pays that much less. A new request replaces a pending
 *   one: the old freeze is given back and the new one taken, each as its own entry.
 * - ExitCancelled: the freeze is given back.
 * - ExitCompleted: paid == frozen is the normal case and nothing moves. paid < frozen (the escrow had less
 *   than the ledger froze) gives the difference back. paid > frozen means the escrow paid out money the
 *   ledger still counts as held or spent-but-unsettled (the settler did not post those calls before
 *   `readyAt`): it is recorded as `uncovered` and logged, reconciliation reports it at the address, and the
 *   batch that tries to debit that money will fail. The settler should therefore settle an account with a
 *   pending exit before its `readyAt`: the indexer calls `onExitRequested` so the gateway can nudge it.
 *
 * An exit by an address no account has linked freezes nothing (there is no ledger money behind it: its
 * deposits wait in `chain_deposits`); it is recorded with no account.
 */
import { getAbiItem } from "viem";
import { skillEscrowAbi } from "../chain/abi";
import { type Sql, within } from "../db/sql";
import type { Ledger } from "../ledger/ledger";
import type { AddressesStore, StoredAddress } from "./addresses-store";
import type { ExitRow, ExitsStore } from "./exits-store";
import { settlementStores } from "./store";

/** SkillEscrow's exit events (contracts/SkillEscrow.sol). */
export const EXIT_REQUESTED_EVENT = getAbiItem({ abi: skillEscrowAbi, name: "ExitRequested" });
export const EXIT_CANCELLED_EVENT = getAbiItem({ abi: skillEscrowAbi, name: "ExitCancelled" });
export const EXIT_COMPLETED_EVENT = getAbiItem({ abi: skillEscrowAbi, name: "ExitCompleted" });

/** Where a log is on the chain; (txHash, logIndex) is its identity. */
type LogPosition = { txHash: string; logIndex: number; blockNumber: bigint; blockHash: string; address: StoredAddress };

/** An exit log as the indexer hands it over, lowercase hashes and addresses. */
export type ChainExitEvent =
  | (LogPosition & { kind: "requested"; amountMicros: bigint; readyAtSec: bigint })
  | (LogPosition & { kind: "cancelled"; amountMicros: bigint })
  | (LogPosition & { kind: "completed"; requestedMicros: bigint; paidMicros: bigint });

/** A pending exit as the indexer reports it (for the settler hook). */
export type PendingExit = {
  accountId: string | null;
  address: StoredAddress;
  requestedMicros: bigint;
  readyAtSec: bigint;
  frozenMicros: bigint;
};

export type ApplyExitEventReturnType =
  /** Applied; `warning` says something a person must look at (paid beyond the freeze, an unlinked address). */
  | { outcome: "applied"; requested?: PendingExit; warning?: string }
  /** This log was applied before (an RPC repeating it): nothing done. */
  | { outcome: "duplicate" }
  /** The log contradicts what was recorded: the chain is not the one read before. */
  | { outcome: "conflict"; detail: string };

/** The tables applying an exit reads and writes beside the ledger's freezes: the exits, and who owns an address. */
export type ExitStores = { addresses: AddressesStore; exits: ExitsStore };

/** The memo of an exit's entries: the address, the request's log, and what the entry does. */
export function exitMemo(address: string, key: { tx_hash: string; log_index: bigint | number }, what: string): string {
  return `exit ${address} ${key.tx_hash}:${key.log_index}: ${what}`;
}

/**
 * Applies one exit log to the ledger. Given `tx`, it joins the caller's transaction (the indexer's chunk), so
 * the row, its entries and the indexer's progress commit together; without, it runs in one of its own.
 * Expected disagreements are results.
 */
export function applyExitEvent(
  ledger: Ledger,
  event: ChainExitEvent,
  stores: ExitStores = settlementStores(ledger.db),
  tx?: Sql,
): Promise<ApplyExitEventReturnType> {
  return within(ledger.db, tx, (tx) =>
    event.kind === "requested" ? applyRequested(ledger, stores, event, tx) : applyClosing(ledger, stores.exits, event, tx),
  );
}

async function applyRequested(
  ledger: Ledger,
  { addresses, exits }: ExitStores,
  event: Extract<ChainExitEvent, { kind: "requested" }>,
  tx: Sql,
): Promise<ApplyExitEventReturnType> {
  const seen = await exits.byRequestLog(event.txHash, event.logIndex, tx);
  if (seen) {
    if (seen.address !== event.address || seen.requested !== event.amountMicros || seen.ready_at !== event.readyAtSec) {
      return {
        outcome: "conflict",
        detail: `exit request ${event.txHash}:${event.logIndex} was recorded as ${seen.requested} by ${seen.address}, the chain now says ${event.amountMicros} by ${event.address}`,
      };
    }
    return { outcome: "duplicate" };
  }
  // The escrow keeps one request per address: a pending one is replaced, its freeze given back first.
  const previous = await exits.pendingAt(event.address, tx);
  if (previous) await close(ledger, exits, previous, event, "replaced", null, "returned (replaced by a new request)", tx);

  const accountId = (await addresses.accountFor(event.address, tx)) ?? null;
  await exits.insertPending(
    { ...event, accountId, requestedMicros: event.amountMicros },
    accountId === null ? 0n : event.amountMicros,
    Date.now(),
    tx,
  );
  let frozenMicros = 0n;
  if (accountId !== null) {
    // The whole request starts as shortfall; the top-up freezes what the available balance covers now.
    ledger.noteExitShortfall();
    await ledger.topUpExitFreezes(accountId, tx);
    frozenMicros = (await exits.frozen(event.txHash, event.logIndex, tx))!;
  }
  return {
    outcome: "applied",
    requested: { accountId, address: event.address, requestedMicros: event.amountMicros, readyAtSec: event.readyAtSec, frozenMicros },
    warning:
      accountId === null
        ? `exit of ${event.amountMicros} requested by ${event.address}, which no account has linked: nothing frozen; its waiting deposits will be paid out by the escrow`
        : undefined,
  };
}

async function applyClosing(
  ledger: Ledger,
  exits: ExitsStore,
  event: Extract<ChainExitEvent, { kind: "cancelled" | "completed" }>,
  tx: Sql,
): Promise<ApplyExitEventReturnType> {
  const closedBefore = await exits.byClosingLog(event.txHash, event.logIndex, tx);
  if (closedBefore) {
    const expected = event.kind;
    return closedBefore.status === expected
      ? { outcome: "duplicate" }
      : {
          outcome: "conflict",
          detail: `log ${event.txHash}:${event.logIndex} closed exit ${closedBefore.tx_hash}:${closedBefore.log_index} as ${closedBefore.status}, the chain now says ${expected}`,
        };
  }
  // Locked as read (PostgreSQL): what it has frozen cannot move until the close below commits.
  const pending = await exits.pendingAt(event.address, tx);
  const requested = event.kind === "cancelled" ? event.amountMicros : event.requestedMicros;
  if (!pending || pending.requested !== requested) {
    return {
      outcome: "conflict",
      detail: `exit ${event.kind} for ${requested} by ${event.address} (${event.txHash}:${event.logIndex}), but the pending request recorded there is ${pending ? pending.requested : "none"}`,
    };
  }
  if (event.kind === "cancelled") {
    await close(ledger, exits, pending, event, "cancelled", null, "returned (cancelled)", tx);
    return { outcome: "applied" };
  }

  const paid = event.paidMicros;
  if (paid <= pending.frozen) {
    await close(ledger, exits, pending, event, "completed", paid, "returned (the escrow paid less than frozen)", tx);
    return { outcome: "applied" };
  }
  // Paid beyond the freeze: only possible while the exit was short, so the account's available balance is
  // zero and there is nothing to take. The escrow paid money the ledger still counts as held or as spent
  // and not yet settled; the row keeps the difference and the indexer says it out loud.
  await close(ledger, exits, pending, event, "completed", paid, "", tx);
  const uncovered = paid - pending.frozen;
  return {
    outcome: "applied",
    warning:
      `EXIT PAID BEYOND ITS FREEZE: ${event.address} (${pending.account_id ?? "no account"}) was paid ${paid}, the ledger had frozen ${pending.frozen}; ` +
      `${uncovered} the ledger still counts as held or unsettled is gone from the escrow, and the next batch debiting it will fail`,
  };
}

/**
 * Ends a pending request: cancelled and replaced ones give their whole freeze back; a completed one keeps
 * min(paid, frozen) and gives back the rest, recording what was paid beyond it as `uncovered`.
 */
async function close(
  ledger: Ledger,
  exits: ExitsStore,
  pending: ExitRow,
  by: LogPosition,
  status: "replaced" | "cancelled" | "completed",
  paid: bigint | null,
  returnNote: string,
  tx: Sql,
): Promise<void> {
  const kept = paid === null ? 0n : paid < pending.frozen ? paid : pending.frozen;
  const uncovered = paid === null ? 0n : paid - kept;
  const changed = await exits.close(
    pending,
    { status, keptMicros: kept, paidMicros: paid, uncoveredMicros: uncovered },
    by,
    Date.now(),
    tx,
  );
  if (!changed) throw new Error(`exit ${pending.tx_hash}:${pending.log_index} was not pending when it was ${status}`);
  const giveBack = pending.frozen - kept;
  if (giveBack > 0n) {
    // The row is closed first, so the returned money cannot flow back into this same freeze; other short
    // exits of the account take it first (Ledger.returnExitFreeze tops them up).
    await ledger.returnExitFreeze(
      { txHash: pending.tx_hash, logIndex: Number(pending.log_index) },
      pending.account_id!,
      giveBack,
      exitMemo(pending.address, pending, returnNote),
      tx,
    );
  }
}
