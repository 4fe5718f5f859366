import { expect } from "chai";
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { RawRequest } from "./cases";
import { rawExchange } from "./raw-http";

/**
 * A server answering, once a request's body is in: /chunked in chunks, /fixed with a length,
 * /close with neither (to the end of the connection).
 */
function server(): http.Server {
  return http.createServer((req, res) => {
    req.resume();
    req.on("end", () => answer(req, res));
  });
}

function answer(req: http.IncomingMessage, res: http.ServerResponse): void {
  if (req.url === "/chunked") {
    res.writeHead(200, { "content-type": "application/json" });
    res.write('{"a":');
    res.end("1}");
  } else if (req.url === "/close") {
    res.writeHead(200, { "content-type": "text/plain", connection: "close" });
    res.end("to the end");
  } else {
    res.writeHead(201, { "content-type": "application/json", "content-length": 2 }).end("{}");
  }
}

const plan = (text: string, methods: string[], abort = false): RawRequest => ({
  transport: "raw",
  segments: [{ bytes: Buffer.from(text), delayMs: 0 }],
  abort,
  methods,
  paths: methods.map(() => "/"),
});

describe("the fuzz harness's raw HTTP client", () => {
  let s: http.Server;
  let port: number;
  before(async () => {
    s = server();
    await new Promise<void>((resolve) => s.listen(0, "127.0.0.1", resolve));
    port = (s.address() as AddressInfo).port;
  });
  after(() => new Promise<void>((resolve) => s.close(() => resolve())));

  it("reads pipelined answers in order: chunked, fixed length, HEAD without a body", async () => {
    const get = (path: string, method = "GET") => `${method} ${path} HTTP/1.1\r\nHost: x\r\n\r\n`;
    const out = await rawExchange(port, plan(get("/chunked") + get("/fixed") + get("/fixed", "HEAD"), ["GET", "GET", "HEAD"]), 5_000);
    expect(out.responses.map((r) => [r.status, r.body.toString()])).to.deep.equal([
      [200, '{"a":1}'],
      [201, "{}"],
      [201, ""],
    ]);
    expect(out.timedOut).to.equal(false);
  });

  it("reads a body that runs to the end of the connection", async () => {
    const out = await rawExchange(port, plan("GET /close HTTP/1.1\r\nHost: x\r\n\r\n", ["GET"]), 5_000);
    expect(out.responses.map((r) => r.body.toString())).to.deep.equal(["to the end"]);
  });

  it("skips an interim 100 Continue", async () => {
    const text = "POST /fixed HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n{}";
    const out = await rawExchange(port, plan(text, ["POST"]), 5_000);
    expect(out.responses.map((r) => r.status)).to.deep.equal([201]);
  });

  it("hangs up mid-body when told to, awaiting nothing", async () => {
    const out = await rawExchange(port, plan("POST /fixed HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{", ["POST"], true), 5_000);
    expect(out).to.include({ timedOut: false });
    expect(out.responses).to.deep.equal([]);
  });
});
