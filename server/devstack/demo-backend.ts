import http from "node:http";
import type { AddressInfo } from "node:net";
import {
  CALL_ID_HEADER,
  CHARGE_HEADER,
  CHARGE_SIGNATURE_HEADER,
  IDEMPOTENCY_KEY_HEADER,
  SIGNATURE_HEADER,
  SIGNATURE_V2_HEADER,
  TIMESTAMP_HEADER,
  signCharge,
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
 *   POST /wordcount  { text } → { words }; usage-priced: it reports (signed, signCharge) $0.0001 a word, at most
 *                    $0.01, its skill's max_price, in X-Skill-Charge
 *   POST /slow       { ms } → waits, then answers (to see a timeout)
 *   POST /broken     always answers 500 (to see that a failed call is not charged)
 */
export interface DemoBackend {
  url: string;
  /** Tells the backend the signing secret of one of its routes (set when the skill is registered); resolves once it holds it. */
  setSecret(path: string, secret: string): Promise<void>;
  close(): Promise<void>;
}

/** A route's answer: its status, its body, and for a usage-priced skill what the call came to (USD, e.g. "0.0042"). */
type Handler = (input: Record<string, unknown>) => Promise<[number, unknown, string?]> | [number, unknown, string?];

/** What wordcount charges a word, and the most it charges a call (its skill's max_price), in micro-USD. */
export const WORDCOUNT_MICROS_PER_WORD = 100n;
export const WORDCOUNT_MAX_MICROS = 10_000n;

/** Base units as the decimal X-Skill-Charge wants ("0.0042"), with integers only. */
function microsText(micros: bigint): string {
  const frac = (micros % 1_000_000n).toString().padStart(6, "0").replace(/0+$/, "");
  return `${micros / 1_000_000n}${frac ? `.${frac}` : ""}`;
}

const ROUTES: Record<string, Handler> = {
  "/echo": (input) => [200, input],
  // A route of its own (each route has its skill's signing secret), doing what /echo does.
  "/strict-echo": (input) => [200, input],
  "/uppercase": (input) =>
    typeof input.text === "string" ? [200, { text: input.text.toUpperCase() }] : [422, { error: "text must be a string" }],
  "/wordcount": (input) => {
    if (typeof input.text !== "string") return [422, { error: "text must be a string" }];
    const words = input.text.split(/\s+/).filter((word) => word.length > 0).length;
    const micros = BigInt(words) * WORDCOUNT_MICROS_PER_WORD;
    return [200, { words }, microsText(micros < WORDCOUNT_MAX_MICROS ? micros : WORDCOUNT_MAX_MICROS)];
  },
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
      if (input === null || typeof input !== "object" || Array.isArray(input)) return reply(422, { error: "input must be a JSON object" });
      let answer: [number, unknown, string?];
      try {
        answer = await handler(input);
      } catch (error) {
        // A route's own failure is its call's 500, never the end of the backend (on npm start, a thread of its own).
        return reply(500, { error: `the demo backend failed: ${error instanceof Error ? error.message : String(error)}` });
      }
      const [status, body, charge] = answer;
      // A usage-priced route signs what the call came to with its skill's secret, over the call's id.
      if (charge !== undefined) {
        res.setHeader(CHARGE_HEADER, charge);
        res.setHeader(CHARGE_SIGNATURE_HEADER, signCharge(secret, req.headers[CALL_ID_HEADER] as string, charge));
      }
      reply(status, body);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const { port: actual } = server.address() as AddressInfo;
  return {
    url: `http://${host}:${actual}`,
    setSecret: async (path, secret) => void secrets.set(path, secret),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
