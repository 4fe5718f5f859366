import Database from "better-sqlite3";
import { expect } from "chai";
import type { Db } from "../../../server/db/db";
import { SqliteDatabase } from "../../../server/db/sqlite-database";
import { assertBalanced } from "../../../server/ledger/invariants";
import { PLATFORM_ACCOUNT_ID } from "../../../server/ledger/ledger";
import type { ReceivedRequest } from "../backend";
import type { SentCall } from "./traffic";

/**
 * What the chaos harness asserts about a ledger file after a kill and a restart, read from the file itself
 * (a read-only connection beside the gateway that owns it: WAL lets it read what is committed).
 */

/** Opens the ledger file read-only, with bigints, for `fn` (closed once what it returns has resolved). */
export async function readBooks<T>(dbPath: string, fn: (db: Db) => T | Promise<T>): Promise<T> {
  const db = new Database(dbPath, { readonly: true, fileMustExist: true });
  db.defaultSafeIntegers(true);
  try {
    return await fn(db);
  } finally {
    db.close();
  }
}

export function openHolds(db: Db): number {
  return Number(db.prepare("SELECT COUNT(*) FROM holds WHERE status = 'open'").pluck().get() as bigint);
}

export function availableOf(db: Db, accountId: string): bigint {
  return db.prepare("SELECT balance FROM ledger_accounts WHERE account_id = ? AND bucket = 'available'").pluck().get(accountId) as bigint;
}

/** The parties the chaos gateway's books know. */
export interface ChaosParties {
  buyerId: string;
  sellerId: string;
  creditMicros: bigint;
}

/** The books' figures, for the run's report. */
export interface BooksFigures {
  captures: number;
  capturedMicros: bigint;
  /** Captured calls whose x-call-id no client received. */
  unheardCaptures: number;
}

/** The nonce in each forwarded call's body, by the gateway's call id (the backend's log joins the two). */
export function noncesByCallId(received: readonly ReceivedRequest[]): Map<string, string> {
  const nonces = new Map<string, string>();
  for (const r of received) {
    if (r.callId === undefined) continue;
    const nonce = (JSON.parse(r.body) as { nonce?: unknown }).nonce;
    if (typeof nonce === "string") nonces.set(r.callId, nonce);
  }
  return nonces;
}

/** The call ids clients heard on a 200 that ran (not a replay): the first answers and the retries that ran. */
function heardCallIds(calls: readonly SentCall[]): Set<string> {
  const heard = new Set<string>();
  for (const call of calls) {
    for (const answer of [call.response, call.retry]) {
      if (answer && answer.status === 200 && !answer.replayed && answer.callId !== undefined) heard.add(answer.callId);
    }
  }
  return heard;
}

/**
 * The checks after every restart (and after the retries that follow it):
 * - the books pass every invariant, and no hold is open (startup released them);
 * - every captured hold belongs to a call recorded as a 200 success, and the buyer's balance moved by
 *   exactly the sum of the captures, which is what the seller and the platform earned;
 * - every 200 a client heard names a captured call;
 * - every capture no client heard of was forwarded for a call that was in flight at a kill (so there are at
 *   most as many as there were calls in flight), and no call was captured twice.
 */
export async function checkBooks(
  db: Db,
  parties: ChaosParties,
  calls: readonly SentCall[],
  nonces: Map<string, string>,
): Promise<BooksFigures> {
  // The invariants read through the one SQL interface; on this read-only connection they only read.
  await assertBalanced(new SqliteDatabase(db));
  expect(openHolds(db), "holds left open after the restart").to.equal(0);

  const captured = db
    .prepare(
      `SELECT h.id AS hold_id, h.amount, c.id AS call_id, c.http_status, c.outcome, c.charged_micros
       FROM holds h LEFT JOIN calls c ON c.hold_id = h.id WHERE h.status = 'captured' ORDER BY h.id`,
    )
    .all() as {
    hold_id: string;
    amount: bigint;
    call_id: string | null;
    http_status: bigint | null;
    outcome: string | null;
    charged_micros: bigint | null;
  }[];
  const notCalls = captured.filter(
    (c) => c.call_id === null || c.http_status !== 200n || c.outcome !== "success" || c.charged_micros !== c.amount,
  );
  expect(notCalls, "captured holds that are not a recorded successful call").to.deep.equal([]);
  const capturedMicros = captured.reduce((sum, c) => sum + c.amount, 0n);

  const balance = db.prepare("SELECT bucket, balance FROM ledger_accounts WHERE account_id = ?").all(parties.buyerId) as {
    bucket: string;
    balance: bigint;
  }[];
  const buyer = Object.fromEntries(balance.map((b) => [b.bucket, b.balance]));
  expect(buyer.held, "the buyer's held balance").to.equal(0n);
  expect(parties.creditMicros - buyer.available, "the buyer's balance moved by the sum of the captures").to.equal(capturedMicros);
  const earned = db
    .prepare("SELECT balance FROM ledger_accounts WHERE account_id = ? AND bucket = 'earned'")
    .pluck()
    .get(parties.sellerId) as bigint;
  const fees = db
    .prepare("SELECT balance FROM ledger_accounts WHERE account_id = ? AND bucket = 'fees'")
    .pluck()
    .get(PLATFORM_ACCOUNT_ID) as bigint;
  expect(earned + fees, "the seller's earnings and the platform's fees").to.equal(capturedMicros);

  const capturedIds = new Set(captured.map((c) => c.call_id!));
  const heard = heardCallIds(calls);
  const heardNotCaptured = [...heard].filter((id) => !capturedIds.has(id));
  expect(heardNotCaptured, "200s a client heard whose call is not a durable capture").to.deep.equal([]);

  const byNonce = new Map(calls.map((c) => [c.nonce, c]));
  const capturesPerNonce = new Map<string, string[]>();
  const unheard: string[] = [];
  for (const callId of capturedIds) {
    const nonce = nonces.get(callId);
    expect(nonce, `captured call ${callId} was never forwarded to the backend`).to.be.a("string");
    capturesPerNonce.set(nonce!, [...(capturesPerNonce.get(nonce!) ?? []), callId]);
    if (heard.has(callId)) continue;
    unheard.push(callId);
    const call = byNonce.get(nonce!);
    expect(call?.inFlightAtKill, `unheard capture ${callId} (${nonce}) is of a call that was not in flight at a kill`).to.equal(true);
  }
  const charged = [...capturesPerNonce].filter(([, ids]) => ids.length > 1);
  expect(charged, "calls captured more than once").to.deep.equal([]);
  const inFlightAtKills = calls.filter((c) => c.inFlightAtKill).length;
  expect(unheard.length, "unheard captures").to.be.at.most(inFlightAtKills);
  return { captures: captured.length, capturedMicros, unheardCaptures: unheard.length };
}

/**
 * What an idempotent retry, sent after the restart with the same key and body, must get: the stored answer
 * (`idempotent-replayed: true`, the same body) when the first attempt completed with a kept answer; a run of
 * its own when it never completed or its answer was not kept (a backend failure gives its key up).
 * `capturedNonces` are the calls captured before the retry. Returns what the retry was: a replay of an answer
 * the client had heard, a replay of a capture it had not (its first attempt lost with the gateway), the one
 * run of a call whose first attempt never completed, or a second run of a call whose failure was not kept.
 */
export type RetryOutcome = "replayed_answer" | "replayed_lost" | "ran_once" | "ran_again";

export function checkRetry(call: SentCall, capturedNonces: ReadonlySet<string>): RetryOutcome {
  const retry = call.retry!;
  const what = `retry of ${call.nonce} (${call.skill.slug}, first ${call.state}${call.response ? ` ${call.response.status}` : ""})`;
  const fails = call.skill.backendPath === "/fail";
  if (call.response?.status === 200) {
    expect({ status: retry.status, replayed: retry.replayed, body: retry.body }, what).to.deep.equal({
      status: 200,
      replayed: true,
      body: call.response.body,
    });
    return "replayed_answer";
  }
  if (call.response) {
    expect({ status: retry.status, replayed: retry.replayed }, what).to.deep.equal({ status: call.response.status, replayed: false });
    return "ran_again";
  }
  // The first attempt was lost with the gateway: replayed if its capture made it to disk, run afresh if not.
  if (capturedNonces.has(call.nonce)) {
    expect({ status: retry.status, replayed: retry.replayed }, what).to.deep.equal({ status: 200, replayed: true });
    expect((JSON.parse(retry.body) as { data: { nonce: string } }).data.nonce, what).to.equal(call.nonce);
    return "replayed_lost";
  }
  expect({ status: retry.status, replayed: retry.replayed }, what).to.deep.equal({ status: fails ? 502 : 200, replayed: false });
  return "ran_once";
}

/** Every call a client heard answered got what its skill gives: 200 from the echoes, 502 from the failing one. */
export function checkAnswers(calls: readonly SentCall[]): void {
  const wrong = calls
    .filter((c) => c.response && c.response.status !== (c.skill.backendPath === "/fail" ? 502 : 200))
    .map((c) => `${c.nonce} ${c.skill.slug}: ${c.response!.status} ${c.response!.body.slice(0, 200)}`);
  expect(wrong, "answers other than the skill's").to.deep.equal([]);
}

/** The nonces of the calls captured so far. */
export function capturedNonces(db: Db, nonces: Map<string, string>): Set<string> {
  const ids = db.prepare("SELECT c.id FROM calls c JOIN holds h ON h.id = c.hold_id WHERE h.status = 'captured'").pluck().all() as string[];
  return new Set(ids.map((id) => nonces.get(id)!).filter((n) => n !== undefined));
}
