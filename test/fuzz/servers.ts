import http from "node:http";
import type { AddressInfo, Socket } from "node:net";

/**
 * The fuzz run's two servers on loopback: a skill backend that misbehaves in every way a
 * seller's server can (and never throws, whatever it is sent), and a canary standing for
 * an internal service (a chain node, a metadata endpoint) that the gateway must never reach.
 */

export interface FuzzServer {
  url: string;
  port: number;
  close(): Promise<void>;
}

const send = (res: http.ServerResponse, status: number, body: string | Buffer, type = "application/json") => {
  res.writeHead(status, { "content-type": type, "content-length": Buffer.byteLength(body) }).end(body);
};

/** Routes of the fuzz backend, by path: each is one behaviour. */
const BEHAVIOURS: Record<string, (body: Buffer, req: http.IncomingMessage, res: http.ServerResponse) => void> = {
  // The body as sent, byte for byte: whatever the gateway forwards comes back.
  "/echo": (body, _req, res) => send(res, 200, body.length > 0 ? body : "{}"),
  "/const": (_b, _req, res) => send(res, 200, '{"ok":true}'),
  "/status/500": (_b, _req, res) => send(res, 500, '{"error":"boom"}'),
  "/status/502": (_b, _req, res) => send(res, 502, "<html>bad gateway</html>", "text/html"),
  "/status/503": (_b, _req, res) => send(res, 503, '{"error":"later"}'),
  "/status/404": (_b, _req, res) => send(res, 404, '{"message":"no such thing"}'),
  "/status/422": (_b, _req, res) => send(res, 422, `{"error":${JSON.stringify(`\u0000<script>${"e".repeat(10_000)}`)}}`),
  "/status/301": (_b, _req, res) => res.writeHead(301, { location: "http://169.254.169.254/" }).end(),
  "/status/204": (_b, _req, res) => res.writeHead(204).end(),
  "/garbage": (_b, _req, res) => send(res, 200, '{"unterminated": [1, 2'),
  "/html": (_b, _req, res) => send(res, 200, "<html>hello</html>", "text/html"),
  "/empty": (_b, _req, res) => send(res, 200, ""),
  "/null": (_b, _req, res) => send(res, 200, "null"),
  "/proto": (_b, _req, res) => send(res, 200, '{"__proto__":{"polluted":true},"constructor":{"prototype":{"polluted":true}},"toJSON":1}'),
  "/bad-utf8": (_b, _req, res) =>
    send(res, 200, Buffer.concat([Buffer.from('{"s":"'), Buffer.from([0xff, 0xfe, 0xed, 0xa0, 0x80]), Buffer.from('"}')])),
  "/lone-surrogate": (_b, _req, res) => send(res, 200, '{"s":"\\ud800\\udfff\\ud800"}'),
  "/huge": (_b, _req, res) => send(res, 200, `{"blob":"${"x".repeat(2 * 1024 * 1024)}"}`),
  "/huge-chunked": (_b, _req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.write('{"blob":"');
    for (let i = 0; i < 40; i++) res.write("y".repeat(64 * 1024));
    res.end('"}');
  },
  "/deep": (_b, _req, res) => send(res, 200, "[".repeat(100_000) + "]".repeat(100_000)),
  "/close": (_b, req) => req.socket.destroy(),
  "/partial": (_b, req, res) => {
    res.writeHead(200, { "content-type": "application/json", "content-length": "100" });
    res.write('{"half":');
    setTimeout(() => req.socket.destroy(), 5);
  },
  "/slow": (body, _req, res) => void setTimeout(() => send(res, 200, body.length > 0 ? body : "{}"), 30),
  "/hang": () => {
    /* never answers: the skill's timeout must */
  },
  "/trickle": (_b, req, res) => {
    // Headers at once, then a byte at a time: a body that never quite ends before the timeout.
    res.writeHead(200, { "content-type": "application/json" });
    res.write("[");
    const timer = setInterval(() => (res.destroyed ? clearInterval(timer) : res.write("1,")), 20);
    req.socket.once("close", () => clearInterval(timer));
  },
};

/** The behaviours, for registering one skill per route. */
export const BACKEND_ROUTES = Object.keys(BEHAVIOURS);

export async function startFuzzBackend(): Promise<FuzzServer> {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("error", () => undefined);
    req.on("end", () => {
      const behaviour = BEHAVIOURS[(req.url ?? "/").split("?")[0]];
      try {
        if (behaviour) behaviour(Buffer.concat(chunks), req, res);
        else send(res, 404, '{"error":"no route"}');
      } catch {
        res.destroy();
      }
    });
  });
  return listen(server, "127.0.0.1");
}

export interface Canary {
  /** Every connection the canary saw, and the first lines of what came over them. */
  hits: string[];
  port: number;
  /** The same port on ::1, when the machine has IPv6 loopback. */
  v6Port?: number;
  close(): Promise<void>;
}

/**
 * Stands for an internal service on loopback that is not an allowed backend. It answers
 * 200 with JSON, as a chain node or a metadata service would, so that a gateway which
 * reaches it would charge for the answer; every connection is counted, request or not.
 */
export async function startCanary(): Promise<Canary> {
  const hits: string[] = [];
  const handler = (req: http.IncomingMessage, res: http.ServerResponse) => {
    hits.push(`${req.method} ${req.url} host=${req.headers.host}`);
    send(res, 200, '{"jsonrpc":"2.0","id":1,"result":"0xcanary"}');
  };
  const onConnection = (socket: Socket) => {
    hits.push(`connection from ${socket.remoteAddress}`);
  };
  const v4 = http.createServer(handler).on("connection", onConnection);
  const main = await listen(v4, "127.0.0.1");
  let v6: FuzzServer | undefined;
  const v6Server = http.createServer(handler).on("connection", onConnection);
  try {
    v6 = await listen(v6Server, "::1", main.port);
  } catch {
    try {
      v6 = await listen(v6Server, "::1", 0);
    } catch {
      v6 = undefined;
    }
  }
  return {
    hits,
    port: main.port,
    v6Port: v6?.port,
    async close() {
      await main.close();
      await v6?.close();
    },
  };
}

function listen(server: http.Server, host: string, port = 0): Promise<FuzzServer> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      const address = (server.address() as AddressInfo).port;
      resolve({
        url: `http://${host.includes(":") ? `[${host}]` : host}:${address}`,
        port: address,
        close: () =>
          new Promise<void>((done) => {
            server.closeAllConnections();
            server.close(() => done());
          }),
      });
    });
  });
}
