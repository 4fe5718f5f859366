import http from "node:http";
import type { AddressInfo } from "node:net";

/** One scripted answer: a status, headers and a body (an object is sent as JSON), or no answer at all. */
export type ScriptedAnswer = { status: number; headers?: Record<string, string>; body?: unknown } | "hang";

export interface ReceivedRequest {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

export interface FakeGateway {
  url: string;
  /** Every request received, in order. */
  received: ReceivedRequest[];
  /** Resolves when the request with this index (0-based) has arrived. */
  arrived(index: number): Promise<void>;
  close(): Promise<void>;
}

/**
 * A stand-in for the gateway on a free loopback port, answering requests in order from a
 * script; a request past the end of the script gets 599, so that an unexpected retry shows.
 */
export async function startFakeGateway(script: ScriptedAnswer[]): Promise<FakeGateway> {
  const received: ReceivedRequest[] = [];
  const waiters = new Map<number, () => void>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const index = received.length;
      received.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers, body: Buffer.concat(chunks).toString("utf8") });
      waiters.get(index)?.();
      const answer = script[index] ?? { status: 599, body: { success: false, error: "the script has no answer for this request" } };
      if (answer === "hang") return;
      const body = typeof answer.body === "string" ? answer.body : JSON.stringify(answer.body ?? {});
      res.writeHead(answer.status, { "content-type": "application/json", ...answer.headers }).end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    arrived: (index) => (received.length > index ? Promise.resolve() : new Promise((resolve) => waiters.set(index, resolve))),
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

/** An address nothing listens on: a port that was free a moment ago and is closed again. */
export async function refusedUrl(): Promise<string> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return `http://127.0.0.1:${port}`;
}

export const ok = (
  data: unknown,
  metadata: Record<string, unknown> = { skill_id: "echo", price_paid: 0.001, response_time_ms: 1.5 },
  headers: Record<string, string> = {},
): ScriptedAnswer => ({
  status: 200,
  headers,
  body: { success: true, data, metadata },
});

export const fail = (status: number, code: string, headers: Record<string, string> = {}): ScriptedAnswer => ({
  status,
  headers,
  body: { success: false, error: `scripted ${code}`, code },
});
