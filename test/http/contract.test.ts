import { expect } from "chai";
import { privateKeyToAccount } from "viem/accounts";
import { type TestStack, startStack } from "../helpers/gateway";
import { type ContractChecker as Checker, ContractChecker, assertValidOpenApi } from "../helpers/openapi";
import { type TestSession, sameOrigin, send, signedIn } from "../helpers/session";

/**
 * Every route of the API, called for real (a gateway on port 0, a real backend), its
 * successes and representative failures, each answer checked against GET /openapi.json:
 * the status must be declared for that operation and the body must match its schema. Then
 * every operation the document declares must have been called at least once.
 */
describe("the API's contract: GET /openapi.json", function () {
  this.timeout(120_000);
  let stack: TestStack;
  let checker: Checker;
  let seller: TestSession;
  let documentServed: any;
  const problems: string[] = [];

  /** One request, its answer checked against the document at once. */
  const call = async (
    method: string,
    path: string,
    options: { body?: unknown; headers?: Record<string, string>; session?: TestSession; key?: string | null } = {},
  ) => {
    const key = options.key === undefined ? (options.session ? null : stack.key) : options.key;
    const headers: Record<string, string> = {
      accept: "application/json",
      ...(key === null ? {} : { authorization: `Bearer ${key}` }),
      ...(options.session ? { cookie: options.session.cookie, "x-csrf-token": options.session.csrfToken } : {}),
      ...options.headers,
    };
    const url = stack.url + path;
    const res = await fetch(url, {
      method,
      headers: options.body === undefined ? headers : { "content-type": "application/json", ...headers },
      body: options.body === undefined ? undefined : typeof options.body === "string" ? options.body : JSON.stringify(options.body),
      redirect: "manual",
    });
    const text = await res.text();
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      /* kept as text: an SVG, a redirect's empty body */
    }
    const found = checker.problems(method, url, { status: res.status, contentType: res.headers.get("content-type"), body });
    problems.push(...found);
    expect(found, found.join("\n")).to.deep.equal([]);
    return { status: res.status, body: body as any };
  };

  before(async () => {
    stack = await startStack();
    const served = await send(`${stack.url}/openapi.json`, "GET", {});
    expect(served.status).to.equal(200);
    await assertValidOpenApi(served.body);
    documentServed = served.body;
    checker = new ContractChecker(served.body);
    seller = await signedIn(stack, "seller@example.com");
  });
  after(async () => {
    await stack?.close();
  });

  it("is a valid OpenAPI 3.1 document, and describes itself", async () => {
    const res = await call("GET", "/openapi.json", { key: null });
    expect(res.body.openapi).to.equal("3.1.0");
  });

  it("the checker refuses what the document does not declare", () => {
    // Its own checker: made-up answers must not count as calls of the routes below.
    const checker = new ContractChecker(documentServed);
    // A status the operation does not declare, and a body with a field its schema does not have.
    expect(checker.problems("GET", `${stack.url}/v1/balance`, { status: 418, contentType: "application/json", body: {} })).to.have.length(
      1,
    );
    const balance = { currency: "USDC", available: 1, held: 0, available_base_units: "1000000", held_base_units: "0" };
    const ok = { status: 200, contentType: "application/json", body: { success: true, data: balance } };
    expect(checker.problems("GET", `${stack.url}/v1/balance`, ok)).to.deep.equal([]);
    const extra = { ...ok, body: { success: true, data: { ...balance, bonus: 1 } } };
    expect(checker.problems("GET", `${stack.url}/v1/balance`, extra)[0]).to.match(/does not match/);
    const wrongCode = { status: 404, contentType: "application/json", body: { success: false, error: "x", code: "not_found" } };
    expect(checker.problems("GET", `${stack.url}/v1/skills/x`, wrongCode)[0]).to.match(/does not match/);
    expect(checker.problems("GET", `${stack.url}/v1/nowhere`, ok)[0]).to.match(/no path/);
  });

  describe("calls", () => {
    it("POST /v1/call", async () => {
      const ok = await call("POST", "/v1/call", { body: { skill_id: "echo", input: { a: 1 } } });
      expect(ok.status).to.equal(200);
      // The call's id in the body as well as the header, as the document declares it (issue 26 section 3).
      expect(ok.body.metadata.call_id)
        .to.be.a("string")
        .and.match(/^[0-9a-f-]{36}$/);
      expect(documentServed.components.schemas.CallMetadata.properties).to.have.property("call_id");
      expect(documentServed.components.schemas.SkillCallMetadata.properties).to.have.property("callId");
      expect((await call("POST", "/v1/call", { body: { skill_id: "echo" } })).body.error).to.match(/^input/);
      expect((await call("POST", "/v1/call", { body: "{not json" })).body.code).to.equal("invalid_json");
      expect((await call("POST", "/v1/call", { body: { skill_id: "nope", input: {} } })).status).to.equal(404);
      expect((await call("POST", "/v1/call", { body: { skill_id: "fail", input: {} } })).status).to.equal(502);
      expect((await call("POST", "/v1/call", { body: { skill_id: "echo", input: {} }, key: "atom_wrong" })).status).to.equal(401);
      const capped = await call("POST", "/v1/call", { body: { skill_id: "echo", input: {}, max_price: "0.0001" } });
      expect([capped.status, capped.body.code]).to.deep.equal([409, "price_above_max"]);
      const poor = await stack.addBuyer("0");
      expect((await call("POST", "/v1/call", { body: { skill_id: "echo", input: {} }, key: poor.key })).body.details).to.have.keys(
        "price",
        "available",
      );
    });

    it("POST /v1/skills/{skillId}/call", async () => {
      expect((await call("POST", "/v1/skills/echo/call", { body: { a: 1 } })).body.metadata).to.have.keys(
        "skillId",
        "cost",
        "responseTime",
        "callId",
      );
      expect((await call("POST", "/v1/skills/echo/call", { body: [1] })).status).to.equal(400);
      expect((await call("POST", "/v1/skills/reject/call", { body: {} })).status).to.equal(400);
      expect((await call("POST", "/v1/skills/echo/call", { body: {}, headers: { "x-max-price": "0.0001" } })).status).to.equal(409);
    });

    it("POST /v1/skills/{skillId}/try", async () => {
      const buyer = await signedIn(stack, "buyer@example.com");
      await stack.gw.ledger.credit(buyer.accountId, 1_000_000n, "dev_credit", "test");
      const created = await call("POST", "/v1/keys", { session: buyer, body: { name: "try" } });
      expect(
        (await call("POST", "/v1/skills/echo/try", { session: buyer, body: { key_id: created.body.data.id, input: {} } })).status,
      ).to.equal(200);
      expect((await call("POST", "/v1/skills/echo/try", { session: buyer, body: { input: {} } })).body.error).to.match(/^key_id/);
      expect((await call("POST", "/v1/skills/echo/try", { session: buyer, body: { key_id: "nope" } })).status).to.equal(404);
    });
  });

  describe("the marketplace and the account", () => {
    it("GET /v1/skills and /v1/skills/{skillId}", async () => {
      expect((await call("GET", "/v1/skills", { key: null })).body.data).to.be.an("array").that.is.not.empty;
      expect((await call("GET", "/v1/skills/echo", { key: null })).status).to.equal(200);
      expect((await call("GET", "/v1/skills/nope", { key: null })).status).to.equal(404);
    });

    it("GET /v1/balance, /v1/usage, /v1/usage.csv, /v1/usage/daily, /v1/usage/keys, /v1/history", async () => {
      expect((await call("GET", "/v1/balance")).status).to.equal(200);
      expect((await call("GET", "/v1/balance", { key: null })).status).to.equal(401);
      expect((await call("GET", "/v1/usage?limit=5")).body.data.calls).to.not.be.empty;
      expect((await call("GET", "/v1/usage?limit=0")).body.error).to.match(/^limit/);
      expect((await call("GET", "/v1/usage/daily?days=3")).body.data.days).to.have.length(3);
      expect((await call("GET", "/v1/usage/daily?days=x")).status).to.equal(400);
      expect((await call("GET", "/v1/usage/daily?from=2026-11-01&to=2026-11-02")).body.data.days).to.have.length(2);
      expect((await call("GET", "/v1/usage/daily?api_key_id=nope")).status).to.equal(404);
      expect((await call("GET", "/v1/usage?api_key_id=nope")).status).to.equal(404);
      expect((await call("GET", "/v1/usage.csv?from=2026-11-01")).body).to.match(/^created_at,call_id,/);
      expect((await call("GET", "/v1/usage.csv?from=never")).status).to.equal(400);
      expect((await call("GET", "/v1/usage.csv?api_key_id=nope")).status).to.equal(404);
      expect((await call("GET", "/v1/usage/keys")).body.data.keys).to.not.be.empty;
      expect((await call("GET", "/v1/usage/keys", { key: null })).status).to.equal(401);
      expect((await call("GET", "/v1/history")).body.data.items).to.not.be.empty;
      expect((await call("GET", "/v1/history?before=-1")).status).to.equal(400);
    });

    it("GET /v1/earnings, /v1/calls/{callId}/receipt, /v1/me", async () => {
      expect((await call("GET", "/v1/earnings")).status).to.equal(200);
      // Without a chain the gateway does not settle, so there is no receipt to give.
      expect((await call("GET", "/v1/calls/00000000-0000-0000-0000-000000000000/receipt")).status).to.equal(503);
      expect((await call("GET", "/v1/me", { session: seller })).body.data.account_id).to.equal(seller.accountId);
      expect((await call("GET", "/v1/me")).status).to.equal(401);
      expect(
        (await call("PATCH", "/v1/account", { session: seller, body: { display_name: " Seller Co " } })).body.data.display_name,
      ).to.equal("Seller Co");
      expect((await call("PATCH", "/v1/account", { session: seller, body: { display_name: "" } })).status).to.equal(400);
    });

    it("GET /v1/key", async () => {
      expect((await call("GET", "/v1/key")).body.data).to.include.keys("id", "remaining_usd", "available_usd");
      expect((await call("GET", "/v1/key", { key: null })).status).to.equal(401);
    });

    it("POST, GET, PATCH and DELETE /v1/keys", async () => {
      const created = await call("POST", "/v1/keys", { session: seller, body: { name: "ci" } });
      expect(created.status).to.equal(201);
      expect((await call("POST", "/v1/keys", { session: seller, body: { name: 7 } })).body.error).to.match(/^name/);
      expect((await call("POST", "/v1/keys", { session: seller, body: {}, headers: { "x-csrf-token": "wrong" } })).status).to.equal(403);
      expect((await call("GET", "/v1/keys", { session: seller })).body.data).to.have.length(1);
      const path = `/v1/keys/${created.body.data.id}`;
      const limited = await call("PATCH", path, { session: seller, body: { spend_limit_usd: "5", spend_limit_period: "day" } });
      expect(limited.body.data).to.include({ spend_limit_usd: 5, spend_limit_period: "day", spent_usd: 0 });
      expect((await call("PATCH", path, { session: seller, body: { spend_limit_usd: -1 } })).status).to.equal(400);
      expect((await call("PATCH", "/v1/keys/not-a-key", { session: seller, body: { spend_limit_usd: null } })).status).to.equal(404);
      expect((await call("DELETE", `/v1/keys/${created.body.data.id}`, { session: seller })).status).to.equal(200);
      expect((await call("DELETE", `/v1/keys/${created.body.data.id}`, { session: seller })).status).to.equal(404);
    });
  });

  describe("selling", () => {
    it("POST, GET, PATCH and DELETE /v1/seller/skills", async () => {
      const listing = { slug: "contract-echo", name: "Echo", price: "0.01", backend_url: `${stack.backend.url}/echo` };
      expect((await call("POST", "/v1/seller/skills", { session: seller, body: listing })).status).to.equal(201);
      expect((await call("POST", "/v1/seller/skills", { session: seller, body: listing })).status).to.equal(409);
      expect((await call("POST", "/v1/seller/skills", { session: seller, body: { ...listing, price: "0.0000001" } })).body.error).to.match(
        /^price/,
      );
      expect((await call("GET", "/v1/seller/skills", { session: seller })).body.data).to.have.length(1);
      const edited = await call("PATCH", "/v1/seller/skills/contract-echo", {
        session: seller,
        body: { description: "echoes", rate_limit_per_min: 10 },
      });
      expect(edited.body.data?.description, JSON.stringify(edited.body)).to.equal("echoes");
      expect((await call("PATCH", "/v1/seller/skills/contract-echo", { session: seller, body: { slug: "x" } })).status).to.equal(400);
      expect((await call("PATCH", "/v1/seller/skills/nope", { session: seller, body: {} })).status).to.equal(404);
      // An output contract, broken once: the seller's view of the failure.
      await call("PATCH", "/v1/seller/skills/contract-echo", { session: seller, body: { output_schema: { required: ["text"] } } });
      expect((await call("POST", "/v1/call", { body: { skill_id: "contract-echo", input: {} } })).status).to.equal(502);
      const failures = await call("GET", "/v1/seller/skills/contract-echo/output-failures", { session: seller });
      expect(failures.body.data, JSON.stringify(failures.body)).to.have.length(1);
      expect((await call("GET", "/v1/seller/skills/nope/output-failures", { session: seller })).status).to.equal(404);
      // The skill's stats: the broken promise among its failures; a bad range, and an unknown skill, refused.
      const stats = await call("GET", "/v1/seller/skills/contract-echo/stats?days=2", { session: seller });
      expect(stats.body.data.output_contract_failures, JSON.stringify(stats.body)).to.equal(1);
      expect((await call("GET", "/v1/seller/skills/contract-echo/stats?days=0", { session: seller })).status).to.equal(400);
      expect((await call("GET", "/v1/seller/skills/nope/stats", { session: seller })).status).to.equal(404);
      expect((await call("DELETE", "/v1/seller/skills/contract-echo", { session: seller })).body.data.listed).to.equal(false);
      expect((await call("DELETE", "/v1/seller/skills/nope", { session: seller })).status).to.equal(404);
    });

    it("GET and PUT /v1/seller/payout-address", async () => {
      expect((await call("GET", "/v1/seller/payout-address", { session: seller })).body.data.address).to.equal(null);
      const wallet = privateKeyToAccount(`0x${"11".repeat(32)}`);
      expect((await call("PUT", "/v1/seller/payout-address", { session: seller, body: { address: wallet.address } })).status).to.equal(409);
      expect((await call("PUT", "/v1/seller/payout-address", { session: seller, body: { address: "0x12" } })).status).to.equal(400);
      await stack.gw.sessions.signIn("siwe", wallet.address.toLowerCase(), { linkTo: seller.accountId });
      expect((await call("PUT", "/v1/seller/payout-address", { session: seller, body: { address: wallet.address } })).status).to.equal(200);
    });

    it("POST /v1/seller/claim, /prepare and /submit (no chain: refused)", async () => {
      expect((await call("POST", "/v1/seller/claim", { session: seller })).status).to.equal(503);
      expect((await call("POST", "/v1/seller/claim/prepare", { session: seller, body: {} })).status).to.equal(503);
      expect((await call("POST", "/v1/seller/claim/submit", { session: seller, body: { user_op_hash: "0x1" } })).status).to.equal(503);
    });
  });

  describe("money in and out", () => {
    it("POST and GET /v1/withdrawals", async () => {
      expect((await call("GET", "/v1/withdrawals")).body.data).to.deep.equal([]);
      expect((await call("POST", "/v1/withdrawals", { body: {} })).status).to.equal(503);
    });

    it("the embedded wallet's sweep, withdrawals and QR code (no chain: refused)", async () => {
      expect((await call("POST", "/v1/wallet/sweep/prepare", { session: seller })).status).to.equal(503);
      expect((await call("POST", "/v1/wallet/sweep/submit", { session: seller, body: { user_op_hash: "0x12" } })).body.error).to.match(
        /^user_op_hash/,
      );
      const hash = `0x${"ab".repeat(32)}`;
      const signature = `0x${"cd".repeat(65)}`;
      expect((await call("POST", "/v1/wallet/sweep/submit", { session: seller, body: { user_op_hash: hash, signature } })).status).to.equal(
        503,
      );
      const to = privateKeyToAccount(`0x${"22".repeat(32)}`).address;
      expect((await call("POST", "/v1/wallet/withdraw", { session: seller, body: { to } })).status).to.equal(503);
      expect((await call("POST", "/v1/wallet/withdraw/prepare", { session: seller, body: { to } })).status).to.equal(503);
      expect(
        (await call("POST", "/v1/wallet/withdraw/submit", { session: seller, body: { user_op_hash: hash, signature } })).status,
      ).to.equal(503);
      expect((await call("GET", "/v1/wallet/qr.svg", { session: seller })).status).to.equal(404);
    });

    it("card top-ups", async () => {
      expect((await call("POST", "/v1/topups/card", { session: seller, body: { amount: "10.00" } })).status).to.equal(503);
      expect((await call("POST", "/v1/topups/card", { session: seller, body: { amount: "10.001" } })).body.error).to.match(/^amount/);
      expect((await call("GET", "/v1/topups/card/nope", { session: seller })).status).to.equal(404);
      expect((await call("POST", "/v1/topups/card/notify", { body: { checkoutId: "x" }, key: null })).status).to.equal(401);
    });
  });

  describe("signing in", () => {
    it("by e-mail: start, preview, verify", async () => {
      const origin = sameOrigin(stack);
      expect((await call("POST", "/auth/email/start", { key: null, headers: origin, body: { email: "new@example.com" } })).status).to.equal(
        200,
      );
      expect((await call("POST", "/auth/email/start", { key: null, headers: origin, body: { email: "nope" } })).body.code).to.equal(
        "invalid_input",
      );
      expect((await call("POST", "/auth/email/start", { key: null, body: { email: "new@example.com" } })).status).to.equal(403);
      const mail = (await stack.gw.db.value<string>("SELECT body FROM outbox ORDER BY id DESC LIMIT 1"))!;
      const token = decodeURIComponent(/token=([\w%-]+)/.exec(mail)![1]);
      expect((await call("POST", "/auth/email/preview", { key: null, headers: origin, body: { token } })).body.data.action).to.equal(
        "sign_up",
      );
      expect((await call("POST", "/auth/email/preview", { key: null, headers: origin, body: { token: "x" } })).status).to.equal(401);
      expect(
        (await call("POST", "/auth/email/verify", { key: null, headers: origin, body: { token, switch_account: "yes" } })).status,
      ).to.equal(400);
      expect((await call("POST", "/auth/email/verify", { key: null, headers: origin, body: { token } })).body.data.created).to.equal(true);
    });

    it("with Ethereum: nonce, verify", async () => {
      const origin = sameOrigin(stack);
      const wallet = privateKeyToAccount(`0x${"33".repeat(32)}`);
      expect((await call("GET", "/auth/siwe/nonce?address=0x12", { key: null })).status).to.equal(400);
      const nonce = await call("GET", `/auth/siwe/nonce?address=${wallet.address}`, { key: null });
      const message: string = nonce.body.data.message;
      expect((await call("POST", "/auth/siwe/verify", { key: null, headers: origin, body: { message } })).status).to.equal(401);
      const signature = await wallet.signMessage({ message });
      const verified = await call("POST", "/auth/siwe/verify", { key: null, headers: origin, body: { message, signature } });
      expect(verified.body.data.address).to.equal(wallet.address);
    });

    it("with GitHub and Google (not configured here: 404)", async () => {
      for (const provider of ["github", "google"]) {
        expect((await call("GET", `/auth/${provider}/start`, { key: null })).status).to.equal(404);
        expect((await call("GET", `/auth/${provider}/callback?code=x&state=y`, { key: null })).status).to.equal(404);
      }
    });

    it("POST /auth/logout", async () => {
      const leaving = await signedIn(stack, "leaving@example.com");
      expect((await call("POST", "/auth/logout", { session: leaving })).body.data.signed_out).to.equal(true);
      expect((await call("POST", "/auth/logout", { session: leaving })).status).to.equal(401);
    });
  });

  describe("the platform and MCP", () => {
    it("GET /v1/platform, /healthz, /readyz", async () => {
      expect((await call("GET", "/v1/platform", { key: null })).body.data.chain_id).to.equal(null);
      expect((await call("GET", "/healthz", { key: null })).status).to.equal(200);
      expect((await call("GET", "/readyz", { key: null })).status).to.equal(200);
    });

    it("POST /mcp, and the methods it does not serve", async () => {
      const headers = { accept: "application/json, text/event-stream" };
      const list = await call("POST", "/mcp", { headers, body: { jsonrpc: "2.0", id: 1, method: "tools/list", params: {} } });
      expect(list.body.result.tools).to.be.an("array");
      expect((await call("POST", "/mcp?skills=nope", { headers, body: { jsonrpc: "2.0", id: 1, method: "tools/list" } })).status).to.equal(
        404,
      );
      expect(
        (await call("POST", "/mcp", { headers, key: "atom_wrong", body: { jsonrpc: "2.0", id: 1, method: "tools/list" } })).status,
      ).to.equal(401);
      expect((await call("GET", "/mcp", { key: null })).status).to.equal(405);
      expect((await call("DELETE", "/mcp", { key: null })).status).to.equal(405);
    });
  });

  describe("connecting a remote MCP client (OAuth)", () => {
    it("GET /v1/oauth/requests/{requestId}, and POST its approve and deny", async () => {
      const registered = await send(
        `${stack.url}/oauth/register`,
        "POST",
        {},
        { client_name: "Contract", redirect_uris: ["http://127.0.0.1:9/cb"] },
      );
      const begin = async () => {
        const url = new URL(`${stack.url}/oauth/authorize`);
        for (const [name, value] of Object.entries({
          client_id: registered.body.client_id,
          response_type: "code",
          code_challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
          code_challenge_method: "S256",
          redirect_uri: "http://127.0.0.1:9/cb",
        }))
          url.searchParams.set(name, value);
        const res = await fetch(url, { redirect: "manual" });
        return new URL(res.headers.get("location")!).searchParams.get("request")!;
      };
      const first = await begin();
      expect((await call("GET", `/v1/oauth/requests/${first}`, { session: seller })).body.data.client_name).to.equal("Contract");
      expect((await call("GET", "/v1/oauth/requests/sgar_unknown", { session: seller })).status).to.equal(404);
      const approved = await call("POST", `/v1/oauth/requests/${first}/approve`, {
        session: seller,
        body: { spend_limit_usd: "1", spend_limit_period: "day" },
      });
      expect(approved.body.data.redirect_to).to.match(/^http:\/\/127\.0\.0\.1:9\/cb\?code=sgac_/);
      expect(
        (await call("POST", `/v1/oauth/requests/${first}/approve`, { session: seller, body: { spend_limit_usd: null } })).status,
      ).to.equal(404);
      const denied = await call("POST", `/v1/oauth/requests/${await begin()}/deny`, { session: seller });
      expect(denied.body.data.redirect_to).to.contain("error=access_denied");
    });
  });

  describe("e-mail links opened by hand", () => {
    it("GET /auth/email/verify and /auth/email/preview: a browser is sent to the link's page, any other client gets 404", async () => {
      for (const step of ["verify", "preview"]) {
        const browser = await call("GET", `/auth/email/${step}?token=abc`, { key: null, headers: { accept: "text/html" } });
        expect(browser.status).to.equal(303);
        expect((await call("GET", `/auth/email/${step}?token=abc`, { key: null })).status).to.equal(404);
      }
    });
  });

  describe("x402", () => {
    it("POST /x402/skills/{skillId}/call and GET /x402/discovery/resources (no escrow chain here: 503)", async () => {
      // Paid calls and discovery on a chain: test/x402/x402.test.ts, checked against the same document.
      expect((await call("POST", "/x402/skills/echo/call", { key: null, body: {} })).body.code).to.equal("chain_not_configured");
      expect((await call("GET", "/x402/discovery/resources", { key: null })).status).to.equal(503);
    });
  });

  // Last: mocha runs a suite's own tests before its nested suites.
  describe("in all", () => {
    it("called every operation the document declares, and every answer conformed", () => {
      expect(problems).to.deep.equal([]);
      const missed = checker.operations().filter((op) => !checker.exercised.has(op));
      expect(missed, `operations never called: ${missed.join(", ")}`).to.deep.equal([]);
    });
  });
});
