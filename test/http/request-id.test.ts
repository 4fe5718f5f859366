import http from "node:http";
import { expect } from "chai";
import { type TestStack, startStack } from "../helpers/gateway";
import { sameOrigin, send, signedIn } from "../helpers/session";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe("request ids", () => {
  let stack: TestStack;
  beforeEach(async () => {
    stack = await startStack({ config: { signInRateLimitPerMin: 1 } });
  });
  afterEach(async () => {
    await stack.close();
  });

  it("gives every answer an X-Request-Id, a new UUID when the client sent none", async () => {
    const call = await stack.post("/v1/call", { skill_id: "echo", input: {} });
    const read = await stack.get("/v1/skills");
    const page = await fetch(`${stack.url}/`);
    expect([call.status, read.status, page.status]).to.deep.equal([200, 200, 200]);
    const ids = [call.headers.get("x-request-id"), read.headers.get("x-request-id"), page.headers.get("x-request-id")];
    for (const id of ids) expect(id).to.match(UUID);
    expect(new Set(ids).size).to.equal(3);
  });

  it("keeps a client's own id when it is short and safe", async () => {
    const res = await stack.post("/v1/call", { skill_id: "nope", input: {} }, { headers: { "x-request-id": "trace-42.a_b:c" } });
    expect(res.headers.get("x-request-id")).to.equal("trace-42.a_b:c");
    expect(res.body.request_id).to.equal("trace-42.a_b:c");
  });

  for (const [what, id] of [
    ["too long", "a".repeat(65)],
    ["empty", ""],
    ["with a space", "two words"],
    ["with a quote", 'say"hi'],
    ["with a non-ASCII letter", "caf\u00e9"],
  ]) {
    it(`replaces a client's id ${what} with a new one`, async () => {
      const res = await rawGet(`${stack.url}/v1/nope`, { "x-request-id": id });
      expect(res.status).to.equal(404);
      expect(res.requestId).to.match(UUID);
      expect(JSON.parse(res.body).request_id).to.equal(res.requestId);
    });
  }

  it("carries the id in the error body of every path that answers errors, matching the header", async () => {
    const seller = await signedIn(stack, "seller@example.com");
    const poor = await stack.addBuyer("0");
    const errors = [
      // The call fast path: its own parsing, then the call service's bodies (thrown, and built with metadata).
      await stack.post("/v1/call", "{not json"),
      await stack.post("/v1/call", { skill_id: "nope", input: {} }),
      await stack.post("/v1/call", { skill_id: "echo", input: {} }, { key: poor.key }),
      await stack.post("/v1/call", { skill_id: "fail", input: {} }),
      await stack.post("/v1/skills/reject/call", {}),
      // The Express app: a bad key on a call, an unknown route, the body parser, a session route, a rate limit.
      await stack.post("/v1/call", { skill_id: "echo", input: {} }, { key: "atom_wrong" }),
      await stack.get("/v1/nope"),
      await send(`${stack.url}/auth/email/start`, "POST", sameOrigin(stack), "{not json"),
      await seller.request("POST", "/v1/seller/skills", { slug: "" }),
      await send(`${stack.url}/auth/email/start`, "POST", sameOrigin(stack), { email: "a@example.com" }),
    ];
    const statuses = errors.map((res) => res.status);
    expect(statuses).to.deep.equal([400, 404, 402, 502, 400, 401, 404, 400, 400, 429]);
    for (const res of errors) {
      expect(res.body.success, JSON.stringify(res.body)).to.equal(false);
      expect(res.body.error).to.be.a("string");
      expect(res.body.request_id, JSON.stringify(res.body)).to.equal(res.headers.get("x-request-id"));
      expect(res.body.request_id).to.match(UUID);
    }
  });

  it("replays an idempotent call's stored body as it was, under the retry's own X-Request-Id", async () => {
    const headers = { "idempotency-key": "rejected-1" };
    const first = await stack.post("/v1/skills/reject/call", {}, { headers });
    const second = await stack.post("/v1/skills/reject/call", {}, { headers });
    expect(first.status).to.equal(400);
    expect(second.headers.get("idempotent-replayed")).to.equal("true");
    expect(second.body).to.deep.equal(first.body);
    expect(second.body.request_id).to.equal(first.headers.get("x-request-id"));
    expect(second.headers.get("x-request-id")).to.not.equal(first.headers.get("x-request-id"));
  });
});

/** A GET sent with node:http, which sends a header's bytes as given (fetch refuses some). */
function rawGet(url: string, headers: Record<string, string>): Promise<{ status: number; requestId: unknown; body: string }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { headers }, (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (chunk) => (body += chunk));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, requestId: res.headers["x-request-id"], body }));
      })
      .on("error", reject);
  });
}
