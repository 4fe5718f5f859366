import Database from "better-sqlite3";
import { expect } from "chai";
import type { Sql } from "../../../server/db/sql";
import { SqliteDatabase } from "../../../server/db/sqlite-database";
import { assertBalanced } from "../../../server/ledger/invariants";
import { PLATFORM_ACCOUNT_ID } from "../../../server/ledger/ledger";
import type { ReceivedRequest } from "../backend";
import type { SentCall } from "./traffic";

/**
 * What the chaos harnesses assert about the books after a fault, read through the one SQL interface: from a ledger
 * file beside the gateway that owns it (a read-only connection: WAL lets it read what is committed), or from the
 * PostgreSQL database a cluster shares (./pause.ts).
 */

/** Opens the ledger file read-only, with bigints, for `fn` (closed once what it returns has resolved). */
export async function readBooks<T>(dbPath: string, fn: (db: Sql) => T | Promise<T>): Promise<T> {
  const db = new Database(dbPath, { readonly: true, fileMustExist: true });
  db.defaultSafeIntegers(true);
  try {
    // On this read-only connection the checks only read.
    return await fn(new SqliteDatabase(db));
  } finally {
    db.close();
  }
}

export async function openHolds(db: Sql): Promise<number> {
  return Number(await db.value<bigint>("SELECT COUNT(*) FROM holds WHERE status = 'open'"));
}

/** Idempotency keys still in progress: a call's, or one whose release the gateway owes. */
export async function keysInProgress(db: Sql): Promise<number> {
  return Number(await db.value<bigint>("SELECT COUNT(*) FROM idempotency_keys WHERE state = 'in_progress'"));
}

export async function availableOf(db: Sql, accountId: string): Promise<bigint> {
  return (await db.value<bigint>(`SELECT balance FROM ${db.dialect.balances} WHERE account_id = ? AND bucket = 'available'`, [accountId]))!;
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
 * Whether the gateway's answer to `call` left its charge unknown: killed before it answered, or answered 503
 * `database_unavailable` with `charge_unknown` (a capture whose COMMIT the database did not answer). Only such a call
 * may be captured without its client having heard a 200.
 */
export function chargeUnknown(call: SentCall): boolean {
  if (call.inFlightAtKill) return true;
  if (call.response?.status !== 503) return false;
  return (JSON.parse(call.response.body) as { charge_unknown?: unknown }).charge_unknown === true;
}

/**
 * The checks after every fault (a restart after a kill, a database thawed) and after the retries that follow:
 * - the books pass every invariant, and no hold is open (startup, or the gateway once its database answered,
 *   released them);
 * - every captured hold belongs to a call recorded as a 200 success, and the buyer's balance moved by
 *   exactly the sum of the captures, which is what the seller and the platform earned;
 * - every 200 a client heard names a captured call;
 * - every capture no client heard of was forwarded for a call whose charge the fault left unknown (chargeUnknown:
 *   so there are at most as many as there were such calls), and no call was captured twice.
 */
export async function checkBooks(
  db: Sql,
  parties: ChaosParties,
  calls: readonly SentCall[],
  nonces: Map<string, string>,
): Promise<BooksFigures> {
  await assertBalanced(db);
  expect(await openHolds(db), "holds left open after the fault").to.equal(0);

  const captured = await db.all<{
    hold_id: string;
    amount: bigint;
    call_id: string | null;
    http_status: bigint | null;
    outcome: string | null;
    charged_micros: bigint | null;
  }>(
    `SELECT h.id AS hold_id, h.amount, c.id AS call_id, c.http_status, c.outcome, c.charged_micros
     FROM holds h LEFT JOIN calls c ON c.hold_id = h.id WHERE h.status = 'captured' ORDER BY h.id`,
  );
  const notCalls = captured.filter(
    (c) => c.call_id === null || c.http_status !== 200n || c.outcome !== "success" || c.charged_micros !== c.amount,
  );
  expect(notCalls, "captured holds that are not a recorded successful call").to.deep.equal([]);
  const capturedMicros = captured.reduce((sum, c) => sum + c.amount, 0n);

  const balance = await db.all<{ bucket: string; balance: bigint }>(
    `SELECT bucket, balance FROM ${db.dialect.balances} WHERE account_id = ?`,
    [parties.buyerId],
  );
  const buyer = Object.fromEntries(balance.map((b) => [b.bucket, b.balance]));
  expect(buyer.held, "the buyer's held balance").to.equal(0n);
  expect(parties.creditMicros - buyer.available, "the buyer's balance moved by the sum of the captures").to.equal(capturedMicros);
  const bucket = async (accountId: string, name: string) =>
    (await db.value<bigint>(`SELECT balance FROM ${db.dialect.balances} WHERE account_id = ? AND bucket = ?`, [accountId, name]))!;
  const earned = await bucket(parties.sellerId, "earned");
  const fees = await bucket(PLATFORM_ACCOUNT_ID, "fees");
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
    expect(call && chargeUnknown(call), `unheard capture ${callId} (${nonce}) is of a call whose answer said it was not charged`).to.equal(
      true,
    );
  }
  const charged = [...capturesPerNonce].filter(([, ids]) => ids.length > 1);
  expect(charged, "calls captured more than once").to.deep.equal([]);
  expect(unheard.length, "unheard captures").to.be.at.most(calls.filter(chargeUnknown).length);
  return { captures: captured.length, capturedMicros, unheardCaptures: unheard.length };
}

/**
 * What an idempotent retry, sent after the fault with the same key and body, must get: the stored answer
 * (`idempotent-replayed: true`, the same body) when the first attempt completed with a kept answer; a run of
 * its own when it never completed, was answered 503, or its answer was not kept (a backend failure gives its key up).
 * `capturedNonces` are the calls captured before the retry. Returns what the retry was: a replay of an answer
 * the client had heard, a replay of a capture it had not (its first attempt lost with the gateway, or answered 503
 * `charge_unknown`), the one run of a call whose first attempt never completed, or a second run of a call whose
 * failure was not kept.
 */
export type RetryOutcome = "replayed_answer" | "replayed_lost" | "ran_once" | "ran_again";

export function checkRetry(call: SentCall, capturedNonces: ReadonlySet<string>): RetryOutcome {
  const retry = call.retry!;
  const what = `retry of ${call.nonce} (${call.skill.slug}, first ${call.state}${call.response ? ` ${call.response.status}` : ""})`;
  const fails = call.skill.backendPath === "/fail";
  // A 503 (a database or Redis that did not answer: ./pause.ts) gives its key up, like a call lost with the gateway.
  const first = call.response?.status === 503 ? undefined : call.response;
  if (first?.status === 200) {
    expect({ status: retry.status, replayed: retry.replayed, body: retry.body }, what).to.deep.equal({
      status: 200,
      replayed: true,
      body: first.body,
    });
    return "replayed_answer";
  }
  if (first) {
    expect({ status: retry.status, replayed: retry.replayed }, what).to.deep.equal({ status: first.status, replayed: false });
    return "ran_again";
  }
  // The first attempt was lost with the gateway, or answered 503: replayed if its capture made it to disk, run afresh if not.
  if (capturedNonces.has(call.nonce)) {
    expect({ status: retry.status, replayed: retry.replayed }, what).to.deep.equal({ status: 200, replayed: true });
    expect((JSON.parse(retry.body) as { data: { nonce: string } }).data.nonce, what).to.equal(call.nonce);
    expect(chargeUnknown(call), `${what}: replayed a capture its first answer said was not charged`).to.equal(true);
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
export async function capturedNonces(db: Sql, nonces: Map<string, string>): Promise<Set<string>> {
  const ids = await db.all<{ id: string }>("SELECT c.id FROM calls c JOIN holds h ON h.id = c.hold_id WHERE h.status = 'captured'");
  return new Set(ids.map(({ id }) => nonces.get(id)!).filter((n) => n !== undefined));
}
