import net from "node:net";
import type { RawRequest } from "./cases";

/** One HTTP response read off a socket. */
export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

export interface RawOutcome {
  responses: RawResponse[];
  /** The server closed the connection (after its answers, or instead of them). */
  closedByServer: boolean;
  /** No answer, and no close, before the deadline: the signature of a hang. */
  timedOut: boolean;
  /** A socket error the client saw (a reset), if any. */
  error?: string;
}

const HEADER_END = Buffer.from("\r\n\r\n");

/**
 * Writes a raw request plan to the gateway and reads back as many answers as requests were
 * sent (pipelining), skipping interim 1xx answers. Resolves when all answers are in, the
 * server closes, the client aborts (the plan says so), or the deadline passes.
 */
export function rawExchange(port: number, plan: RawRequest, deadlineMs: number): Promise<RawOutcome> {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host: "127.0.0.1" });
    const responses: RawResponse[] = [];
    let buffer = Buffer.alloc(0);
    let done = false;
    let error: string | undefined;
    let sawEnd = false;

    const finish = (outcome: Partial<RawOutcome>) => {
      if (done) return;
      done = true;
      clearTimeout(deadline);
      socket.destroy();
      resolve({ responses, closedByServer: false, timedOut: false, error, ...outcome });
    };
    const deadline = setTimeout(() => finish({ timedOut: true }), deadlineMs);

    const parse = () => {
      for (;;) {
        const response = parseOne(buffer, plan.methods[responses.length] ?? "GET", sawEnd);
        if (!response) return;
        buffer = buffer.subarray(response.consumed);
        if (response.status >= 100 && response.status < 200 && response.status !== 101) continue;
        responses.push({ status: response.status, headers: response.headers, body: response.body });
        if (responses.length >= plan.methods.length) return finish({});
      }
    };

    socket.on("data", (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk]);
      parse();
    });
    socket.on("end", () => {
      sawEnd = true;
      parse();
      finish({ closedByServer: true });
    });
    socket.on("close", () => finish({ closedByServer: true }));
    socket.on("error", (e: NodeJS.ErrnoException) => {
      error = e.code ?? e.message;
    });

    socket.on("connect", async () => {
      for (const segment of plan.segments) {
        if (segment.delayMs > 0) await new Promise((r) => setTimeout(r, segment.delayMs));
        if (done || socket.destroyed) return;
        if (segment.bytes.length > 0) socket.write(segment.bytes);
      }
      if (plan.abort) {
        // Give the bytes a moment to leave, then hang up mid-request.
        setTimeout(() => finish({}), 5);
      }
    });
  });
}

interface Parsed extends RawResponse {
  consumed: number;
}

/** Parses one response from the front of `data`, or returns undefined if it is not all there yet. */
function parseOne(data: Buffer, method: string, atEnd: boolean): Parsed | undefined {
  const headEnd = data.indexOf(HEADER_END);
  if (headEnd === -1) return undefined;
  const lines = data.subarray(0, headEnd).toString("latin1").split("\r\n");
  const status = Number(/^HTTP\/\d\.\d (\d{3})/.exec(lines[0])?.[1] ?? 0);
  const headers: Record<string, string> = {};
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(":");
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const start = headEnd + HEADER_END.length;
  if (method === "HEAD" || status === 204 || status === 304 || (status >= 100 && status < 200)) {
    return { status, headers, body: Buffer.alloc(0), consumed: start };
  }
  if (/chunked/i.test(headers["transfer-encoding"] ?? "")) {
    const chunks: Buffer[] = [];
    let at = start;
    for (;;) {
      const lineEnd = data.indexOf("\r\n", at);
      if (lineEnd === -1) return undefined;
      const size = parseInt(data.subarray(at, lineEnd).toString("latin1"), 16);
      if (!Number.isFinite(size)) return { status, headers, body: Buffer.concat(chunks), consumed: data.length };
      const dataStart = lineEnd + 2;
      if (size === 0) {
        const trailerEnd = data.indexOf(HEADER_END, lineEnd);
        if (trailerEnd === -1 && data.length < dataStart + 2) return undefined;
        return { status, headers, body: Buffer.concat(chunks), consumed: trailerEnd === -1 ? dataStart + 2 : trailerEnd + 4 };
      }
      if (data.length < dataStart + size + 2) return undefined;
      chunks.push(data.subarray(dataStart, dataStart + size));
      at = dataStart + size + 2;
    }
  }
  if (headers["content-length"] !== undefined) {
    const length = Number(headers["content-length"]);
    if (data.length < start + length) return undefined;
    return { status, headers, body: data.subarray(start, start + length), consumed: start + length };
  }
  // No length: the body runs to the end of the connection.
  if (!atEnd) return undefined;
  return { status, headers, body: data.subarray(start), consumed: data.length };
}
