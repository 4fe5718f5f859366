import { expect } from "chai";
import type { Request } from "express";
import { type ClientRateLimitInfo, MemoryStore, type Store } from "express-rate-limit";
import { privateKeyToAccount } from "viem/accounts";
import type { Config } from "../../server/config";
import { type RateLimitName, clientKey } from "../../server/http/rate-limits";
import { type TestStack, startStack } from "../helpers/gateway";
import { type Reply, sameOrigin, send, signedIn } from "../helpers/session";

const WALLET = privateKeyToAccount(`0x${"44".repeat(32)}`);

/** What a flood leaves behind in each table anyone can make the gateway write to. */
async function stored(stack: TestStack) {
  const count = async (table: string) => Number(await stack.gw.db.value(`SELECT COUNT(*) FROM ${table}`));
  return {
    mails: await count("outbox"),
    links: await count("email_sign_in_tokens"),
    nonces: await count("siwe_nonces"),
    states: await count("oauth_states"),
  };
}

function expectRateLimited(reply: Reply) {
  expect(reply.status, JSON.stringify(reply.body)).to.equal(429);
  expect(reply.body).to.include({ success: false, code: "rate_limited" });
  expect(reply.body.error)
    .to.be.a("string")
    .and.match(/try again in \d+ s/i);
  expect(Number(reply.headers.get("retry-after"))).to.be.within(1, 3_600);
}

describe("floods of unauthenticated requests", () => {
  let stack: TestStack;
  const start = async (config: Partial<Config> = {}) => {
    stack = await startStack({ config });
  };
  afterEach(async () => {
    await stack?.close();
  });

  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    send(stack.url + path, "POST", { ...sameOrigin(stack), ...headers }, body);
  const get = (path: string, headers: Record<string, string> = {}) => send(stack.url + path, "GET", headers);

  describe("the sign-in limit, per client address", () => {
    /** Every sign-in endpoint, with a request it would otherwise answer. */
    const SIGN_IN: Array<[string, () => Promise<Reply>]> = [
      ["POST /auth/email/start", () => post("/auth/email/start", { email: `x${Math.random().toString(36).slice(2)}@example.com` })],
      ["POST /auth/email/preview", () => post("/auth/email/preview", { token: "A".repeat(43) })],
      ["POST /auth/email/verify", () => post("/auth/email/verify", { token: "A".repeat(43) })],
      ["GET /auth/siwe/nonce", () => get("/auth/siwe/nonce")],
      ["POST /auth/siwe/verify", () => post("/auth/siwe/verify", { message: "m", signature: "0x" })],
      ["GET /auth/github/start", () => get("/auth/github/start")],
      ["GET /auth/google/callback", () => get("/auth/google/callback?state=x&code=y")],
    ];

    for (const [endpoint, request] of SIGN_IN) {
      it(`refuses the 4th sign-in request in a minute from one address (${endpoint}) with 429 and Retry-After, storing nothing`, async () => {
        await start({ signInRateLimitPerMin: 3 });
        for (let i = 0; i < 3; i++) expect((await request()).status, endpoint).to.not.equal(429);
        const before = await stored(stack);
        expectRateLimited(await request());
        expect(await stored(stack)).to.deep.equal(before);
      });
    }

    it("counts every sign-in endpoint against one budget per address", async () => {
      await start({ signInRateLimitPerMin: SIGN_IN.length });
      for (const [, request] of SIGN_IN) expect((await request()).status).to.not.equal(429);
      for (const [, request] of SIGN_IN) expectRateLimited(await request());
    });

    it("refuses the review's flood: 500 POST /auth/email/start to distinct addresses queue 20 mails, not 500", async () => {
      await start();
      const replies = await Promise.all(
        Array.from({ length: 500 }, (_, i) => post("/auth/email/start", { email: `flood${i}@example.com` })),
      );
      expect(replies.filter((r) => r.status === 200)).to.have.length(20);
      for (const reply of replies.filter((r) => r.status !== 200)) expectRateLimited(reply);
      expect((await stored(stack)).mails).to.equal(20);
    });

    it("refuses the review's flood: 500 GET /auth/siwe/nonce store 5 nonces, not 500", async () => {
      await start();
      const replies = await Promise.all(Array.from({ length: 500 }, () => get("/auth/siwe/nonce")));
      expect(replies.filter((r) => r.status === 200)).to.have.length(20);
      expect((await stored(stack)).nonces).to.equal(5);
    });
  });

  describe("what a flood can store", () => {
    it("keeps one address to SIWE_NONCES_PER_CLIENT_MAX unused nonces, dropping its oldest", async () => {
      await start({ signInRateLimitPerMin: 1_000, siweNoncesPerClientMax: 3 });
      const nonces: string[] = [];
      for (let i = 0; i < 5; i++) nonces.push((await get(`/auth/siwe/nonce?address=${WALLET.address}`)).body.data.message);
      expect((await stored(stack)).nonces).to.equal(3);
      const verify = async (message: string) =>
        (await post("/auth/siwe/verify", { message, signature: await WALLET.signMessage({ message }) })).status;
      // The oldest two were dropped; the newest still signs in.
      expect(await verify(nonces[0])).to.equal(401);
      expect(await verify(nonces[4])).to.equal(200);
    });

    it("refuses a nonce beyond SIWE_NONCES_MAX unused in all with 429, until the oldest expires", async () => {
      await start({ siweNoncesPerClientMax: 5, siweNoncesMax: 3, trustProxy: ["loopback"] });
      for (const client of ["198.51.100.1", "198.51.100.2", "198.51.100.3"]) {
        expect((await get("/auth/siwe/nonce", { "x-forwarded-for": client })).status).to.equal(200);
      }
      const refused = await get("/auth/siwe/nonce", { "x-forwarded-for": "198.51.100.4" });
      expectRateLimited(refused);
      expect(Number(refused.headers.get("retry-after"))).to.be.within(590, 600);
      expect((await stored(stack)).nonces).to.equal(3);
      await stack.gw.db.run("UPDATE siwe_nonces SET expires_at = ? WHERE client = '198.51.100.1'", [Date.now() - 1]);
      expect((await get("/auth/siwe/nonce", { "x-forwarded-for": "198.51.100.4" })).status).to.equal(200);
    });

    it("refuses an e-mail link beyond EMAIL_LINKS_MAX waiting in all with 429, whoever the address", async () => {
      await start({ emailLinksMax: 3 });
      await stack.gw.sessions.signIn("email", "known@example.com");
      for (let i = 0; i < 3; i++) expect((await post("/auth/email/start", { email: `p${i}@example.com` })).status).to.equal(200);
      const known = await post("/auth/email/start", { email: "known@example.com" });
      const unknown = await post("/auth/email/start", { email: "unknown@example.com" });
      expectRateLimited(known);
      // The same answer, but for each request's own id.
      const answer = (res: typeof known) => ({ status: res.status, body: { ...res.body, request_id: undefined } });
      expect(answer(unknown)).to.deep.equal(answer(known));
      expect((await stored(stack)).mails).to.equal(3);
      // A used link no longer waits: room for one more.
      const body = (await stack.gw.db.value<string>("SELECT body FROM outbox ORDER BY id LIMIT 1"))!;
      expect((await post("/auth/email/verify", { token: decodeURIComponent(/token=(\S+)/.exec(body)![1]) })).status).to.equal(200);
      expect((await post("/auth/email/start", { email: "unknown@example.com" })).status).to.equal(200);
    });

    it("refuses a GitHub start beyond OAUTH_STATES_MAX under way in all with 429", async () => {
      await start({ oauthStatesMax: 2, githubClientId: "gh", githubClientSecret: "secret" });
      // Not following the redirect: it goes to github.com.
      const begin = () => fetch(`${stack.url}/auth/github/start`, { redirect: "manual" });
      expect((await begin()).status).to.equal(302);
      expect((await begin()).status).to.equal(302);
      const refused = await begin();
      expectRateLimited({ status: refused.status, headers: refused.headers, body: await refused.json() });
      expect((await stored(stack)).states).to.equal(2);
    });
  });

  describe("the public limit, per client address", () => {
    it("refuses the 4th unauthenticated request in a minute with 429 in the envelope, on any route", async () => {
      await start({ publicRateLimitPerMin: 3 });
      for (const path of ["/v1/skills", "/v1/platform", "/assets/app.css"]) expect((await get(path)).status, path).to.equal(200);
      for (const path of ["/v1/skills", "/marketplace", "/openapi.json", "/v1/nope", "/v1/balance"]) expectRateLimited(await get(path));
    });

    it("counts a bad key and a made-up session, and leaves a valid credential's account routes to its own budget", async () => {
      await start({ publicRateLimitPerMin: 2 });
      const session = await signedIn(stack, "ada@example.com");
      expect((await get("/v1/skills")).status).to.equal(200);
      expect((await get("/v1/skills", { authorization: "Bearer atom_not-a-key" })).status).to.equal(200);
      expectRateLimited(await get("/v1/skills", { authorization: "Bearer atom_not-a-key" }));
      expectRateLimited(await get("/v1/skills", { cookie: "sg_session=made-up" }));
      // The credential budgets are test/http/request-budgets.test.ts's subject.
      expect((await stack.get("/v1/balance")).status).to.equal(200);
      expect((await session.request("GET", "/v1/me")).status).to.equal(200);
    });

    it("counts calls with a bad or missing key (401s on the call path), and never a call with a good one", async () => {
      await start({ publicRateLimitPerMin: 3 });
      const call = (authorization?: string) =>
        send(`${stack.url}/v1/call`, "POST", authorization ? { authorization } : {}, { skill_id: "echo", input: {} });
      expect((await call("Bearer atom_not-a-key")).status).to.equal(401);
      expect((await call()).status).to.equal(401);
      expect((await send(`${stack.url}/v1/skills/echo/call`, "POST", { authorization: "Bearer\u00a0x" }, {})).status).to.equal(401);
      expectRateLimited(await call("Bearer atom_not-a-key"));
      const before = await stack.available();
      for (let i = 0; i < 5; i++) expect((await stack.post("/v1/call", { skill_id: "echo", input: {} })).status).to.equal(200);
      expect(await stack.available()).to.equal(before - 5n * 1_000n);
    });

    it("counts each address apart, and an IPv6 /64 as one address, behind a trusted proxy (TRUST_PROXY)", async () => {
      await start({ publicRateLimitPerMin: 1, trustProxy: ["loopback"] });
      const from = (address: string) => get("/v1/skills", { "x-forwarded-for": address });
      expect((await from("198.51.100.1")).status).to.equal(200);
      expectRateLimited(await from("198.51.100.1"));
      expect((await from("198.51.100.2")).status).to.equal(200);
      expect((await from("2001:db8:1:2::1")).status).to.equal(200);
      expectRateLimited(await from("2001:db8:1:2:ffff:ffff:ffff:ffff"));
      expect((await from("2001:db8:1:3::1")).status).to.equal(200);
    });

    it("refuses to let a client pick its address with X-Forwarded-For when no proxy is trusted", async () => {
      await start({ publicRateLimitPerMin: 1 });
      expect((await get("/v1/skills", { "x-forwarded-for": "198.51.100.1" })).status).to.equal(200);
      expectRateLimited(await get("/v1/skills", { "x-forwarded-for": "198.51.100.2" }));
    });
  });

  it("keys a client by its address: IPv4 as is, IPv4-mapped IPv6 as IPv4, IPv6 by its /64", () => {
    const TABLE: Array<[string, string]> = [
      ["203.0.113.7", "203.0.113.7"],
      ["::ffff:203.0.113.7", "203.0.113.7"],
      ["2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"],
      ["2001:db8:1:2::1", "2001:db8:1:2::/64"],
      ["2001:db8:1:3::1", "2001:db8:1:3::/64"],
    ];
    for (const [ip, key] of TABLE) expect(clientKey({ ip, socket: {} } as unknown as Request), ip).to.equal(key);
  });

  it("keeps its counters in the store the gateway is given, one per budget, and shuts them down on close", async () => {
    const seen: string[] = [];
    const shut: RateLimitName[] = [];
    /** A MemoryStore that notes what it counts. */
    const spy = (name: RateLimitName): Store => {
      const inner = new MemoryStore();
      return {
        init: (options) => inner.init(options),
        get: (key) => inner.get(key),
        increment: async (key): Promise<ClientRateLimitInfo> => {
          seen.push(`${name}:${key}`);
          return inner.increment(key);
        },
        decrement: (key) => inner.decrement(key),
        resetKey: (key) => inner.resetKey(key),
        shutdown: () => {
          shut.push(name);
          inner.shutdown();
        },
      };
    };
    stack = await startStack({ gateway: { rateLimitStore: spy } });
    await get("/auth/siwe/nonce");
    await get("/healthz");
    const keyId = (await stack.gw.keys.authenticate(stack.key))!.id;
    await stack.get("/v1/balance");
    expect(seen).to.deep.equal(["public:127.0.0.1", "sign_in:127.0.0.1", "health:127.0.0.1", `credential:key:${keyId}`]);
    await stack.close();
    expect(shut.sort()).to.deep.equal(["credential", "health", "public", "sign_in"]);
    stack = undefined as unknown as TestStack;
  });
});

describe("pruning expired sign-in state", () => {
  let stack: TestStack;
  beforeEach(async () => {
    stack = await startStack();
  });
  afterEach(async () => {
    await stack.close();
  });

  it("deletes expired nonces, links, OAuth states and sessions, and ended sessions, keeping the live ones", async () => {
    const db = stack.gw.db;
    const past = Date.now() - 1_000;
    const future = Date.now() + 600_000;
    const account = stack.buyerId;
    for (const [name, expiresAt] of [
      ["old", past],
      ["new", future],
    ] as const) {
      await db.run("INSERT INTO siwe_nonces (nonce, client, created_at, expires_at) VALUES (?, '127.0.0.1', ?, ?)", [
        `nonce-${name}`,
        past,
        expiresAt,
      ]);
      await db.run("INSERT INTO email_sign_in_tokens (token_hash, email, created_at, expires_at) VALUES (?, 'a@example.com', ?, ?)", [
        `link-${name}`,
        past,
        expiresAt,
      ]);
      await db.run(
        "INSERT INTO oauth_states (state_hash, provider, code_verifier, nonce, created_at, expires_at) VALUES (?, 'github', 'v', 'n', ?, ?)",
        [`state-${name}`, past, expiresAt],
      );
      await db.run("INSERT INTO sessions (token_hash, account_id, csrf_token, created_at, expires_at) VALUES (?, ?, 'c', ?, ?)", [
        `session-${name}`,
        account,
        past,
        expiresAt,
      ]);
    }
    await db.run(
      "INSERT INTO sessions (token_hash, account_id, csrf_token, created_at, expires_at, revoked_at) VALUES ('session-ended', ?, 'c', ?, ?, ?)",
      [account, past, future, past],
    );

    expect(await stack.gw.pruneExpired()).to.deep.equal({ siweNonces: 1, emailLinks: 1, oauthStates: 1, sessions: 2, mcpOAuth: 0 });
    const keys = async (sql: string) => (await db.all<{ k: string }>(sql)).map((row) => row.k);
    expect(await keys("SELECT nonce AS k FROM siwe_nonces")).to.deep.equal(["nonce-new"]);
    expect(await keys("SELECT token_hash AS k FROM email_sign_in_tokens")).to.deep.equal(["link-new"]);
    expect(await keys("SELECT state_hash AS k FROM oauth_states")).to.deep.equal(["state-new"]);
    expect(await keys("SELECT token_hash AS k FROM sessions")).to.deep.equal(["session-new"]);
    expect(await stack.gw.pruneExpired()).to.deep.equal({ siweNonces: 0, emailLinks: 0, oauthStates: 0, sessions: 0, mcpOAuth: 0 });
  });
});
