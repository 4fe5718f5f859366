import { expect } from "chai";
import { getAddress } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { type TestStack, startStack } from "../helpers/gateway";
import { type TestSession, sameOrigin, send, signedIn } from "../helpers/session";
import { type AaStack, gatewayOptionsFor, startAaStack } from "../helpers/aa-stack";
import { DEV_ACCOUNT_INDEX, devAccount } from "../../server/devstack/local-node";

/**
 * The JSON the dashboard reads beyond the accounts API: an account's own endpoints from a
 * session, usage with settlement and per day, the skills' sellers, "try it", the SIWE message,
 * the platform, the wallet's QR code and the money history.
 */
describe("dashboard API", () => {
  describe("on a gateway without a chain", () => {
    let stack: TestStack;
    let ada: TestSession;
    let adaKey: { id: string; key: string };

    beforeEach(async () => {
      stack = await startStack();
      ada = await signedIn(stack, "ada@example.com");
      await stack.gw.ledger.credit(ada.accountId, 1_000_000n, "dev_credit", "test");
      await stack.gw.db.durable();
      const created = await ada.request("POST", "/v1/keys", { name: "laptop" });
      adaKey = { id: created.body.data.id, key: created.body.data.key };
    });
    afterEach(async () => {
      await stack.close();
    });

    describe("an account's own endpoints, from a session or an API key", () => {
      it("answers the session's balance, and a key's balance with a key", async () => {
        const bySession = await ada.request("GET", "/v1/balance");
        expect(bySession.status).to.equal(200);
        expect(bySession.body.data).to.include({ available: 1, held: 0 });
        const byKey = await stack.get("/v1/balance");
        expect(byKey.body.data.available).to.equal(10);
      });

      it("checks an Authorization header as a key even beside a session, and wants one of the two", async () => {
        const badKey = await send(`${stack.url}/v1/balance`, "GET", { cookie: ada.cookie, authorization: "Bearer atom_nope" });
        expect(badKey.status).to.equal(401);
        expect((await send(`${stack.url}/v1/usage`, "GET", {})).status).to.equal(401);
      });

      it("needs the session's CSRF token to ask for a withdrawal", async () => {
        const forged = await ada.request("POST", "/v1/withdrawals", { amount: "0.5" }, { csrf: false });
        expect(forged.status).to.equal(403);
        expect(forged.body.code).to.equal("csrf_failed");
        expect(await stack.available(ada.accountId)).to.equal(1_000_000n);
      });
    });

    describe("GET /v1/usage and /v1/usage/daily", () => {
      it("shows each call's skill name and settlement state", async () => {
        expect((await stack.post("/v1/call", { skill_id: "echo", input: {} }, { key: adaKey.key })).status).to.equal(200);
        expect((await stack.post("/v1/call", { skill_id: "fail", input: {} }, { key: adaKey.key })).status).to.equal(502);
        const usage = await ada.request("GET", "/v1/usage");
        expect(usage.status).to.equal(200);
        const [failed, paid] = usage.body.data.calls;
        expect(paid).to.include({ skill_id: "echo", skill_name: "echo", cost: 0.001, settlement: "unsettled", batch_number: null });
        expect(failed).to.include({ skill_id: "fail", cost: 0, settlement: "not_charged", batch_number: null });
      });

      it("sums spend and calls per UTC day, with the days without calls, oldest first", async () => {
        for (let i = 0; i < 3; i++) await stack.post("/v1/call", { skill_id: "echo", input: {} }, { key: adaKey.key });
        await stack.post("/v1/call", { skill_id: "fail", input: {} }, { key: adaKey.key });
        const daily = await ada.request("GET", "/v1/usage/daily?days=3");
        expect(daily.status).to.equal(200);
        const days = daily.body.data.days;
        expect(days).to.have.length(3);
        const today = new Date().toISOString().slice(0, 10);
        expect(days[2]).to.deep.equal({ date: today, spend: 0.003, spend_base_units: "3000", calls: 4, refused: 0 });
        expect(days[0]).to.include({ spend: 0, calls: 0 });
        expect(Date.parse(days[1].date) - Date.parse(days[0].date)).to.equal(86_400_000);
        expect((await ada.request("GET", "/v1/usage/daily?days=0")).status).to.equal(400);
        expect((await ada.request("GET", "/v1/usage/daily?days=abc")).body.code).to.equal("invalid_request");
      });
    });

    describe("GET /v1/skills: who sells each skill", () => {
      it("names the seller, but never by an e-mail address", async () => {
        const echo = (await stack.get("/v1/skills/echo", null)).body.data;
        expect(echo.seller).to.deep.equal({ name: "Seller One", address: null });
        // A seller who signed up by e-mail is named by its account name, the address itself.
        const listed = await ada.request("POST", "/v1/seller/skills", {
          slug: "ada-skill",
          name: "Ada's skill",
          price: "0.01",
          backend_url: `${stack.backend.url}/echo`,
        });
        expect(listed.status).to.equal(201);
        const mine = (await stack.get("/v1/skills/ada-skill", null)).body.data;
        expect(JSON.stringify(mine)).to.not.include("ada@example.com");
        // Without a chain Ada has no escrow address either: the marketplace says so rather than guess.
        expect(mine.seller).to.deep.equal({ name: "an unnamed seller", address: null });
      });
    });

    describe("POST /v1/skills/:skillId/try", () => {
      it("calls the skill as the chosen key and answers what the call endpoint would, charging the price", async () => {
        const tried = await ada.request("POST", "/v1/skills/echo/try", { key_id: adaKey.id, input: { hello: "try" } });
        expect(tried.status).to.equal(200);
        expect(tried.body.success).to.equal(true);
        expect(tried.body.data).to.deep.include({ hello: "try" });
        expect(tried.body.metadata).to.include({ skillId: "echo", cost: 0.001 });
        expect(await stack.available(ada.accountId)).to.equal(999_000n);
        const usage = (await ada.request("GET", "/v1/usage")).body.data.calls;
        expect(usage).to.have.length(1);
        expect(usage[0]).to.include({ skill_id: "echo", endpoint: "/v1/skills/:skillId/call" });
      });

      it("does not charge when the skill fails, and says so in the spec's envelope", async () => {
        const tried = await ada.request("POST", "/v1/skills/fail/try", { key_id: adaKey.id, input: {} });
        expect(tried.status).to.equal(502);
        expect(tried.body).to.include({ success: false });
        expect(tried.body.error).to.be.a("string");
        expect(await stack.available(ada.accountId)).to.equal(1_000_000n);
      });

      it("refuses a revoked key, another account's key, no CSRF token and no session, calling nothing", async () => {
        await ada.request("DELETE", `/v1/keys/${adaKey.id}`);
        const revoked = await ada.request("POST", "/v1/skills/echo/try", { key_id: adaKey.id, input: {} });
        expect(revoked.status).to.equal(404);
        expect(revoked.body.error).to.match(/revoked/);

        const bob = await signedIn(stack, "bob@example.com");
        const bobKey = (await bob.request("POST", "/v1/keys", { name: "bob" })).body.data.id;
        expect((await ada.request("POST", "/v1/skills/echo/try", { key_id: bobKey, input: {} })).status).to.equal(404);
        expect((await bob.request("POST", "/v1/skills/echo/try", { key_id: bobKey, input: {} }, { csrf: false })).status).to.equal(403);
        expect((await send(`${stack.url}/v1/skills/echo/try`, "POST", {}, { key_id: bobKey, input: {} })).status).to.equal(401);
        expect(await stack.gw.db.value("SELECT COUNT(*) FROM calls")).to.equal(0n);
      });

      it("refuses a missing key_id and an input that is not an object", async () => {
        expect((await ada.request("POST", "/v1/skills/echo/try", { input: {} })).body.code).to.equal("invalid_request");
        expect((await ada.request("POST", "/v1/skills/echo/try", { key_id: adaKey.id, input: [1] })).body.code).to.equal("invalid_request");
        expect((await ada.request("POST", "/v1/skills/nope/try", { key_id: adaKey.id, input: {} })).status).to.equal(404);
      });
    });

    describe("GET /auth/siwe/nonce?address=", () => {
      it("returns a ready EIP-4361 message that signs in when signed", async () => {
        const wallet = privateKeyToAccount(`0x${"4a".repeat(32)}`);
        const nonce = await send(`${stack.url}/auth/siwe/nonce?address=${wallet.address.toLowerCase()}`, "GET", {});
        expect(nonce.status).to.equal(200);
        const { message } = nonce.body.data;
        expect(message).to.include(wallet.address).and.include(`Nonce: ${nonce.body.data.nonce}`).and.include("Chain ID: 8453");
        const signature = await wallet.signMessage({ message });
        const verified = await send(`${stack.url}/auth/siwe/verify`, "POST", sameOrigin(stack), { message, signature });
        expect(verified.status).to.equal(200);
        expect(verified.body.data.address).to.equal(wallet.address);
      });

      it("refuses a malformed address without spending a nonce", async () => {
        const before = await stack.gw.db.value("SELECT COUNT(*) FROM siwe_nonces");
        const bad = await send(`${stack.url}/auth/siwe/nonce?address=0x1234`, "GET", {});
        expect(bad.status).to.equal(400);
        expect(await stack.gw.db.value("SELECT COUNT(*) FROM siwe_nonces")).to.equal(before);
      });
    });

    it("GET /v1/platform says which sign-ins are on, the bounds the dashboard's forms state, and that there is no chain", async () => {
      const platform = await send(`${stack.url}/v1/platform`, "GET", {});
      expect(platform.status).to.equal(200);
      expect(platform.body.data).to.deep.equal({
        chain_id: null,
        escrow: null,
        usdc: null,
        min_deposit: null,
        card_topup_max: 10_000,
        skill_price_min: 0.001,
        skill_price_max: 0.5,
        fee_bps: 1000,
        fee_mode: "included",
        email_delivery: "outbox",
        sign_in: { email: true, siwe: true, github: false, google: false },
      });
    });
  });

  describe("on a chain with embedded wallets", function () {
    this.timeout(120_000);
    let aa: AaStack;
    let stack: TestStack;
    let ada: TestSession;

    before(async () => {
      aa = await startAaStack();
      const options = gatewayOptionsFor(aa);
      const walletFor = (index: number) => aa.node.walletFor(devAccount(index));
      stack = await startStack({
        buyerUsd: "0",
        gateway: {
          ...options,
          chain: {
            ...options.chain!,
            fundingWallet: walletFor(DEV_ACCOUNT_INDEX.deployer),
            voucherSigner: walletFor(DEV_ACCOUNT_INDEX.voucherSigner),
          },
        },
      });
      ada = await signedIn(stack, "ada@example.com");
      await stack.gw.wallets!.ensureFor(ada.accountId);
    });
    after(async () => {
      await stack?.close();
      await aa?.stop();
    });

    it("GET /v1/platform names the chain, the escrow, its USDC and minimum deposit", async () => {
      const platform = (await send(`${stack.url}/v1/platform`, "GET", {})).body.data;
      expect(platform).to.include({ chain_id: 8453, escrow: aa.deployment.escrow, usdc: aa.deployment.usdc, min_deposit: 1 });
    });

    it("GET /v1/wallet/qr.svg draws the EIP-681 transfer to the wallet, for the session only", async () => {
      const res = await fetch(`${stack.url}/v1/wallet/qr.svg`, { headers: { cookie: ada.cookie } });
      expect(res.status).to.equal(200);
      expect(res.headers.get("content-type")).to.match(/^image\/svg\+xml/);
      expect(await res.text()).to.match(/^<svg[^>]*xmlns="http:\/\/www.w3.org\/2000\/svg"/);
      expect((await fetch(`${stack.url}/v1/wallet/qr.svg`)).status).to.equal(401);
    });

    it("refuses an empty withdrawal amount rather than read it as everything, taking nothing", async () => {
      const empty = await ada.request("POST", "/v1/withdrawals", { amount: "" });
      expect(empty.status).to.equal(400);
      expect(empty.body.error).to.match(/amount must be a USD amount/);
      expect(await stack.gw.db.value("SELECT COUNT(*) FROM vouchers")).to.equal(0n);
    });

    it("GET /v1/history lists card top-ups, transfers, charges and withdrawals, newest first, signed", async () => {
      const me = (await ada.request("GET", "/v1/me")).body.data;
      const wallet = getAddress(me.wallet.address);

      const card = await ada.request("POST", "/v1/topups/card", { amount: "5.00", card: "4242 4242 4242 4242" });
      expect(card.status).to.equal(201);
      await aa.mint(wallet, 2_000_000n);
      expect(await stack.gw.wallets!.sweepAll()).to.equal(1);
      await stack.gw.moneyPath!.indexer.poll();
      await stack.gw.moneyPath!.indexer.poll();
      expect(await stack.available(ada.accountId)).to.equal(7_000_000n);

      const key = (await ada.request("POST", "/v1/keys", { name: "k" })).body.data.id;
      expect((await ada.request("POST", "/v1/skills/echo/try", { key_id: key, input: {} })).status).to.equal(200);
      const withdrawal = await ada.request("POST", "/v1/withdrawals", { amount: "1.5" });
      expect(withdrawal.status).to.equal(200);

      const history = await ada.request("GET", "/v1/history");
      expect(history.status).to.equal(200);
      const items = history.body.data.items as Array<Record<string, unknown>>;
      expect(items.map((i) => [i.type, i.amount_base_units])).to.deep.equal([
        ["withdrawal", "-1500000"],
        ["charge", "-1000"],
        ["deposit", "2000000"],
        ["card_topup", "5000000"],
      ]);
      expect(items[0]).to.include({ status: "issued", amount: -1.5 });
      expect(items[1]).to.include({ status: "unsettled", description: "Call to echo" });
      expect(items[3].tx_hash).to.equal(card.body.data.deposit_tx);
      const times = items.map((i) => Date.parse(i.created_at as string));
      expect([...times].sort((a, b) => b - a)).to.deep.equal(times);

      // Signed amounts add up to the balance the ledger holds.
      const sum = items.reduce((s, i) => s + BigInt(i.amount_base_units as string), 0n);
      expect(sum).to.equal(await stack.available(ada.accountId));
      expect((await ada.request("GET", "/v1/history?limit=2")).body.data.items).to.have.length(2);
      expect((await send(`${stack.url}/v1/history`, "GET", {})).status).to.equal(401);
    });
  });
});
