import http from "node:http";
import type { AddressInfo } from "node:net";

/**
 * A real skill backend for tests, on a free port. Each route is one behaviour a seller's
 * server can show: answer, refuse, fail, hang, lie about JSON, or answer too much.
 */
export interface TestBackend {
  url: string;
  /** Requests received per path. */
  hits: Map<string, number>;
  /**
   * Every request received, in order: its path, the gateway's call id (x-skill-call-id), the call's idempotency key
   * (x-skill-idempotency-key) and its body.
   */
  received: ReceivedRequest[];
  /** Resolves when the next request reaches `path`. */
  nextRequest(path: string): Promise<void>;
  /**
   * Answers every request held at `/gated` (echoing its body), and every later one at once. Until
   * then `/gated` holds its requests: a test decides when calls in flight finish, whatever the load.
   */
  openGate(): void;
  /**
   * How `/delay` waits its input's `delay_ms` before answering: a real timer by default. A test may put a virtual
   * clock's advance here, so that a call's measured latency is exactly what it asked for.
   */
  wait: (ms: number) => Promise<void>;
  close(): Promise<void>;
}

export interface ReceivedRequest {
  path: string;
  callId: string | undefined;
  idempotencyKey: string | undefined;
  body: string;
}

type Route = (body: string, req: http.IncomingMessage, res: http.ServerResponse, backend: Pick<TestBackend, "wait">) => void;

const json = (res: http.ServerResponse, status: number, body: unknown) =>
  res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));

const ROUTES: Record<string, Route> = {
  "/echo": (body, _req, res) => json(res, 200, JSON.parse(body || "{}")),
  "/reject": (_b, _req, res) => json(res, 422, { error: "field x is required" }),
  "/fail": (_b, _req, res) => json(res, 500, { error: "database exploded" }),
  "/unavailable": (_b, _req, res) => json(res, 503, { error: "try later" }),
  "/slow": (body, _req, res) => void setTimeout(() => json(res, 200, JSON.parse(body || "{}")), 100),
  // Answers after the input's `delay_ms` with its `status` (200 by default: the input echoed; else an error body): a
  // backend whose latency and outcome each call chooses.
  "/delay": (body, _req, res, backend) => {
    const input = JSON.parse(body || "{}") as { delay_ms?: number; status?: number };
    const status = input.status ?? 200;
    void backend.wait(input.delay_ms ?? 0).then(() => json(res, status, status < 300 ? input : { error: `answered ${status}` }));
  },
  "/hang": () => {
    /* never answers */
  },
  "/notjson": (_b, _req, res) => res.writeHead(200, { "content-type": "text/html" }).end("<html>hi</html>"),
  "/big": (_b, _req, res) => json(res, 200, { blob: "x".repeat(64 * 1024) }),
  // Valid JSON that parses but is nested too deep to serialize again.
  "/deep": (_b, _req, res) => res.writeHead(200, { "content-type": "application/json" }).end("[".repeat(200_000) + "]".repeat(200_000)),
};

export async function startTestBackend(): Promise<TestBackend> {
  const hits = new Map<string, number>();
  const received: ReceivedRequest[] = [];
  const waiters = new Map<string, Array<() => void>>();
  let gateOpen = false;
  const gated: Array<() => void> = [];
  // The backend's own settings, which routes read while they answer (the rest is added once it listens).
  const backend: Pick<TestBackend, "wait"> = { wait: (ms) => new Promise((resolve) => setTimeout(resolve, ms)) };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const path = (req.url ?? "/").split("?")[0];
      const body = Buffer.concat(chunks).toString("utf8");
      hits.set(path, (hits.get(path) ?? 0) + 1);
      const callId = req.headers["x-skill-call-id"];
      const idempotencyKey = req.headers["x-skill-idempotency-key"];
      received.push({
        path,
        callId: typeof callId === "string" ? callId : undefined,
        idempotencyKey: typeof idempotencyKey === "string" ? idempotencyKey : undefined,
        body,
      });
      for (const w of waiters.get(path) ?? []) w();
      waiters.delete(path);
      if (path === "/gated") {
        const answer = () => json(res, 200, JSON.parse(body || "{}"));
        return gateOpen ? answer() : void gated.push(answer);
      }
      const route = ROUTES[path];
      if (!route) return json(res, 404, { error: "no route" });
      route(body, req, res, backend);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const rest: Omit<TestBackend, "wait"> = {
    url: `http://127.0.0.1:${port}`,
    hits,
    received,
    openGate: () => {
      gateOpen = true;
      for (const answer of gated.splice(0)) answer();
    },
    nextRequest: (path) => new Promise((resolve) => waiters.set(path, [...(waiters.get(path) ?? []), resolve])),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  return Object.assign(backend, rest);
}
