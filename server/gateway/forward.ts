import { EventEmitter } from "node:events";
import { Pool } from "undici";
import { type BackendOwner, type EgressPolicy, EgressRefused } from "./egress";
import type { Skill } from "../catalog/skills";
import {
  CALL_ID_HEADER,
  CHARGE_HEADER,
  CHARGE_SIGNATURE_HEADER,
  IDEMPOTENCY_KEY_HEADER,
  SIGNATURE_HEADER,
  SIGNATURE_V2_HEADER,
  TIMESTAMP_HEADER,
  signCall,
  signCallV2,
} from "./signature";

/**
 * What forwarding needs of a skill: where its backend is, whether the operator registered it (only then may that be
 * an allowlisted origin), the secret calls are signed with, and how long one may take.
 */
export type ForwardTarget = Pick<Skill, "backendUrl" | "operatorListed" | "timeoutMs" | "signingSecret">;

export type ForwardFailure = "backend_error" | "timeout" | "unreachable" | "invalid_json" | "response_too_large" | "forbidden";

/**
 * What a 2xx answer said it cost (a usage-priced skill's X-Skill-Charge and X-Skill-Charge-Signature, as sent; a header
 * sent twice is kept as its values joined by ", ", which no charge or signature matches). Absent without either header.
 */
export interface ReportedCharge {
  charge?: string;
  signature?: string;
}

export type ForwardResult =
  | { kind: "ok"; status: number; data: unknown; reported?: ReportedCharge }
  /** The backend answered 4xx: the caller's input was refused. Not charged. */
  | { kind: "rejected"; status: number; message: string }
  /** The backend failed (5xx, timeout, refused, not JSON, too large) or the egress policy refused it. Not charged. */
  | { kind: "failed"; reason: ForwardFailure; status?: number; message: string };

export interface ForwarderOptions {
  maxResponseBytes: number;
  /** Sockets kept per backend origin. */
  connectionsPerOrigin?: number;
  /** Which backends may be reached (./egress.ts); every connection goes through it. */
  egress: EgressPolicy;
}

/**
 * Forwards calls to skill backends over keep-alive undici pools, one per backend origin:
 * the input is POSTed as JSON with a call id, a timestamp, the call's idempotency key and
 * HMAC-SHA256 signatures (v1, and v2 over the idempotency key too: see ./signature.ts). The answer is classified into ok / rejected / failed; it never
 * throws for a backend's fault.
 *
 * The skill's timeout bounds the whole exchange, headers and body, with one timer that
 * aborts the request through an EventEmitter, which undici accepts as a signal. (An
 * AbortSignal per call does the same but costs a fifth of the forwarder's throughput, as
 * does resolving each URL through an undici Agent instead of holding the origin's Pool;
 * undici's own headers and body timeouts are cheap but only accurate to about a second.)
 */
export class Forwarder {
  private readonly pools = new Map<string, Pool>();
  private readonly targets = new Map<string, Target>();

  constructor(private readonly options: ForwarderOptions) {}

  /**
   * `idempotencyKey` is the same on every attempt of one call of the caller's (./signature.ts forwardedIdempotencyKey);
   * the call id when the caller sent none.
   */
  async forward(skill: ForwardTarget, callId: string, input: unknown, idempotencyKey: string = callId): Promise<ForwardResult> {
    const body = JSON.stringify(input);
    const timestampSec = Math.floor(Date.now() / 1000);
    const target = this.target(skill.backendUrl, skill.operatorListed ? "operator" : "seller");
    if (!target.ok) return { kind: "failed", reason: "forbidden", message: target.message };
    const { pool, path } = target;
    const abort = new EventEmitter();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      abort.emit("abort");
    }, skill.timeoutMs);
    try {
      return await this.exchange(pool, path, skill, { callId, idempotencyKey, timestampSec }, body, abort);
    } catch (error) {
      if (isEgressRefusal(error)) return { kind: "failed", reason: "forbidden", message: (error as Error).message };
      if (timedOut) return { kind: "failed", reason: "timeout", message: `skill backend did not answer within ${skill.timeoutMs} ms` };
      return { kind: "failed", reason: "unreachable", message: "skill backend could not be reached" };
    } finally {
      clearTimeout(timer);
    }
  }

  /** One request and its answer; throws on a transport failure or an abort. */
  private async exchange(
    pool: Pool,
    path: string,
    skill: ForwardTarget,
    { callId, idempotencyKey, timestampSec }: { callId: string; idempotencyKey: string; timestampSec: number },
    body: string,
    abort: EventEmitter,
  ): Promise<ForwardResult> {
    const response = await pool.request({
      path,
      method: "POST",
      signal: abort,
      // Our timer decides; these only stop undici's defaults (300 s) from applying first.
      headersTimeout: 0,
      bodyTimeout: 0,
      headers: {
        "content-type": "application/json",
        accept: "application/json",
        [CALL_ID_HEADER]: callId,
        [TIMESTAMP_HEADER]: String(timestampSec),
        [SIGNATURE_HEADER]: signCall(skill.signingSecret, callId, timestampSec, body),
        [IDEMPOTENCY_KEY_HEADER]: idempotencyKey,
        [SIGNATURE_V2_HEADER]: signCallV2(skill.signingSecret, callId, timestampSec, idempotencyKey, body),
      },
      body,
    });

    const { statusCode } = response;
    let text: string;
    try {
      text = await readCapped(response.body, this.options.maxResponseBytes, response.headers["content-length"]);
    } catch (error) {
      if (error instanceof ResponseTooLarge) {
        return {
          kind: "failed",
          reason: "response_too_large",
          status: statusCode,
          message: `skill response exceeded ${this.options.maxResponseBytes} bytes`,
        };
      }
      throw error;
    }

    if (statusCode >= 500 || statusCode < 200 || (statusCode >= 300 && statusCode < 400)) {
      return { kind: "failed", reason: "backend_error", status: statusCode, message: `skill backend answered HTTP ${statusCode}` };
    }
    let parsed: unknown;
    try {
      parsed = text.length === 0 ? undefined : JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    if (statusCode >= 400) {
      return { kind: "rejected", status: statusCode, message: rejectionMessage(parsed, statusCode) };
    }
    if (parsed === undefined) {
      return { kind: "failed", reason: "invalid_json", status: statusCode, message: "skill backend did not answer with JSON" };
    }
    const charge = headerText(response.headers[CHARGE_HEADER]);
    const signature = headerText(response.headers[CHARGE_SIGNATURE_HEADER]);
    if (charge === undefined && signature === undefined) return { kind: "ok", status: statusCode, data: parsed };
    return { kind: "ok", status: statusCode, data: parsed, reported: { charge, signature } };
  }

  async close(): Promise<void> {
    await Promise.all([...this.pools.values()].map((pool) => pool.close()));
    this.pools.clear();
    this.targets.clear();
  }

  /**
   * The pool and request path of a backend URL as `owner`'s skill reaches it, parsed and checked against the
   * egress policy once (the URL's shape cannot change; its addresses are checked on every connection). An origin
   * the operator allowlisted gets a pool of its own, free of the address checks, used only by the operator's
   * skills: a seller's skill on that origin goes through a checked pool, whose connections are refused.
   */
  private target(backendUrl: string, owner: BackendOwner): Target {
    const key = `${owner} ${backendUrl}`;
    let target = this.targets.get(key);
    if (!target) {
      const checked = this.options.egress.checkUrl(backendUrl, owner);
      if (!checked.ok) {
        target = { ok: false, message: checked.message };
      } else {
        const { url, allowlisted } = checked;
        const poolKey = allowlisted ? `allowlisted ${url.origin}` : url.origin;
        let pool = this.pools.get(poolKey);
        if (!pool) {
          pool = new Pool(url.origin, {
            connections: this.options.connectionsPerOrigin ?? 256,
            keepAliveTimeout: 30_000,
            keepAliveMaxTimeout: 600_000,
            connect: this.options.egress.connector(url.origin, owner),
          });
          this.pools.set(poolKey, pool);
        }
        target = { ok: true, pool, path: url.pathname + url.search };
      }
      this.targets.set(key, target);
    }
    return target;
  }
}

type Target = { ok: true; pool: Pool; path: string } | { ok: false; message: string };

/** Whether a failed request was refused by the egress policy (undici may wrap the connector's error). */
function isEgressRefusal(error: unknown): boolean {
  for (let e = error, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof EgressRefused) return true;
  }
  return false;
}

// Internal error, plain on purpose: it never leaves the forwarder, which reports it as skill_invalid_response.
class ResponseTooLarge extends Error {}

/** Reads the answer's body, refusing one over `maxBytes` without buffering it. */
async function readCapped(body: AsyncIterable<Buffer> & { destroy(): void }, maxBytes: number, contentLength: unknown): Promise<string> {
  if (typeof contentLength === "string" && Number(contentLength) > maxBytes) {
    body.destroy();
    throw new ResponseTooLarge();
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.length;
    if (size > maxBytes) {
      body.destroy();
      throw new ResponseTooLarge();
    }
    chunks.push(chunk);
  }
  return chunks.length === 1 ? chunks[0].toString("utf8") : Buffer.concat(chunks).toString("utf8");
}

/** A response header's value as one string: a repeated one joined (which then matches no charge and no signature). */
function headerText(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(", ") : value;
}

function rejectionMessage(parsed: unknown, status: number): string {
  if (parsed && typeof parsed === "object") {
    const { error, message } = parsed as { error?: unknown; message?: unknown };
    if (typeof error === "string" && error) return error;
    if (typeof message === "string" && message) return message;
  }
  return `skill rejected the input (HTTP ${status})`;
}
