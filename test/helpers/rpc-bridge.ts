import http from "node:http";
import type { AddressInfo } from "node:net";
import hre from "hardhat";

/**
 * Hardhat's in-process chain (./chain.ts) served over JSON-RPC on HTTP, on a free loopback port: what a tool that
 * takes an RPC URL (the CLI's `verify --rpc`, the Python client) reads the test chain through, without a
 * `hardhat node` process of its own. Single requests and batches; each is handed to the in-process provider.
 */
export interface RpcBridge {
  url: string;
  /** How many JSON-RPC requests it answered (a batch counts each of its requests). */
  readonly requests: number;
  close(): Promise<void>;
}

type RpcRequest = { jsonrpc?: string; id?: unknown; method?: unknown; params?: unknown };

export async function startRpcBridge(): Promise<RpcBridge> {
  let requests = 0;
  const answer = async (request: RpcRequest) => {
    requests++;
    const id = request.id ?? null;
    if (typeof request.method !== "string") return { jsonrpc: "2.0", id, error: { code: -32600, message: "invalid request" } };
    try {
      const result = await hre.network.provider.request({ method: request.method, params: (request.params ?? []) as unknown[] });
      return { jsonrpc: "2.0", id, result: result ?? null };
    } catch (error) {
      const e = error as { code?: unknown; message?: string; data?: unknown };
      return {
        jsonrpc: "2.0",
        id,
        error: { code: typeof e.code === "number" ? e.code : -32603, message: e.message ?? String(error), data: e.data },
      };
    }
  };
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (chunk: Buffer) => (body += chunk.toString()));
    req.on("end", async () => {
      let parsed: unknown;
      try {
        parsed = JSON.parse(body);
      } catch {
        res
          .writeHead(400, { "content-type": "application/json" })
          .end('{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}');
        return;
      }
      const reply = Array.isArray(parsed)
        ? await Promise.all(parsed.map((r) => answer(r as RpcRequest)))
        : await answer(parsed as RpcRequest);
      res
        .writeHead(200, { "content-type": "application/json" })
        .end(JSON.stringify(reply, (_, v) => (typeof v === "bigint" ? `0x${v.toString(16)}` : v)));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    get requests() {
      return requests;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
