import http from "node:http";
import type { AddressInfo } from "node:net";
import { expect } from "chai";
import { EgressPolicy } from "../../server/gateway/egress";
import { Forwarder } from "../../server/gateway/forward";
import { verifyCall } from "../../server/gateway/signature";
import { buildSkillRecord } from "../helpers/skills";

const MAX_RESPONSE_BYTES = 1_024;
const TIMEOUT_MS = 200;

interface ReceivedRequest {
  method: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

interface Backend {
  url: string;
  received: ReceivedRequest[];
  /** TCP connections the server accepted. */
  connections: number;
  close(): Promise<void>;
}

/** A real skill backend on a free local port; `handle` answers each request once its body is read. */
async function startBackend(handle: (req: http.IncomingMessage, res: http.ServerResponse) => void): Promise<Backend> {
  const received: ReceivedRequest[] = [];
  const server = http.createServer((req, res) => {
    // A client that drops the connection mid-answer (as on a too-large response) is expected.
    res.on("error", () => {});
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      received.push({ method: req.method!, headers: req.headers, body: Buffer.concat(chunks).toString("utf8") });
      handle(req, res);
    });
  });
  const backend: Backend = {
    url: "",
    received,
    connections: 0,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  server.on("connection", () => backend.connections++);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  backend.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/skill`;
  return backend;
}

const json = (status: number, body: unknown) => (_req: http.IncomingMessage, res: http.ServerResponse) => {
  res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
};

const text = (status: number, body: string) => (_req: http.IncomingMessage, res: http.ServerResponse) => {
  res.writeHead(status, { "content-type": "text/plain" }).end(body);
};

describe("Forwarder", () => {
  let forwarder: Forwarder | undefined;
  let backend: Backend | undefined;

  beforeEach(() => {
    forwarder = undefined;
    backend = undefined;
  });

  afterEach(async () => {
    await backend?.close();
    await forwarder?.close();
  });

  /** Points a skill at the backend and forwards one call to it. */
  // The test backends are on loopback, so each forwarder allowlists its backend's origin, as an
  // operator does for a backend on its own machine (egress policy: test/gateway/egress.test.ts).
  const forwardTo = (b: Backend, input: unknown = { text: "hello" }, callId = "call-1", idempotencyKey?: string) => {
    forwarder ??= new Forwarder({
      maxResponseBytes: MAX_RESPONSE_BYTES,
      egress: new EgressPolicy({ allowlist: [b.url], allowedPorts: [] }),
    });
    return forwarder.forward(buildSkillRecord({ backendUrl: b.url, timeoutMs: TIMEOUT_MS }), callId, input, idempotencyKey);
  };

  describe("a backend that answers 2xx with JSON", () => {
    it("gives back ok with the parsed data", async () => {
      backend = await startBackend(json(200, { summary: "hi", tokens: [1, 2] }));
      expect(await forwardTo(backend)).to.deep.equal({ kind: "ok", status: 200, data: { summary: "hi", tokens: [1, 2] } });
    });

    it("treats any 2xx as ok and keeps its status", async () => {
      backend = await startBackend(json(201, { created: true }));
      expect(await forwardTo(backend)).to.deep.equal({ kind: "ok", status: 201, data: { created: true } });
    });

    it("passes JSON null through as data", async () => {
      backend = await startBackend(json(200, null));
      expect(await forwardTo(backend)).to.deep.equal({ kind: "ok", status: 200, data: null });
    });
  });

  describe("the request it sends", () => {
    it("POSTs the input as JSON with the call id", async () => {
      backend = await startBackend(json(200, {}));
      const input = { text: "héllo", nested: { n: 1 } };
      await forwardTo(backend, input, "call-42");
      const [request] = backend.received;
      expect(request.method).to.equal("POST");
      expect(request.headers["content-type"]).to.equal("application/json");
      expect(request.headers["x-skill-call-id"]).to.equal("call-42");
      expect(JSON.parse(request.body)).to.deep.equal(input);
    });

    it("carries a current timestamp and a signature the backend verifies with the skill's secret", async () => {
      backend = await startBackend(json(200, {}));
      const beforeSec = Math.floor(Date.now() / 1000);
      await forwardTo(backend, { text: "sign me" }, "call-7");
      const { headers, body } = backend.received[0];
      expect(Number(headers["x-skill-timestamp"])).to.be.within(beforeSec, Math.ceil(Date.now() / 1000));
      const signed = {
        callId: headers["x-skill-call-id"] as string,
        timestamp: headers["x-skill-timestamp"] as string,
        signature: headers["x-skill-signature"] as string,
      };
      expect(verifyCall(buildSkillRecord().signingSecret, signed, body)).to.equal(true);
      expect(verifyCall("another skill's secret", signed, body)).to.equal(false);
    });

    it("carries the idempotency key it is given under a v2 signature, and the call id when given none", async () => {
      backend = await startBackend(json(200, {}));
      await forwardTo(backend, { n: 1 }, "call-8", "idem_abc");
      await forwardTo(backend, { n: 2 }, "call-9");
      const secret = buildSkillRecord().signingSecret;
      const read = ({ headers }: ReceivedRequest) => ({
        callId: headers["x-skill-call-id"] as string,
        timestamp: headers["x-skill-timestamp"] as string,
        signature: headers["x-skill-signature"] as string,
        idempotencyKey: headers["x-skill-idempotency-key"] as string,
        signatureV2: headers["x-skill-signature-v2"] as string,
      });
      const [keyed, unkeyed] = backend.received.map((request) => ({ headers: read(request), body: request.body }));
      expect(keyed.headers.idempotencyKey).to.equal("idem_abc");
      expect(unkeyed.headers.idempotencyKey).to.equal("call-9");
      for (const { headers, body } of [keyed, unkeyed]) {
        expect(headers.signatureV2).to.match(/^v2=[0-9a-f]{64}$/);
        expect(verifyCall(secret, headers, body, { requireIdempotencyKey: true })).to.equal(true);
        // A v1 verifier, which reads only the v1 headers, is served as before.
        const { callId, timestamp, signature } = headers;
        expect(verifyCall(secret, { callId, timestamp, signature }, body)).to.equal(true);
      }
      expect(verifyCall(secret, { ...keyed.headers, idempotencyKey: "idem_other" }, keyed.body)).to.equal(false);
    });
  });

  describe("a backend that answers 4xx", () => {
    it("is a rejection carrying the backend's {error} message", async () => {
      backend = await startBackend(json(422, { error: "text must be at most 20 characters" }));
      expect(await forwardTo(backend)).to.deep.equal({
        kind: "rejected",
        status: 422,
        message: "text must be at most 20 characters",
      });
    });

    it("falls back to a {message} field", async () => {
      backend = await startBackend(json(400, { message: "lang is not supported" }));
      expect(await forwardTo(backend)).to.include({ kind: "rejected", message: "lang is not supported" });
    });

    it("uses a generic message when the body is not JSON", async () => {
      backend = await startBackend(text(400, "<html>Bad Request</html>"));
      expect(await forwardTo(backend)).to.deep.equal({
        kind: "rejected",
        status: 400,
        message: "skill rejected the input (HTTP 400)",
      });
    });

    it("uses a generic message when the JSON has no usable error", async () => {
      backend = await startBackend(json(404, { error: { nested: true } }));
      expect(await forwardTo(backend)).to.include({ kind: "rejected", message: "skill rejected the input (HTTP 404)" });
    });
  });

  describe("a backend that fails", () => {
    for (const status of [500, 502, 503]) {
      it(`is a backend_error when it answers ${status}, even with a JSON body`, async () => {
        backend = await startBackend(json(status, { error: "database down" }));
        expect(await forwardTo(backend)).to.deep.equal({
          kind: "failed",
          reason: "backend_error",
          status,
          message: `skill backend answered HTTP ${status}`,
        });
      });
    }

    it("is a backend_error when it redirects, which is not followed", async () => {
      backend = await startBackend((_req, res) => res.writeHead(302, { location: "http://example.com/" }).end());
      expect(await forwardTo(backend)).to.include({ kind: "failed", reason: "backend_error", status: 302 });
      expect(backend.received).to.have.length(1);
    });

    it("times out within the skill's timeoutMs when the backend never answers", async () => {
      backend = await startBackend(() => {});
      const startedMs = Date.now();
      const result = await forwardTo(backend);
      const elapsedMs = Date.now() - startedMs;
      expect(result).to.deep.equal({ kind: "failed", reason: "timeout", message: `skill backend did not answer within ${TIMEOUT_MS} ms` });
      expect(elapsedMs).to.be.within(TIMEOUT_MS - 20, TIMEOUT_MS + 300);
    });

    it("times out when the backend sends its headers and then stalls the body", async () => {
      backend = await startBackend((_req, res) => {
        res.writeHead(200, { "content-type": "application/json" });
        res.write('{"partial":');
      });
      const startedMs = Date.now();
      expect(await forwardTo(backend)).to.include({ kind: "failed", reason: "timeout" });
      expect(Date.now() - startedMs).to.be.below(TIMEOUT_MS + 300);
    });

    it("is unreachable when the connection is refused", async () => {
      const closed = await startBackend(json(200, {}));
      await closed.close(); // the port was listening a moment ago and is now free
      expect(await forwardTo(closed)).to.deep.equal({
        kind: "failed",
        reason: "unreachable",
        message: "skill backend could not be reached",
      });
    });

    it("is invalid_json when a 200 body is not JSON", async () => {
      backend = await startBackend(text(200, "all good!"));
      expect(await forwardTo(backend)).to.deep.equal({
        kind: "failed",
        reason: "invalid_json",
        status: 200,
        message: "skill backend did not answer with JSON",
      });
    });

    it("is invalid_json when a 200 body is empty", async () => {
      backend = await startBackend((_req, res) => res.writeHead(200).end());
      expect(await forwardTo(backend)).to.include({ kind: "failed", reason: "invalid_json" });
    });
  });

  describe("the response size cap", () => {
    const tooLarge = {
      kind: "failed",
      reason: "response_too_large",
      status: 200,
      message: `skill response exceeded ${MAX_RESPONSE_BYTES} bytes`,
    };
    /** A JSON string of exactly `bytes` bytes. */
    const jsonOfSize = (bytes: number) => JSON.stringify("x".repeat(bytes - 2));

    it("accepts a response of exactly maxResponseBytes", async () => {
      backend = await startBackend(text(200, jsonOfSize(MAX_RESPONSE_BYTES)));
      expect(await forwardTo(backend)).to.include({ kind: "ok" });
    });

    it("refuses a response whose content-length is over the cap", async () => {
      backend = await startBackend(text(200, jsonOfSize(MAX_RESPONSE_BYTES + 1)));
      expect(await forwardTo(backend)).to.deep.equal(tooLarge);
    });

    it("refuses from the content-length alone, without waiting for the body", async () => {
      backend = await startBackend((_req, res) => {
        res.writeHead(200, { "content-type": "application/json", "content-length": String(MAX_RESPONSE_BYTES * 4) });
        res.write('"x'); // and nothing more: reading on would end in a timeout
      });
      expect(await forwardTo(backend)).to.deep.equal(tooLarge);
    });

    it("refuses a chunked response without content-length once it grows over the cap", async () => {
      backend = await startBackend((_req, res) => {
        res.writeHead(200, { "content-type": "application/json" });
        res.write('"');
        for (let i = 0; i < 8; i++) res.write("x".repeat(256));
        res.end('"');
      });
      expect(await forwardTo(backend)).to.deep.equal(tooLarge);
    });

    it("does not wait for the end of an oversized response that never ends", async () => {
      backend = await startBackend((_req, res) => {
        res.writeHead(200, { "content-type": "application/json" });
        res.write("x".repeat(MAX_RESPONSE_BYTES + 1));
      });
      expect(await forwardTo(backend)).to.deep.equal(tooLarge);
    });

    it("decodes multi-byte text split across chunks", async () => {
      const word = "é".repeat(300); // 600 bytes
      backend = await startBackend((_req, res) => {
        const bytes = Buffer.from(JSON.stringify({ word }));
        res.writeHead(200, { "content-type": "application/json" });
        res.write(bytes.subarray(0, 101)); // ends inside a two-byte character
        setTimeout(() => res.end(bytes.subarray(101)), 10);
      });
      expect(await forwardTo(backend)).to.deep.equal({ kind: "ok", status: 200, data: { word } });
    });

    it("counts bytes, not characters", async () => {
      // 514 characters, 1,026 bytes: under the cap in characters, over it in bytes.
      backend = await startBackend(json(200, "é".repeat(MAX_RESPONSE_BYTES / 2)));
      expect(await forwardTo(backend)).to.deep.equal(tooLarge);
    });
  });

  describe("connections", () => {
    // undici waits one turn of the event loop after a response before it reuses the socket
    // (in case a non-compliant server closes it anyway). Calls that reach the gateway as
    // HTTP requests always have such a turn between them; `nextTurn` stands in for it.
    const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

    it("reuses one kept-alive socket for sequential calls", async () => {
      backend = await startBackend(json(200, { ok: true }));
      for (let i = 0; i < 5; i++) {
        expect(await forwardTo(backend, { i }, `call-${i}`)).to.include({ kind: "ok" });
        await nextTurn();
      }
      expect(backend.received).to.have.length(5);
      expect(backend.connections).to.equal(1);
    });

    it("opens at most a second socket for calls made back to back, not one per call", async () => {
      backend = await startBackend(json(200, { ok: true }));
      for (let i = 0; i < 10; i++) await forwardTo(backend, { i }, `call-${i}`);
      expect(backend.received).to.have.length(10);
      expect(backend.connections).to.be.within(1, 2);
    });

    it("keeps reusing the socket after 4xx and 5xx answers, whose bodies it reads to the end", async () => {
      let n = 0;
      backend = await startBackend((req, res) => json([200, 422, 503][n++ % 3], { error: "no" })(req, res));
      for (let i = 0; i < 6; i++) {
        await forwardTo(backend);
        await nextTurn();
      }
      expect(backend.received).to.have.length(6);
      expect(backend.connections).to.equal(1);
    });

    it("never lends a kept-alive socket of the operator's skill on an allowlisted origin to a seller's skill there", async () => {
      backend = await startBackend(json(200, { secret: "internal" }));
      // The operator allowlists an internal name; the test's resolver points it at the loopback backend.
      const origin = `http://skills.internal.example:${new URL(backend.url).port}`;
      const resolve = async () => [{ address: "127.0.0.1", family: 4 }];
      forwarder = new Forwarder({
        maxResponseBytes: MAX_RESPONSE_BYTES,
        egress: new EgressPolicy({ allowlist: [origin], allowedPorts: [] }, resolve),
      });
      const call = (operatorListed: boolean, callId: string) =>
        forwarder!.forward(buildSkillRecord({ backendUrl: `${origin}/skill`, operatorListed, timeoutMs: TIMEOUT_MS }), callId, {});
      expect(await call(true, "operator-1")).to.include({ kind: "ok" });
      await nextTurn();
      // The operator's socket is idle in its pool now; a seller's skill at the same URL must not ride it.
      expect(await call(false, "seller-1")).to.include({ kind: "failed", reason: "forbidden" });
      await nextTurn();
      expect(await call(true, "operator-2")).to.include({ kind: "ok" });
      expect(backend.received.map((r) => r.headers["x-skill-call-id"])).to.deep.equal(["operator-1", "operator-2"]);
      expect(backend.connections).to.equal(1);
    });

    it("still works after dropping an oversized response", async () => {
      let oversized = true;
      backend = await startBackend((req, res) => {
        if (oversized) {
          oversized = false;
          text(200, "x".repeat(MAX_RESPONSE_BYTES * 4))(req, res);
        } else {
          json(200, { fine: true })(req, res);
        }
      });
      expect(await forwardTo(backend)).to.include({ reason: "response_too_large" });
      expect(await forwardTo(backend)).to.deep.equal({ kind: "ok", status: 200, data: { fine: true } });
    });
  });
});
