import { createHmac, timingSafeEqual } from "node:crypto";

/** Headers the gateway adds to every forwarded call, so a backend can tell the call is genuine. */
export const CALL_ID_HEADER = "x-skill-call-id";
export const TIMESTAMP_HEADER = "x-skill-timestamp";
export const SIGNATURE_HEADER = "x-skill-signature";

/**
 * Signs `<timestamp>.<callId>.<body>` with the skill's secret (HMAC-SHA256, hex, prefixed
 * `v1=`). Binding the timestamp and call id stops a captured request from being replayed
 * later or passed off as another call.
 */
export function signCall(secret: string, callId: string, timestampSec: number, body: string): string {
  return `v1=${createHmac("sha256", secret).update(`${timestampSec}.${callId}.${body}`).digest("hex")}`;
}

/** What a skill backend runs to check a call came from the gateway, within `toleranceSec` of now. */
export function verifyCall(
  secret: string,
  headers: { callId?: string; timestamp?: string; signature?: string },
  body: string,
  options: { nowSec?: number; toleranceSec?: number } = {},
): boolean {
  const { callId, timestamp, signature } = headers;
  if (!callId || !timestamp || !signature || !/^\d+$/.test(timestamp)) return false;
  const nowSec = options.nowSec ?? Math.floor(Date.now() / 1000);
  if (Math.abs(nowSec - Number(timestamp)) > (options.toleranceSec ?? 300)) return false;
  const expected = Buffer.from(signCall(secret, callId, Number(timestamp), body));
  const given = Buffer.from(signature);
  return expected.length === given.length && timingSafeEqual(expected, given);
}
