import http from "node:http";
import { expect } from "chai";
import { SiweMessage } from "siwe";
import { type Address, type Hex, encodeFunctionData, getAddress, getContractAddress, serializeErc6492Signature } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { CSRF_COOKIE, SESSION_COOKIE } from "../../server/http/session-cookies";
import { SIWE_CLOCK_SKEW_MS } from "../../server/identity/siwe";
import { type TestStack, startStack } from "../helpers/gateway";
import { type Reply, sameOrigin, send, signedIn } from "../helpers/session";

// Fixed keys: the same signatures on every run.
const ALICE = privateKeyToAccount(`0x${"11".repeat(32)}`);
const MALLORY = privateKeyToAccount(`0x${"22".repeat(32)}`);

type Fields = Partial<ConstructorParameters<typeof SiweMessage>[0] & object>;

/** An ISO time `offsetMs` from now. */
const at = (offsetMs: number) => new Date(Date.now() + offsetMs).toISOString();

/** The message a wallet would be asked to sign for this gateway, with `overrides` on top. */
function siweMessage(stack: TestStack, address: Address, nonce: string, overrides: Fields = {}): string {
  const origin = new URL(stack.url);
  return new SiweMessage({
    domain: origin.host,
    address,
    statement: "Sign in to Skill Gateway.",
    uri: origin.origin,
    version: "1",
    chainId: 8453,
    nonce,
    issuedAt: new Date().toISOString(),
    ...overrides,
  }).prepareMessage();
}

const nonceOf = async (stack: TestStack): Promise<string> => (await send(`${stack.url}/auth/siwe/nonce`, "GET", {})).body.data.nonce;

/** POST /auth/siwe/verify as the dashboard's page sends it (its Origin), with `headers` on top. */
const verify = (stack: TestStack, message: string, signature: string, headers: Record<string, string> = {}) =>
  send(`${stack.url}/auth/siwe/verify`, "POST", { ...sameOrigin(stack), ...headers }, { message, signature });

/** The whole flow for an EOA: nonce, message, signature, verify. */
async function signInAs(stack: TestStack, signer = ALICE, overrides: Fields = {}, headers: Record<string, string> = {}): Promise<Reply> {
  const message = siweMessage(stack, signer.address, await nonceOf(stack), overrides);
  return verify(stack, message, await signer.signMessage({ message }), headers);
}

function cookiesOf(reply: Reply): Record<string, string> {
  return Object.fromEntries(reply.headers.getSetCookie().map((c) => c.split(";")[0].split("=") as [string, string]));
}

/** Rows of the tables a sign-in may write; a refused one writes nothing but its nonce's use. */
async function footprint(stack: TestStack) {
  const count = (table: string) => stack.gw.ledger.db.value(`SELECT COUNT(*) FROM ${table}`);
  return { accounts: await count("accounts"), identities: await count("identities"), sessions: await count("sessions") };
}

function expectRefused(reply: Reply, mentioning: RegExp) {
  expect(reply.status, JSON.stringify(reply.body)).to.equal(401);
  expect(reply.body).to.include({ success: false, code: "unauthorized" });
  expect(reply.body.error).to.match(mentioning);
  expect(reply.headers.getSetCookie()).to.deep.equal([]);
}

describe("Sign-In With Ethereum (/auth/siwe)", () => {
  let stack: TestStack;
  beforeEach(async () => {
    stack = await startStack();
  });
  afterEach(async () => {
    await stack.close();
  });

  describe("GET /auth/siwe/nonce", () => {
    it("hands out a fresh nonce with what the message must name", async () => {
      const a = await send(`${stack.url}/auth/siwe/nonce`, "GET", {});
      const b = await send(`${stack.url}/auth/siwe/nonce`, "GET", {});
      expect(a.status).to.equal(200);
      expect(a.body.data.nonce).to.match(/^[1-9A-HJ-NP-Za-km-z]{16,}$/);
      expect(a.body.data.nonce).to.not.equal(b.body.data.nonce);
      const origin = new URL(stack.url);
      expect(a.body.data).to.include({ domain: origin.host, uri: origin.origin, chain_id: 8453 });
      const ttlMs = Date.parse(a.body.data.expires_at) - Date.now();
      expect(ttlMs).to.be.within(9 * 60_000, 10 * 60_000);
      expect(a.headers.get("cache-control")).to.equal("no-store");
    });
  });

  describe("POST /auth/siwe/verify", () => {
    it("creates the account on first sign-in and opens a session; the next sign-in finds it", async () => {
      const first = await signInAs(stack);
      expect(first.status, JSON.stringify(first.body)).to.equal(200);
      expect(first.body.data).to.include({ address: ALICE.address, created: true, linked: false });
      const cookies = cookiesOf(first);
      expect(cookies[CSRF_COOKIE]).to.equal(first.body.data.csrf_token);
      expect(first.headers.getSetCookie().find((c) => c.startsWith(`${SESSION_COOKIE}=`)))
        .to.match(/HttpOnly/i)
        .and.match(/SameSite=Lax/i);

      const me = await send(`${stack.url}/v1/me`, "GET", { cookie: `${SESSION_COOKIE}=${cookies[SESSION_COOKIE]}` });
      expect(me.status).to.equal(200);
      expect(me.body.data.account_id).to.equal(first.body.data.account_id);
      expect(me.body.data.identities.map((i: { provider: string; subject: string }) => [i.provider, i.subject])).to.deep.equal([
        ["siwe", ALICE.address],
      ]);

      const again = await signInAs(stack);
      expect(again.body.data).to.include({ account_id: first.body.data.account_id, created: false, linked: false });
    });

    it("accepts a message issued up to the clock skew ahead of the gateway's clock", async () => {
      const reply = await signInAs(stack, ALICE, { issuedAt: at(SIWE_CLOCK_SKEW_MS - 30_000) });
      expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
    });

    it("accepts a message with expirationTime and notBefore that hold now", async () => {
      const reply = await signInAs(stack, ALICE, {
        notBefore: new Date(Date.now() - 60_000).toISOString(),
        expirationTime: new Date(Date.now() + 60_000).toISOString(),
      });
      expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
    });

    describe("refuses, with 401, writing nothing but the nonce's use", () => {
      let before: Awaited<ReturnType<typeof footprint>>;
      beforeEach(async () => {
        before = await footprint(stack);
      });
      afterEach(async () => {
        expect(await footprint(stack)).to.deep.equal(before);
      });

      it("a message for another domain", async () => {
        expectRefused(await signInAs(stack, ALICE, { domain: "evil.example" }), /domain must be 127\.0\.0\.1:\d+/);
      });

      it("a message whose URI is on another origin", async () => {
        expectRefused(await signInAs(stack, ALICE, { uri: "https://evil.example/login" }), /URI must be on http:\/\/127\.0\.0\.1:\d+/);
      });

      it("a message whose scheme is not the dashboard's", async () => {
        expectRefused(await signInAs(stack, ALICE, { scheme: "https" }), /scheme must be http/);
      });

      it("a message for another chain", async () => {
        expectRefused(await signInAs(stack, ALICE, { chainId: 1 }), /chain id must be 8453/);
      });

      it("a nonce used once already", async () => {
        const message = siweMessage(stack, ALICE.address, await nonceOf(stack));
        const signature = await ALICE.signMessage({ message });
        expect((await verify(stack, message, signature)).status).to.equal(200);
        before = await footprint(stack);
        expectRefused(await verify(stack, message, signature), /used or expired nonce/);
      });

      it("an expired nonce", async () => {
        const nonce = await nonceOf(stack);
        await stack.gw.ledger.db.transaction((tx) =>
          tx.run("UPDATE siwe_nonces SET expires_at = ? WHERE nonce = ?", [Date.now() - 1, nonce]),
        );
        const message = siweMessage(stack, ALICE.address, nonce);
        expectRefused(await verify(stack, message, await ALICE.signMessage({ message })), /used or expired nonce/);
      });

      it("a nonce the gateway never issued", async () => {
        const message = siweMessage(stack, ALICE.address, "madeUpNonce12345");
        expectRefused(await verify(stack, message, await ALICE.signMessage({ message })), /Unknown, used or expired nonce/);
      });

      /** Timestamps a message cannot carry, each relative to now; the skew allowed is SIWE_CLOCK_SKEW_MS (5 minutes). */
      const TIMESTAMPS: Array<[string, () => Fields, RegExp]> = [
        ["a message issued in the year 2100", () => ({ issuedAt: "2100-01-01T00:00:00.000Z" }), /issued-at time is in the future/],
        [
          "a message issued six minutes ahead of the gateway's clock",
          () => ({ issuedAt: at(6 * 60_000) }),
          /issued-at time is in the future/,
        ],
        ["a message whose notBefore is in the future", () => ({ notBefore: at(60_000) }), /not valid yet/],
        ["a message past its expirationTime", () => ({ expirationTime: at(-1_000) }), /expired/],
      ];
      for (const [what, fields, mentioning] of TIMESTAMPS) {
        it(what, async () => {
          expectRefused(await signInAs(stack, ALICE, fields()), mentioning);
        });
      }

      it("a malformed message", async () => {
        const signature = await ALICE.signMessage({ message: "let me in" });
        expectRefused(await verify(stack, "let me in", signature), /not an EIP-4361/);
      });

      it("a body without message or signature", async () => {
        expectRefused(
          await send(`${stack.url}/auth/siwe/verify`, "POST", sameOrigin(stack), { message: 42 }),
          /Send \{ message, signature \}/,
        );
      });

      it("a signature that is not hex", async () => {
        const message = siweMessage(stack, ALICE.address, await nonceOf(stack));
        expectRefused(await verify(stack, message, "not a signature"), /0x-prefixed hex/);
      });

      it("a signature by another address than the message's", async () => {
        const message = siweMessage(stack, ALICE.address, await nonceOf(stack));
        expectRefused(await verify(stack, message, await MALLORY.signMessage({ message })), new RegExp(`not ${ALICE.address}'s signature`));
      });

      it("a smart account's signature when the gateway has no chain to ask", async () => {
        // Without options.chain only EOA signatures can be checked (documented in docs/accounts.md).
        const wallet = getAddress("0x00000000000000000000000000000000000000aa");
        const message = siweMessage(stack, wallet, await nonceOf(stack));
        expectRefused(await verify(stack, message, await ALICE.signMessage({ message })), new RegExp(`not ${wallet}'s signature`));
      });
    });

    it("spends the nonce on a bad signature: the right one cannot follow with it", async () => {
      const message = siweMessage(stack, ALICE.address, await nonceOf(stack));
      expectRefused(await verify(stack, message, await MALLORY.signMessage({ message })), /signature/);
      expectRefused(await verify(stack, message, await ALICE.signMessage({ message })), /nonce/);
    });

    it("lets exactly one of two concurrent uses of a message through", async () => {
      const message = siweMessage(stack, ALICE.address, await nonceOf(stack));
      const signature = await ALICE.signMessage({ message });
      const replies = await Promise.all([verify(stack, message, signature), verify(stack, message, signature)]);
      expect(replies.map((r) => r.status).sort()).to.deep.equal([200, 401]);
      expect(await stack.gw.ledger.db.value("SELECT COUNT(*) FROM identities WHERE provider = 'siwe'")).to.equal(1n);
    });

    it("never takes its origin from the request's Host header", async () => {
      // A phishing page's message names the phishing domain; a forged Host must not vouch for it.
      const nonce = await nonceOf(stack);
      const message = siweMessage(stack, ALICE.address, nonce, { domain: "evil.example", uri: "http://evil.example" });
      const body = JSON.stringify({ message, signature: await ALICE.signMessage({ message }) });
      const status = await new Promise<number>((resolve, reject) => {
        // From the dashboard's own page (its Origin), so that what refuses is the message's domain.
        const headers = { host: "evil.example", ...sameOrigin(stack), "content-type": "application/json" };
        const req = http.request(`${stack.url}/auth/siwe/verify`, { method: "POST", headers }, (res) => {
          res.resume();
          resolve(res.statusCode!);
        });
        req.on("error", reject);
        req.end(body);
      });
      expect(status).to.equal(401);
    });

    describe("while signed in", () => {
      it("links the wallet to the signed-in account instead of creating one", async () => {
        const ada = await signedIn(stack, "ada@example.com");
        const reply = await signInAs(stack, ALICE, {}, { cookie: ada.cookie, "x-csrf-token": ada.csrfToken });
        expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
        expect(reply.body.data).to.include({ account_id: ada.accountId, created: false, linked: true });
        expect(reply.headers.getSetCookie()).to.deep.equal([]);
        expect((await stack.gw.sessions.identitiesOf(ada.accountId)).map((i) => i.provider)).to.deep.equal(["email", "siwe"]);
      });

      it("needs the session's CSRF token to link, so another site cannot link its wallet", async () => {
        const ada = await signedIn(stack, "ada@example.com");
        const reply = await signInAs(stack, MALLORY, {}, { cookie: ada.cookie });
        expect(reply.status).to.equal(403);
        expect(reply.body.code).to.equal("csrf_failed");
        expect((await stack.gw.sessions.identitiesOf(ada.accountId)).map((i) => i.provider)).to.deep.equal(["email"]);
      });

      it("refuses to link a wallet that signs in to another account", async () => {
        expect((await signInAs(stack, ALICE)).status).to.equal(200);
        const ada = await signedIn(stack, "ada@example.com");
        const reply = await signInAs(stack, ALICE, {}, { cookie: ada.cookie, "x-csrf-token": ada.csrfToken });
        expect(reply.status).to.equal(409);
        expect(reply.body.code).to.equal("identity_taken");
      });
    });
  });

  describe("with PUBLIC_URL and SIWE_CHAIN_ID set", () => {
    /** The Origin of the dashboard's pages there. */
    const DASHBOARD = { origin: "https://dash.example" };
    let configured: TestStack;
    before(async () => {
      configured = await startStack({ config: { publicUrl: "https://dash.example", siweChainId: 84532 } });
    });
    after(async () => {
      await configured.close();
    });

    it("wants the public URL's domain and origin and the configured chain", async () => {
      const nonce = (await send(`${configured.url}/auth/siwe/nonce`, "GET", {})).body.data;
      expect(nonce).to.include({ domain: "dash.example", uri: "https://dash.example", chain_id: 84532 });
      const message = new SiweMessage({
        domain: "dash.example",
        address: ALICE.address,
        uri: "https://dash.example/login",
        version: "1",
        chainId: 84532,
        nonce: nonce.nonce,
      }).prepareMessage();
      const reply = await verify(configured, message, await ALICE.signMessage({ message }), DASHBOARD);
      expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
    });

    it("refuses a message for the address the request reached", async () => {
      expectRefused(await signInAs(configured, ALICE, { chainId: 84532 }, DASHBOARD), /domain must be dash\.example/);
    });
  });
});

describe("Sign-In With Ethereum with smart accounts (gateway with a chain)", () => {
  let stack: TestStack;
  let factory: Address;
  let deployWallet: (owner: Address, salt: Hex) => Promise<Address>;
  let predictWallet: (owner: Address, salt: Hex) => Address;
  let walletFactoryCalldata: (owner: Address, salt: Hex) => Hex;
  let failNextRequests: (count: number) => void;

  before(async function () {
    this.timeout(60_000);
    // Loaded here, not at the top: Hardhat's runtime costs its start-up only to the tests that need it.
    const hre = (await import("hardhat")).default;
    const { gatewayChain, startLocalChain } = await import("../helpers/chain");
    const chain = await startLocalChain();
    failNextRequests = (count) => chain.failNextRequests(count);
    stack = await startStack({ gateway: { chain: await gatewayChain(chain) } });
    const deployed = await hre.viem.deployContract("OwnedSignatureWalletFactory");
    factory = deployed.address;
    const walletArtifact = await hre.artifacts.readArtifact("OwnedSignatureWallet");
    const { encodeDeployData } = await import("viem");
    predictWallet = (owner, salt) =>
      getContractAddress({
        opcode: "CREATE2",
        from: factory,
        salt,
        bytecode: encodeDeployData({ abi: walletArtifact.abi, bytecode: walletArtifact.bytecode as Hex, args: [owner] }),
      });
    walletFactoryCalldata = (owner, salt) => encodeFunctionData({ abi: deployed.abi, functionName: "deploy", args: [owner, salt] });
    deployWallet = async (owner, salt) => {
      const publicClient = await hre.viem.getPublicClient();
      const hash = await deployed.write.deploy([owner, salt]);
      await publicClient.waitForTransactionReceipt({ hash });
      return predictWallet(owner, salt);
    };
  });
  after(async () => {
    await stack?.close();
  });

  it("accepts a deployed smart account's ERC-1271 signature", async () => {
    const wallet = await deployWallet(ALICE.address, `0x${"01".repeat(32)}`);
    const message = siweMessage(stack, wallet, await nonceOf(stack));
    const reply = await verify(stack, message, await ALICE.signMessage({ message }));
    expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
    expect(reply.body.data).to.include({ address: wallet, created: true });
  });

  it("accepts a not-yet-deployed smart account's ERC-6492 signature", async () => {
    const salt: Hex = `0x${"02".repeat(32)}`;
    const wallet = predictWallet(ALICE.address, salt);
    const message = siweMessage(stack, wallet, await nonceOf(stack));
    const signature = serializeErc6492Signature({
      address: factory,
      data: walletFactoryCalldata(ALICE.address, salt),
      signature: await ALICE.signMessage({ message }),
    });
    const reply = await verify(stack, message, signature);
    expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
    expect(reply.body.data).to.include({ address: wallet, created: true });
  });

  it("refuses a smart account's signature by someone who is not its owner", async () => {
    const wallet = await deployWallet(ALICE.address, `0x${"03".repeat(32)}`);
    const message = siweMessage(stack, wallet, await nonceOf(stack));
    expectRefused(await verify(stack, message, await MALLORY.signMessage({ message })), /signature/);
  });

  it("fails closed when the chain cannot be asked about a smart account's signature", async () => {
    // viem reads a failed eth_call as a signature that does not verify: the sign-in is refused.
    const wallet = await deployWallet(ALICE.address, `0x${"04".repeat(32)}`);
    const message = siweMessage(stack, wallet, await nonceOf(stack));
    const signature = await ALICE.signMessage({ message });
    failNextRequests(10);
    const reply = await verify(stack, message, signature);
    failNextRequests(0);
    expectRefused(reply, /signature/);
  });

  it("still accepts an EOA's signature", async () => {
    expect((await signInAs(stack, MALLORY)).status).to.equal(200);
  });
});
