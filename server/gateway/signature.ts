import { createHash, createHmac, timingSafeEqual } from "node:crypto";

/** Headers the gateway adds to every forwarded call, so a backend can tell the call is genuine. */
export const CALL_ID_HEADER = "x-skill-call-id";
export const TIMESTAMP_HEADER = "x-skill-timestamp";
export const SIGNATURE_HEADER = "x-skill-signature";
/**
 * The call's idempotency key, the same on every attempt of one call of the caller's: a backend that has already done
 * the work for this key (an attempt the gateway gave up on, a time-out) can answer without doing it again.
 */
export const IDEMPOTENCY_KEY_HEADER = "x-skill-idempotency-key";
/** `v2=<hex>`: the signature that also covers the idempotency key (X-Skill-Signature keeps v1, unchanged). */
export const SIGNATURE_V2_HEADER = "x-skill-signature-v2";

/**
 * Signs `<timestamp>.<callId>.<body>` with the skill's secret (HMAC-SHA256, hex, prefixed
 * `v1=`). Binding the timestamp and call id stops a captured request from being replayed
 * later or passed off as another call.
 */
export function signCall(secret: string, callId: string, timestampSec: number, body: string): string {
  return `v1=${createHmac("sha256", secret).update(`${timestampSec}.${callId}.${body}`).digest("hex")}`;
}

/**
 * Signs `v2.<timestamp>.<callId>.<idempotencyKey>.<body>` the same way (prefixed `v2=`): what v1 covers, and the
 * idempotency key, so that no proxy can make two calls look like one or one like two. The `v2.` in front keeps the two
 * versions' texts apart (a v1 text starts with the timestamp's digits).
 */
export function signCallV2(secret: string, callId: string, timestampSec: number, idempotencyKey: string, body: string): string {
  return `v2=${createHmac("sha256", secret).update(`v2.${timestampSec}.${callId}.${idempotencyKey}.${body}`).digest("hex")}`;
}

/**
 * The idempotency key forwarded for a call its caller sent with an `Idempotency-Key`: the same for every attempt of that
 * call (the SDKs send one key on all their retries), different for every account (two callers who pick the same key
 * are two calls), and saying nothing of the caller's own key. A call without one is forwarded with its call id: each
 * such request is a call of its own.
 */
export function forwardedIdempotencyKey(accountId: string, callerKey: string): string {
  return `idem_${createHash("sha256").update(`skill-gateway idempotency\0${accountId}\0${callerKey}`).digest("hex").slice(0, 48)}`;
}

/** The headers of a forwarded call, as a backend reads them (undefined: absent). */
export interface CallHeaders {
  callId?: string;
  timestamp?: string;
  signature?: string;
  idempotencyKey?: string;
  signatureV2?: string;
}

export interface VerifyOptions {
  nowSec?: number;
  /** How far the timestamp may be from now, in seconds; 300 by default. */
  toleranceSec?: number;
  /**
   * Refuse a call without a valid v2 signature and its idempotency key (false by default, so that a backend written
   * for v1 alone keeps working; a backend that deduplicates on the key should set it).
   */
  requireIdempotencyKey?: boolean;
}

/**
 * What a skill backend runs to check a call came from the gateway, within `toleranceSec` of now. With the v2 headers
 * present, the v2 signature must hold (it covers the idempotency key too); an idempotency key without its signature is
 * refused, since anyone could have added it. Without them, the v1 signature decides, unless `requireIdempotencyKey`.
 */
export function verifyCall(secret: string, headers: CallHeaders, body: string, options: VerifyOptions = {}): boolean {
  const { callId, timestamp, signature, idempotencyKey, signatureV2 } = headers;
  if (!callId || !timestamp || !/^\d+$/.test(timestamp)) return false;
  const nowSec = options.nowSec ?? Math.floor(Date.now() / 1000);
  if (Math.abs(nowSec - Number(timestamp)) > (options.toleranceSec ?? 300)) return false;
  if (idempotencyKey !== undefined || signatureV2 !== undefined || options.requireIdempotencyKey) {
    if (!idempotencyKey || !signatureV2) return false;
    return same(signCallV2(secret, callId, Number(timestamp), idempotencyKey, body), signatureV2);
  }
  return signature !== undefined && same(signCall(secret, callId, Number(timestamp), body), signature);
}

function same(expected: string, given: string): boolean {
  const a = Buffer.from(expected);
  const b = Buffer.from(given);
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * The headers a usage-priced skill's backend answers with (issue 27): what the call came to, in USD, as a decimal
 * string of at most 6 decimals (`0.0042`), and its signature, `v1=<hex>` (signCharge).
 */
export const CHARGE_HEADER = "x-skill-charge";
export const CHARGE_SIGNATURE_HEADER = "x-skill-charge-signature";

/** The shape of X-Skill-Charge: whole dollars without a sign or leading zeros, and at most 6 decimals. */
const CHARGE_PATTERN = /^(0|[1-9]\d{0,8})(?:\.(\d{1,6}))?$/;

/**
 * What a usage-priced skill's backend runs to sign what a call came to: `charge` is the X-Skill-Charge header's value
 * exactly as sent (`"0.0042"`: USD, at most 6 decimals, at most the skill's max_price), and the result is the
 * X-Skill-Charge-Signature header's, `v1=` and the hex HMAC-SHA256 of `<callId>.<charge>` under the skill's signing
 * secret, the secret the gateway signs its calls with (signCall). Binding the call id means neither a proxy nor an
 * answer replayed from another call can change what a call is charged.
 *
 *   res.setHeader("X-Skill-Charge", charge);
 *   res.setHeader("X-Skill-Charge-Signature", signCharge(secret, req.headers["x-skill-call-id"], charge));
 */
export function signCharge(secret: string, callId: string, charge: string): string {
  return `v1=${createHmac("sha256", secret).update(`${callId}.${charge}`).digest("hex")}`;
}

/**
 * X-Skill-Charge read as base units (micro-USD), without floats; undefined when it is not a decimal of at most 6
 * decimals (a sign, an exponent, spaces, a comma, leading zeros: all refused).
 */
export function parseCharge(charge: string): bigint | undefined {
  const match = CHARGE_PATTERN.exec(charge);
  if (!match) return undefined;
  return BigInt(match[1]) * 1_000_000n + BigInt((match[2] ?? "").padEnd(6, "0"));
}

/** Whether `signature` is signCharge's for this call and charge (compared in constant time). */
export function verifyCharge(secret: string, callId: string, charge: string, signature: string): boolean {
  return same(signCharge(secret, callId, charge), signature);
}
