import { Agent, request } from "undici";
import type { Skill } from "./skills";
import { CALL_ID_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, signCall } from "./signature";

export type ForwardFailure = "backend_error" | "timeout" | "unreachable" | "invalid_json" | "response_too_large";

export type ForwardResult =
  | { kind: "ok"; status: number; data: unknown }
  /** The backend answered 4xx: the caller's input was refused. Not charged. */
  | { kind: "rejected"; status: number; message: string }
  /** The backend failed (5xx, timeout, refused, not JSON, too large). Not charged. */
  | { kind: "failed"; reason: ForwardFailure; status?: number; message: string };

export interface ForwarderOptions {
  maxResponseBytes: number;
  /** Sockets kept per backend origin. */
  connectionsPerOrigin?: number;
}

/**
 * Forwards calls to skill backends over a keep-alive undici pool: the input is POSTed as
 * JSON with a call id, a timestamp and an HMAC-SHA256 signature (see ./signature.ts). The
 * answer is classified into ok / rejected / failed; it never throws for a backend's fault.
 */
export class Forwarder {
  private readonly agent: Agent;

  constructor(private readonly options: ForwarderOptions) {
    this.agent = new Agent({
      keepAliveTimeout: 30_000,
      keepAliveMaxTimeout: 600_000,
      connections: options.connectionsPerOrigin ?? 256,
    });
  }

  async forward(skill: Skill, callId: string, input: unknown): Promise<ForwardResult> {
    const body = JSON.stringify(input);
    const timestampSec = Math.floor(Date.now() / 1000);
    const signal = AbortSignal.timeout(skill.timeoutMs);
    let response;
    try {
      response = await request(skill.backendUrl, {
        method: "POST",
        dispatcher: this.agent,
        signal,
        headersTimeout: skill.timeoutMs,
        bodyTimeout: skill.timeoutMs,
        headers: {
          "content-type": "application/json",
          accept: "application/json",
          [CALL_ID_HEADER]: callId,
          [TIMESTAMP_HEADER]: String(timestampSec),
          [SIGNATURE_HEADER]: signCall(skill.signingSecret, callId, timestampSec, body),
        },
        body,
      });
    } catch (error) {
      return classifyTransportError(error, skill);
    }

    const { statusCode } = response;
    let text: string;
    try {
      text = await readCapped(response.body, this.options.maxResponseBytes, response.headers["content-length"]);
    } catch (error) {
      if (error instanceof ResponseTooLarge) {
        return { kind: "failed", reason: "response_too_large", status: statusCode, message: `skill response exceeded ${this.options.maxResponseBytes} bytes` };
      }
      return classifyTransportError(error, skill);
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
    return { kind: "ok", status: statusCode, data: parsed };
  }

  async close(): Promise<void> {
    await this.agent.close();
  }
}

class ResponseTooLarge extends Error {}

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

function rejectionMessage(parsed: unknown, status: number): string {
  if (parsed && typeof parsed === "object") {
    const { error, message } = parsed as { error?: unknown; message?: unknown };
    if (typeof error === "string" && error) return error;
    if (typeof message === "string" && message) return message;
  }
  return `skill rejected the input (HTTP ${status})`;
}

function classifyTransportError(error: unknown, skill: Skill): ForwardResult {
  const err = error as { name?: string; code?: string };
  const timedOut =
    err.name === "TimeoutError" ||
    err.code === "UND_ERR_HEADERS_TIMEOUT" ||
    err.code === "UND_ERR_BODY_TIMEOUT" ||
    err.code === "UND_ERR_CONNECT_TIMEOUT" ||
    err.name === "AbortError";
  if (timedOut) return { kind: "failed", reason: "timeout", message: `skill backend did not answer within ${skill.timeoutMs} ms` };
  return { kind: "failed", reason: "unreachable", message: "skill backend could not be reached" };
}
