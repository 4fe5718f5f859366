import { expect } from "chai";
import { chargeUnknown } from "./checks";
import type { SentCall } from "./traffic";

/** What the pause harness (./pause.ts) asserts of the answers its clients heard around a freeze. */
export type PauseTarget = "postgres" | "redis";

/** The 503 a call gets while each server is frozen. */
export const PAUSE_CODES: Record<PauseTarget, string> = { postgres: "database_unavailable", redis: "limits_unavailable" };

/**
 * The longest any call may take, frozen server or not: a frozen PostgreSQL fails the calls waiting on it within the
 * watch's ping interval and timeout (1.5 s: server/db/postgres/watch.ts), a frozen Redis within its command timeout
 * (1 s: server/replication.ts); the skills answer within 100 ms; the rest is a loaded two-core machine running the
 * chain, the servers, three replicas and the clients.
 */
export const LATENCY_BOUND_MS = 6_000;
/** Messages that would be internal detail in an answer. */
const INTERNALS = /SELECT|INSERT|UPDATE|ECONN|at [\w.]+ \(|\/work\/|postgres:\/\/|redis:\/\//i;

/** The answers of a run, as its figures count them. */
export interface PauseAnswers {
  /** Answers by status, with the code for a 503: "200", "502", "503 database_unavailable". */
  answers: Record<string, number>;
  /** 503s that said `charge_unknown`. */
  chargeUnknown: number;
  /** Calls sent and answered while the server was frozen, and the slowest of them. */
  duringPause: number;
  duringPauseLatencyMaxMs: number;
  /** The slowest call of the whole run. */
  latencyMaxMs: number;
}

/** The first call to `url` sent after `sinceMs` that was answered 200. */
export function firstRecovered(calls: readonly SentCall[], url: string, sinceMs: number): SentCall | undefined {
  let first: SentCall | undefined;
  for (const call of calls) {
    if (call.gatewayUrl !== url || call.sentAtMs < sinceMs || call.response?.status !== 200) continue;
    if (!first || call.answeredAtMs! < first.answeredAtMs!) first = call;
  }
  return first;
}

/**
 * Every call answered within the bound, with the skill's answer or the frozen server's 503 in the spec's envelope;
 * every call sent and answered while it was frozen, with that 503.
 */
export function checkPauseAnswers(calls: readonly SentCall[], target: PauseTarget, pausedAtMs: number, thawedAtMs: number): PauseAnswers {
  const code = PAUSE_CODES[target];
  const answers: Record<string, number> = {};
  const wrong: string[] = [];
  const slow: string[] = [];
  let latencyMaxMs = 0;
  let duringPause = 0;
  let duringPauseLatencyMaxMs = 0;
  for (const call of calls) {
    const latencyMs = call.answeredAtMs! - call.sentAtMs;
    latencyMaxMs = Math.max(latencyMaxMs, latencyMs);
    if (latencyMs > LATENCY_BOUND_MS) slow.push(`${call.nonce} to ${call.gatewayUrl}: ${latencyMs} ms (${call.state})`);
    if (call.state !== "answered") {
      wrong.push(`${call.nonce}: no answer (${call.state})`);
      continue;
    }
    const { status, body } = call.response!;
    const envelope = JSON.parse(body) as { success?: unknown; error?: unknown; code?: unknown; charge_unknown?: unknown };
    const label = status === 503 ? `503 ${String(envelope.code)}` : String(status);
    answers[label] = (answers[label] ?? 0) + 1;
    const expected = call.skill.backendPath === "/fail" ? 502 : 200;
    if (status !== expected && status !== 503) wrong.push(`${call.nonce} ${call.skill.slug}: ${status} ${body.slice(0, 200)}`);
    if (status === 503) {
      const clear =
        envelope.success === false &&
        envelope.code === code &&
        typeof envelope.error === "string" &&
        envelope.error.length > 0 &&
        !INTERNALS.test(envelope.error);
      if (!clear) wrong.push(`${call.nonce}: not a clear 503 ${code}: ${body.slice(0, 300)}`);
      // Only a capture can be left unknown, and Redis is asked before anything is held.
      if (envelope.charge_unknown !== undefined && (target !== "postgres" || envelope.charge_unknown !== true)) {
        wrong.push(`${call.nonce}: charge_unknown on ${body.slice(0, 200)}`);
      }
    }
    if (call.sentAtMs >= pausedAtMs && call.answeredAtMs! <= thawedAtMs) {
      duringPause++;
      duringPauseLatencyMaxMs = Math.max(duringPauseLatencyMaxMs, latencyMs);
      if (status !== 503) wrong.push(`${call.nonce}: sent and answered while ${target} was frozen, with ${status}`);
    }
  }
  expect(wrong, "answers other than the skill's or a clear 503 of the frozen server").to.deep.equal([]);
  expect(slow, `calls answered later than ${LATENCY_BOUND_MS} ms`).to.deep.equal([]);
  expect(duringPause, "calls sent and answered while the server was frozen").to.be.greaterThan(0);
  return {
    answers,
    chargeUnknown: calls.filter((c) => c.response?.status === 503 && chargeUnknown(c)).length,
    duringPause,
    duringPauseLatencyMaxMs,
    latencyMaxMs,
  };
}
