import http from "node:http";
import type { AddressInfo } from "node:net";
import { expect } from "chai";
import { CALL_ID_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, verifyCall } from "../../server/gateway/signature";
import { type TestStack, startStack } from "../helpers/gateway";
import { type TestSession, send, signedIn } from "../helpers/session";

/**
 * A seller's own backend: answers every call, and keeps each request's signature headers and body, so a test can
 * check them against the signing secret once the listing has revealed it.
 */
async function startSellerBackend() {
  const state = {
    requests: [] as { callId?: string; timestamp?: string; signature?: string; body: string }[],
    /** Whether each request so far carries a valid signature under `secret`. */
    verified: (secret: string) => state.requests.map(({ body, ...headers }) => verifyCall(secret, headers, body)),
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      const header = (name: string) => req.headers[name] as string | undefined;
      state.requests.push({
        callId: header(CALL_ID_HEADER),
        timestamp: header(TIMESTAMP_HEADER),
        signature: header(SIGNATURE_HEADER),
        body,
      });
      res
        .writeHead(200, { "content-type": "application/json" })
        .end(JSON.stringify({ upper: String(JSON.parse(body || "{}").text ?? "").toUpperCase() }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    state,
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/shout`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** A skill as a seller would register it; `overrides` change or add fields. */
const buildSkill = (backendUrl: string, overrides: Record<string, unknown> = {}) => ({
  slug: "shout",
  name: "Shout",
  description: "Upper-cases text.",
  price: "0.01",
  backend_url: backendUrl,
  timeout_ms: 2_000,
  rate_limit_per_min: 60,
  input_schema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
  ...overrides,
});

describe("seller skills (/v1/seller/skills)", () => {
  let stack: TestStack;
  let backend: Awaited<ReturnType<typeof startSellerBackend>>;
  let seller: TestSession;

  /** A stand-in for a public origin where nothing listens: a port that was free a moment ago. */
  let deadOrigin: string;

  beforeEach(async () => {
    backend = await startSellerBackend();
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    deadOrigin = `http://127.0.0.1:${(closed.address() as AddressInfo).port}`;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    // The seller's backend is on loopback, standing in for one on the public internet: the operator's allowlist
    // would not serve a seller's listing (test/helpers/egress.ts).
    stack = await startStack({ publicStandIns: [new URL(backend.url).origin, deadOrigin] });
    seller = await signedIn(stack, "seller@example.com");
  });
  afterEach(async () => {
    await stack.close();
    await backend.close();
  });

  const callShout = (input: unknown = { text: "hi" }) => stack.post("/v1/call", { skill_id: "shout", input });

  it("needs a session and its CSRF token", async () => {
    expect((await send(`${stack.url}/v1/seller/skills`, "GET", {})).status).to.equal(401);
    const forged = await seller.request("POST", "/v1/seller/skills", buildSkill(backend.url), { csrf: false });
    expect(forged.status).to.equal(403);
  });

  it("lists a skill that another account then calls and pays for; the signing secret is shown once", async () => {
    const created = await seller.request("POST", "/v1/seller/skills", buildSkill(backend.url));
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const skill = created.body.data;
    expect(skill).to.include({
      slug: "shout",
      name: "Shout",
      price: 0.01,
      backend_url: backend.url,
      timeout_ms: 2_000,
      rate_limit_per_min: 60,
      listed: true,
    });
    expect(skill.signing_secret).to.match(/^[0-9a-f]{64}$/);

    const buyerBefore = await stack.available();
    const reply = await callShout();
    expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
    expect(reply.body.data).to.deep.equal({ upper: "HI" });
    expect(reply.body.metadata).to.include({ skill_id: "shout", price_paid: 0.01 });
    // The listing's test call, then the paid call: both signed with the skill's secret.
    expect(backend.state.verified(skill.signing_secret)).to.deep.equal([true, true]);
    expect(await stack.available()).to.equal(buyerBefore - 10_000n);
    expect(await stack.earned(seller.accountId)).to.equal(9_000n); // 90% of the price, the fee included in it

    // The input schema the seller gave is enforced before the backend is called.
    expect((await callShout({ text: 5 })).status).to.equal(400);
    expect(backend.state.requests).to.have.length(2);

    const listed = await seller.request("GET", "/v1/seller/skills");
    expect(listed.body.data).to.have.length(1);
    expect(listed.body.data[0]).to.include({ id: skill.id, slug: "shout", listed: true });
    expect(listed.body.data[0]).to.not.have.property("signing_secret");
  });

  it("edits a skill: the next call pays the new price", async () => {
    const { id } = (await seller.request("POST", "/v1/seller/skills", buildSkill(backend.url))).body.data;
    const edited = await seller.request("PATCH", `/v1/seller/skills/${id}`, { price: 0.02, description: "LOUDER" });
    expect(edited.status, JSON.stringify(edited.body)).to.equal(200);
    expect(edited.body.data).to.include({ price: 0.02, description: "LOUDER", name: "Shout" });
    expect(edited.body.data).to.not.have.property("signing_secret");
    const reply = await callShout();
    expect(reply.body.metadata.price_paid).to.equal(0.02);
  });

  it("unlists a skill: calls get 404 until it is listed again", async () => {
    const { id } = (await seller.request("POST", "/v1/seller/skills", buildSkill(backend.url))).body.data;
    const unlisted = await seller.request("DELETE", "/v1/seller/skills/shout");
    expect(unlisted.status).to.equal(200);
    expect(unlisted.body.data).to.include({ id, listed: false });
    const reply = await callShout();
    expect(reply.status).to.equal(404);
    expect(reply.body.code).to.equal("skill_not_found");
    expect((await seller.request("GET", "/v1/seller/skills")).body.data[0]).to.include({ listed: false });

    expect((await seller.request("PATCH", `/v1/seller/skills/${id}`, { listed: true })).status).to.equal(200);
    expect((await callShout()).status).to.equal(200);
  });

  describe("the listing's test call to the backend", () => {
    it("calls the backend once, signed with the new secret, and tells the seller what came back", async () => {
      const created = await seller.request("POST", "/v1/seller/skills", buildSkill(backend.url));
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
      const check = created.body.data.backend_check;
      expect(check).to.include({ reachable: true, ok: true, status: 200, snippet: '{"upper":""}' });
      expect(check.message).to.equal("The backend answered the test call with HTTP 200.");
      expect(check.latency_ms).to.be.a("number").and.at.least(0);
      expect(backend.state.requests.map((r) => r.body)).to.deep.equal(["{}"]);
      expect(backend.state.verified(created.body.data.signing_secret)).to.deep.equal([true]);
      // The test call is nobody's: no call is logged, nothing is charged.
      expect(await stack.gw.db.value<bigint>("SELECT COUNT(*) FROM calls")).to.equal(0n);
    });

    it("refuses a taken slug before any test call: a listing is no free probe of another host", async () => {
      expect((await seller.request("POST", "/v1/seller/skills", buildSkill(backend.url))).status).to.equal(201);
      const calls = backend.state.requests.length;
      const again = await seller.request("POST", "/v1/seller/skills", buildSkill(backend.url));
      expect(again.status).to.equal(409);
      expect(again.body.code).to.equal("slug_taken");
      expect(backend.state.requests.length).to.equal(calls);
    });

    it("refuses a backend that does not answer at all (nothing listens on its port), listing nothing", async () => {
      const dead = `${deadOrigin}/shout`;
      const reply = await seller.request("POST", "/v1/seller/skills", buildSkill(dead));
      expect(reply.status, JSON.stringify(reply.body)).to.equal(400);
      expect(reply.body).to.include({ success: false, code: "invalid_request" });
      expect(reply.body.error).to.match(/^The backend did not answer the test call \(skill backend could not be reached\)\. Start it/);
      expect((await seller.request("GET", "/v1/seller/skills")).body.data).to.deep.equal([]);
      expect(stack.gw.skills.resolve("shout")).to.equal(undefined);
    });

    it("gives an edit that moves the backend the same test call: a dead one is refused and the old URL kept", async () => {
      const created = (await seller.request("POST", "/v1/seller/skills", buildSkill(backend.url))).body.data;
      const dead = await seller.request("PATCH", "/v1/seller/skills/shout", { backend_url: `${deadOrigin}/shout` });
      expect(dead.status).to.equal(400);
      expect(dead.body.error).to.match(/^The backend did not answer the test call/);
      expect((await seller.request("GET", "/v1/seller/skills")).body.data[0].backend_url).to.equal(backend.url);

      const moved = await seller.request("PATCH", "/v1/seller/skills/shout", { backend_url: `${backend.url}?v=2` });
      expect(moved.status, JSON.stringify(moved.body)).to.equal(200);
      expect(moved.body.data.backend_check).to.include({ reachable: true, ok: true, status: 200 });
      // Both test calls (the listing's, the move's) signed with the skill's one secret.
      expect(backend.state.verified(created.signing_secret)).to.deep.equal([true, true]);
      // An edit that leaves the URL alone makes no call.
      const priced = await seller.request("PATCH", "/v1/seller/skills/shout", { price: "0.02" });
      expect(priced.body.data).to.not.have.property("backend_check");
      expect(backend.state.requests).to.have.length(2);
    });

    it("lists a backend that answers with an error, and says calls to it will fail until it answers properly", async () => {
      const failing = await seller.request("POST", "/v1/seller/skills", buildSkill(`${stack.backend.url}/fail`, { slug: "failing" }));
      expect(failing.status, JSON.stringify(failing.body)).to.equal(201);
      expect(failing.body.data.listed).to.equal(true);
      expect(failing.body.data.backend_check).to.include({ reachable: true, ok: false, status: 500 });
      expect(failing.body.data.backend_check.message).to.match(/calls to it will fail, uncharged, until it does/);
    });
  });

  describe("price bounds (0.001 to 0.50 USD by default)", () => {
    for (const price of ["0.001", 0.5, "0.50"]) {
      it(`accepts ${JSON.stringify(price)}`, async () => {
        const reply = await seller.request("POST", "/v1/seller/skills", buildSkill(backend.url, { price }));
        expect(reply.status, JSON.stringify(reply.body)).to.equal(201);
      });
    }
    for (const price of ["0.0009", "0.500001", 1, "0", "-0.01", "1e-3", "0.0000001", "cheap", null]) {
      it(`refuses ${JSON.stringify(price)}`, async () => {
        const reply = await seller.request("POST", "/v1/seller/skills", buildSkill(backend.url, { price }));
        expect(reply.status, JSON.stringify(reply.body)).to.equal(400);
        expect(reply.body).to.include({ success: false, code: "invalid_request" });
      });
    }

    it("refuses an edit beyond the bounds and keeps the old price", async () => {
      const { id } = (await seller.request("POST", "/v1/seller/skills", buildSkill(backend.url))).body.data;
      const reply = await seller.request("PATCH", `/v1/seller/skills/${id}`, { price: "0.51" });
      expect(reply.status).to.equal(400);
      expect(reply.body.error).to.equal("Price must be between $0.001 and $0.50.");
      expect((await seller.request("GET", "/v1/seller/skills")).body.data[0].price).to.equal(0.01);
    });

    it("follows MIN_SKILL_PRICE_USD / MAX_SKILL_PRICE_USD when the operator allows more", async () => {
      const wide = await startStack({
        config: { minSkillPriceMicros: 100n, maxSkillPriceMicros: 5_000_000n },
        publicStandIns: [new URL(backend.url).origin],
      });
      try {
        const s = await signedIn(wide, "seller@example.com");
        expect((await s.request("POST", "/v1/seller/skills", buildSkill(backend.url, { price: "2.50" }))).status).to.equal(201);
        expect((await s.request("POST", "/v1/seller/skills", buildSkill(backend.url, { slug: "tiny", price: "0.0001" }))).status).to.equal(
          201,
        );
        expect((await s.request("POST", "/v1/seller/skills", buildSkill(backend.url, { slug: "dear", price: "5.01" }))).status).to.equal(
          400,
        );
      } finally {
        await wide.close();
      }
    });
  });

  describe("only the owner", () => {
    let skillId: string;
    let other: TestSession;
    beforeEach(async () => {
      skillId = (await seller.request("POST", "/v1/seller/skills", buildSkill(backend.url))).body.data.id;
      other = await signedIn(stack, "other@example.com");
    });

    for (const [method, body] of [
      ["PATCH", { price: "0.001" }],
      ["DELETE", undefined],
    ] as const) {
      it(`gets 404 from ${method} on another seller's skill`, async () => {
        for (const ref of [skillId, "shout"]) {
          const reply = await other.request(method, `/v1/seller/skills/${ref}`, body);
          expect(reply.status).to.equal(404);
          expect(reply.body).to.include({ success: false, code: "not_found" });
        }
        const skill = stack.gw.skills.resolve("shout")!;
        expect(skill.priceMicros).to.equal(10_000n);
        expect((await callShout()).status).to.equal(200);
      });
    }

    it("sees only its own skills", async () => {
      expect((await other.request("GET", "/v1/seller/skills")).body.data).to.deep.equal([]);
    });

    it("cannot take a slug another seller has", async () => {
      const reply = await other.request("POST", "/v1/seller/skills", buildSkill(backend.url));
      expect(reply.status).to.equal(409);
      expect(reply.body.code).to.equal("slug_taken");
      // Nor the stack's own seller's `echo`.
      expect((await other.request("POST", "/v1/seller/skills", buildSkill(backend.url, { slug: "echo" }))).status).to.equal(409);
      expect(stack.gw.skills.resolve("echo")!.sellerAccountId).to.equal(stack.sellerId);
    });
  });

  describe("validation", () => {
    const cases: [string, Record<string, unknown>][] = [
      ["a missing backend_url", { backend_url: undefined }],
      ["a backend URL that is not http(s)", { backend_url: "file:///etc/passwd" }],
      ["a slug with capitals", { slug: "Shout" }],
      ["a slug shaped like a UUID", { slug: "123e4567-e89b-12d3-a456-426614174000" }],
      ["an empty name", { name: " " }],
      ["a timeout under 100 ms", { timeout_ms: 5 }],
      ["a fractional timeout", { timeout_ms: 1500.5 }],
      ["a rate limit of 0", { rate_limit_per_min: 0 }],
      ["an input schema that does not compile", { input_schema: { type: "no-such-type" } }],
      ["an input schema that is an array", { input_schema: [] }],
    ];
    for (const [what, overrides] of cases) {
      it(`refuses ${what}`, async () => {
        const reply = await seller.request("POST", "/v1/seller/skills", buildSkill(backend.url, overrides));
        expect(reply.status, JSON.stringify(reply.body)).to.equal(400);
        expect(reply.body.code).to.equal("invalid_request");
        expect((await seller.request("GET", "/v1/seller/skills")).body.data).to.deep.equal([]);
      });
    }

    it("does not let an edit change the slug", async () => {
      const { id } = (await seller.request("POST", "/v1/seller/skills", buildSkill(backend.url))).body.data;
      const reply = await seller.request("PATCH", `/v1/seller/skills/${id}`, { slug: "yell" });
      expect(reply.status).to.equal(400);
      expect(reply.body.error).to.match(/slug cannot change/);
    });
  });

  describe("payout address (/v1/seller/payout-address)", () => {
    const WALLET = "0x1111111111111111111111111111111111111111";
    const OTHER = "0x2222222222222222222222222222222222222222";

    it("is none until set, and can be set only to an address the account signed in with", async () => {
      expect((await seller.request("GET", "/v1/seller/payout-address")).body.data).to.deep.equal({ address: null });
      const unproved = await seller.request("PUT", "/v1/seller/payout-address", { address: WALLET });
      expect(unproved.status).to.equal(409);
      expect(unproved.body.code).to.equal("payout_address_refused");

      await stack.gw.sessions.signIn("siwe", WALLET, { linkTo: seller.accountId });
      const set = await seller.request("PUT", "/v1/seller/payout-address", { address: WALLET });
      expect(set.status, JSON.stringify(set.body)).to.equal(200);
      expect(set.body.data).to.deep.equal({ address: WALLET, created: true });
      expect((await seller.request("GET", "/v1/seller/payout-address")).body.data).to.deep.equal({ address: WALLET });
      // Setting it again is a no-op.
      expect((await seller.request("PUT", "/v1/seller/payout-address", { address: WALLET })).body.data).to.deep.equal({
        address: WALLET,
        created: false,
      });
    });

    it("does not change once set: settlement pays one address per account", async () => {
      await stack.gw.sessions.signIn("siwe", WALLET, { linkTo: seller.accountId });
      await stack.gw.sessions.signIn("siwe", OTHER, { linkTo: seller.accountId });
      expect((await seller.request("PUT", "/v1/seller/payout-address", { address: WALLET })).status).to.equal(200);
      const reply = await seller.request("PUT", "/v1/seller/payout-address", { address: OTHER });
      expect(reply.status).to.equal(409);
      expect(reply.body.error).to.match(/one address per account/);
    });

    it("refuses what is not an address", async () => {
      const reply = await seller.request("PUT", "/v1/seller/payout-address", { address: "0x123" });
      expect(reply.status).to.equal(400);
    });
  });
});
