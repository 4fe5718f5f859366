import type { z } from "zod";
import { microsToUsd } from "../ledger/money";
import type { Endpoint } from "../gateway/calls-store";
import { currentRequest } from "../ops/request-context";
import type { ErrorCode } from "../errors";
import type { callMetadata as callMetadataView, skillCallMetadata as skillCallMetadataView } from "./contract/call";

export interface CallMeta {
  skillId: string;
  responseTimeMs: number;
  chargedMicros: bigint;
  /** The call's id (X-Call-Id), when the call has a line in the calls log: always on a 200. */
  callId?: string;
}

/**
 * metadata for POST /v1/call (docs/api.md §2.1: snake_case, `call_id`) or POST /v1/skills/:skillId/call (camelCase,
 * `callId`); the call's id only when it has one in the calls log.
 */
export function callMetadata(endpoint: "call", meta: CallMeta): z.input<typeof callMetadataView>;
export function callMetadata(endpoint: Exclude<Endpoint, "call">, meta: CallMeta): z.input<typeof skillCallMetadataView>;
export function callMetadata(endpoint: Endpoint, meta: CallMeta): z.input<typeof callMetadataView> | z.input<typeof skillCallMetadataView>;
export function callMetadata(endpoint: Endpoint, meta: CallMeta): z.input<typeof callMetadataView> | z.input<typeof skillCallMetadataView> {
  const ms = Math.round(meta.responseTimeMs * 100) / 100;
  const usd = microsToUsd(meta.chargedMicros);
  const id = meta.callId;
  // Each shape typed by its contract view (server/http/contract/call.ts), so tsc fails when they drift apart.
  if (endpoint === "call") {
    const answer: z.input<typeof callMetadataView> = { skill_id: meta.skillId, response_time_ms: ms, price_paid: usd };
    if (id !== undefined) answer.call_id = id;
    return answer;
  }
  const answer: z.input<typeof skillCallMetadataView> = { skillId: meta.skillId, cost: usd, responseTime: ms };
  if (id !== undefined) answer.callId = id;
  return answer;
}

export function successEnvelope(endpoint: Endpoint, data: unknown, meta: CallMeta) {
  return { success: true as const, data, metadata: callMetadata(endpoint, meta) };
}

/**
 * The spec's error envelope, `{success: false, error}`, with the code beside it and, inside a
 * request, that request's id (`request_id`, also its X-Request-Id header and in its log lines):
 * the one place every error body gets it, whichever route or the call path built the body.
 */
export function errorEnvelope(code: ErrorCode, message: string, extra: Record<string, unknown> = {}) {
  const request = currentRequest();
  return request
    ? { success: false as const, error: message, code, request_id: request.id, ...extra }
    : { success: false as const, error: message, code, ...extra };
}

/** The envelope of a read endpoint (skills, balance, usage). */
export function dataEnvelope(data: unknown) {
  return { success: true as const, data };
}

/**
 * `{success: true, data}` with `data` typed from the contract's view of it (`view`, a schema of ./contract): tsc
 * refuses a field the view does not declare, a missing one or one of another type, so what a route answers cannot
 * drift from what the contract documents. Nothing more happens at run time (the contract test checks the values).
 */
export function dataEnvelopeOf<View extends z.ZodType>(_view: View, data: z.input<View>) {
  return { success: true as const, data };
}
