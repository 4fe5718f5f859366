/**
 * What a "try it" call came back with, in the terms an agent sees it: the data or the error,
 * what it cost, how long it took, and the call's id. Pure: no DOM, so the unit tests pin it.
 *
 * POST /v1/skills/:slug/try answers exactly what POST /v1/skills/:slug/call would (docs/api.md
 * §2): `{success: true, data, metadata: {skillId, cost, responseTime}}` or `{success: false,
 * error, code, metadata?}`, and the call's id in the X-Call-Id header.
 */

export interface TryAnswer {
  ok: boolean;
  status: number;
  /** The skill's answer (success only). */
  data?: unknown;
  /** The error in the gateway's words (failure only). */
  message?: string;
  /** The error's snake_case code, when the body has one. */
  code?: string;
  /** USD charged, as the answer states it; 0 for an answer that says nothing was charged or states no cost. */
  costUsd: number;
  /** How long the call took, in milliseconds, as the gateway measured it; undefined when it does not say. */
  latencyMs?: number;
  /** The call's id (X-Call-Id), when the call got that far. */
  callId?: string;
}

const record = (value: unknown): Record<string, unknown> | undefined =>
  typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;

const finite = (value: unknown): number | undefined => (typeof value === "number" && Number.isFinite(value) ? value : undefined);

/** Reads one answer of the try endpoint: its status, parsed body and X-Call-Id header. */
export function readTryAnswer(status: number, body: unknown, callId: string | null | undefined): TryAnswer {
  const envelope = record(body);
  const metadata = record(envelope?.metadata);
  const ok = status >= 200 && status < 300 && envelope?.success === true;
  const answer: TryAnswer = {
    ok,
    status,
    costUsd: ok ? (finite(metadata?.cost) ?? 0) : 0,
    latencyMs: finite(metadata?.responseTime),
    callId: callId || undefined,
  };
  if (ok) answer.data = envelope?.data;
  else {
    answer.message =
      typeof envelope?.error === "string" && envelope.error !== ""
        ? envelope.error
        : typeof body === "string" && body.trim() !== ""
          ? `The gateway answered HTTP ${status}: ${body.trim()}`
          : `The gateway answered HTTP ${status} with no explanation.`;
    if (typeof envelope?.code === "string") answer.code = envelope.code;
  }
  return answer;
}

/** The data as an agent's program would print it: text as is, anything else as indented JSON. */
export function dataText(data: unknown): string {
  if (typeof data === "string") return data;
  if (data === undefined) return "(no data)";
  return JSON.stringify(data, null, 2);
}

/** The elapsed time of a call in flight, for its progress line: "0.4 s", "12.3 s". */
export function formatElapsed(ms: number): string {
  return `${(Math.max(0, ms) / 1000).toFixed(1)} s`;
}
