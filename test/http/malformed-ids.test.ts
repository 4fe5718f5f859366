import { expect } from "chai";
import { type LocalChain, gatewayChain, startLocalChain } from "../helpers/chain";
import { describeEachEngine } from "../helpers/engines";
import { type TestStack, startStack } from "../helpers/gateway";
import { type Reply, type TestSession, send, signedIn } from "../helpers/session";

/**
 * The third review's ids (docs/security.md, "Text that reaches strangers"): a NUL in a receipt's call id, a usage
 * filter or `try`'s key_id was a 500 on PostgreSQL (which refuses the byte) and a 404 on SQLite. Every id is checked
 * against its shape before any lookup, so each engine answers every malformed id with the same 4xx: a path's id that
 * names nothing is 404, as an unknown one is; a query's skill filter that cannot be a slug or UUID is 400.
 */

/** Ids no row can have: a NUL, a bidirectional override, a quote and SQL, a letter no UUID or slug holds. */
const MALFORMED: [string, string][] = [
  ["a NUL", "a\u0000b"],
  ["a NUL inside a UUID", "0190f3e4-7a1b-7c2d-8e3f-40516\u00007a8b9c"],
  ["a right-to-left override", "ab\u202Ecd"],
  ["a quote and SQL", "' OR '1'='1"],
  ["a capital Z inside a UUID", "0190f3e4-7a1b-7c2d-8e3f-40516273Z8a9"],
];

describeEachEngine("malformed ids", (engine) => {
  let chain: LocalChain;
  let stack: TestStack;
  let session: TestSession;
  before(async function () {
    this.timeout(120_000);
    chain = await startLocalChain();
    // Receipts are served only by a gateway that settles on a chain: this one does.
    stack = await startStack({ engine: engine.name, gateway: { chain: await gatewayChain(chain) } });
    session = await signedIn(stack, "ids@example.com");
  });
  after(() => stack.close());

  const withKey = (path: string) => send(stack.url + path, "GET", { authorization: `Bearer ${stack.key}` });
  const routes: [string, number, string, (id: string) => Promise<Reply>][] = [
    ["GET /v1/calls/:callId/receipt", 404, "not_found", (id) => withKey(`/v1/calls/${encodeURIComponent(id)}/receipt`)],
    ["GET /v1/usage?api_key_id=", 404, "not_found", (id) => withKey(`/v1/usage?api_key_id=${encodeURIComponent(id)}`)],
    ["GET /v1/usage.csv?api_key_id=", 404, "not_found", (id) => withKey(`/v1/usage.csv?api_key_id=${encodeURIComponent(id)}`)],
    ["GET /v1/usage/daily?api_key_id=", 404, "not_found", (id) => withKey(`/v1/usage/daily?api_key_id=${encodeURIComponent(id)}`)],
    ["GET /v1/usage?skill_id=", 400, "invalid_request", (id) => withKey(`/v1/usage?skill_id=${encodeURIComponent(id)}`)],
    ["GET /v1/usage/daily?skill_id=", 400, "invalid_request", (id) => withKey(`/v1/usage/daily?skill_id=${encodeURIComponent(id)}`)],
    [
      "POST /v1/skills/echo/try's key_id",
      404,
      "not_found",
      (id) => session.request("POST", "/v1/skills/echo/try", { key_id: id, input: {} }),
    ],
    [
      "PATCH /v1/keys/:id",
      404,
      "not_found",
      (id) => session.request("PATCH", `/v1/keys/${encodeURIComponent(id)}`, { spend_limit_usd: null }),
    ],
    ["DELETE /v1/keys/:id", 404, "not_found", (id) => session.request("DELETE", `/v1/keys/${encodeURIComponent(id)}`)],
    [
      "PATCH /v1/seller/skills/:id",
      404,
      "not_found",
      (id) => session.request("PATCH", `/v1/seller/skills/${encodeURIComponent(id)}`, { name: "x" }),
    ],
    ["DELETE /v1/seller/skills/:id", 404, "not_found", (id) => session.request("DELETE", `/v1/seller/skills/${encodeURIComponent(id)}`)],
    ["GET /v1/topups/card/:id", 404, "not_found", (id) => session.request("GET", `/v1/topups/card/${encodeURIComponent(id)}`)],
  ];

  for (const [route, status, code, request] of routes) {
    for (const [what, id] of MALFORMED) {
      it(`answers ${route} with ${what} ${status} ${code}, as the other engine does, and never 500`, async () => {
        const reply = await request(id);
        expect(reply.status, JSON.stringify(reply.body).slice(0, 300)).to.equal(status);
        expect(reply.body).to.include({ success: false, code });
      });
    }
  }

  for (const [what, local] of [
    ["a NUL", "a\u0000b"],
    ["a right-to-left override", "ab\u202Ecd"],
  ]) {
    it(`answers POST /auth/email/start with ${what} in the address 400 invalid_input, as the other engine does, and mails nothing`, async () => {
      const reply = await send(`${stack.url}/auth/email/start`, "POST", { origin: stack.url }, { email: `${local}@example.com` });
      expect(reply.status, JSON.stringify(reply.body)).to.equal(400);
      expect(reply.body).to.include({ success: false, code: "invalid_input" });
      expect(await stack.gw.ledger.db.value("SELECT COUNT(*) FROM outbox")).to.equal(0n);
    });
  }

  it("still finds what well-formed ids name", async () => {
    const key = (await session.request("POST", "/v1/keys", { name: "real" })).body.data;
    expect((await session.request("GET", `/v1/usage?api_key_id=${key.id}`)).status).to.equal(200);
    expect((await session.request("POST", "/v1/skills/echo/try", { key_id: key.id, input: {} })).status).to.equal(402);
    expect((await session.request("DELETE", `/v1/keys/${key.id}`)).status).to.equal(200);
    const call = await stack.post("/v1/call", { skill_id: "echo", input: {} });
    const receipt = await withKey(`/v1/calls/${call.headers.get("x-call-id")}/receipt`);
    expect(receipt.status, JSON.stringify(receipt.body)).to.equal(200);
    expect(receipt.body.data.call_id).to.equal(call.headers.get("x-call-id"));
  });
});
