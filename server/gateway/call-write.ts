import type { Sql } from "../db/sql";
import type { CallRecord, CallsStore, Endpoint } from "./calls-store";
import type { IdempotencyStore } from "./idempotency-store";

/**
 * What a call's end writes beside its money, as data: the calls log's line, what its seller is shown of a broken
 * output contract, and its Idempotency-Key's fate. Data rather than a function, so that the thread that runs the
 * transaction need not be the one that built it (the ledger writer: ./ledger-writer.ts); `writeCall` is the one
 * place it is written, whichever thread runs it.
 */
export interface CallWrite {
  line: CallRecord;
  /** The first problem of an answer that broke the skill's output schema. */
  outputFailure?: { callId: string; skillId: string; endpoint: Endpoint; problem: string; createdAtMs: number };
  /**
   * The call's Idempotency-Key: its answer kept (a retry gets it), or given up (`answer` null: a retry runs again).
   * `required` (the answer reports a charge): the key must still be in progress, or the write throws, which undoes its
   * transaction. Its claim can be lost (on PostgreSQL a claim commits without waiting for the disk, so a server crash
   * can lose it), and a charge whose answer could not be kept for a retry is not taken, since the retry would run,
   * and charge, again. An uncharged answer whose key was lost is simply not kept.
   */
  idempotency?: { accountId: string; key: string; answer: { status: number; body: string } | null; required: boolean };
}

/** The stores a CallWrite goes to. */
export interface CallWriteStores {
  calls: CallsStore;
  idempotency: IdempotencyStore;
}

/** Writes `write` in the transaction `tx`, which also settles or voids the call's payment (or records a free call). */
export async function writeCall(stores: CallWriteStores, write: CallWrite, tx: Sql): Promise<void> {
  await stores.calls.record(write.line, tx);
  if (write.outputFailure) await stores.calls.recordOutputFailure(write.outputFailure, tx);
  const idem = write.idempotency;
  if (!idem) return;
  if (idem.answer === null) {
    await stores.idempotency.abandon(idem.accountId, idem.key, tx);
    return;
  }
  const stored = await stores.idempotency.complete(idem.accountId, idem.key, idem.answer.status, idem.answer.body, tx);
  if (idem.required && stored !== 1) throw new Error(`idempotency key ${idem.key} was not in progress when its answer was stored`);
}
