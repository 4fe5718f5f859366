import http from "node:http";
import type { AddressInfo } from "node:net";
import {
  CALL_ID_HEADER,
  IDEMPOTENCY_KEY_HEADER,
  SIGNATURE_HEADER,
  SIGNATURE_V2_HEADER,
  TIMESTAMP_HEADER,
  verifyCall,
} from "../gateway/signature";

/**
 * The demo skill backend that `npm start` runs beside the gateway: a seller's server as a
 * seller would write it, checking every call's HMAC signature before doing any work.
 *
 *   POST /echo       returns its input
 *   POST /strict-echo returns its input too; its skill promises (output_schema) an answer with a string `text`,
 *                    so an input without one makes it break that promise (502 skill_bad_output, not charged)
 *   POST /uppercase  { text } → { text: TEXT }
 *   POST /slow       { ms } → waits, then answers (to see a timeout)
 *   POST /broken     always answers 500 (to see that a failed call is not charged)
 */
export interface DemoBackend {
  url: string;
  /** Tells the backend the signing secret of one of its routes (set when the skill is registered). */
  setSecret(path: string, secret: string): void;
  close(): Promise<void>;
}

type Handler = (input: Record<string, unknown>) => Promise<[number, unknown]> | [number, unknown];

const ROUTES: Record<string, Handler> = {
  "/echo": (input) => [200, input],
  // A route of its own (each route has its skill's signing secret), doing what /echo does.
  "/strict-echo": (input) => [200, input],
  "/uppercase": (input) =>
    typeof input.text === "string" ? [200, { text: input.text.toUpperCase() }] : [422, { error: "text must be a string" }],
  "/slow": async (input) => {
    const ms = Math.min(Math.max(Number(input.ms) || 0, 0), 30_000);
    await new Promise((resolve) => setTimeout(resolve, ms));
    return [200, { waited_ms: ms }];
  },
  "/broken": () => [500, { error: "the demo backend always fails here" }],
};

export async function startDemoBackend(port = 0, host = "127.0.0.1"): Promise<DemoBackend> {
  const secrets = new Map<string, string>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", async () => {
      const reply = (status: number, body: unknown) => {
        res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
      };
      const path = (req.url ?? "/").split("?")[0];
      const handler = ROUTES[path];
      if (req.method !== "POST" || !handler) return reply(404, { error: "no such skill route" });
      const raw = Buffer.concat(chunks).toString("utf8");
      const secret = secrets.get(path);
      const genuine =
        secret !== undefined &&
        verifyCall(
          secret,
          {
            callId: req.headers[CALL_ID_HEADER] as string | undefined,
            timestamp: req.headers[TIMESTAMP_HEADER] as string | undefined,
            signature: req.headers[SIGNATURE_HEADER] as string | undefined,
            idempotencyKey: req.headers[IDEMPOTENCY_KEY_HEADER] as string | undefined,
            signatureV2: req.headers[SIGNATURE_V2_HEADER] as string | undefined,
          },
          raw,
        );
      if (!genuine) return reply(401, { error: "call is not signed by the gateway" });
      let input: Record<string, unknown>;
      try {
        input = JSON.parse(raw);
      } catch {
        return reply(400, { error: "body is not JSON" });
      }
      const [status, body] = await handler(input);
      reply(status, body);
    });
  });
  await new Promise<void>((resolve) => server.listen(port, host, resolve));
  const { port: actual } = server.address() as AddressInfo;
  return {
    url: `http://${host}:${actual}`,
    setSecret: (path, secret) => void secrets.set(path, secret),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
