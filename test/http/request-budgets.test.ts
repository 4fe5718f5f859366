import { expect } from "chai";
import type { Request } from "express";
import type { Store } from "express-rate-limit";
import type { Config } from "../../server/config";
import type { ApiKeys } from "../../server/identity/api-keys";
import type { Sessions } from "../../server/identity/sessions";
import { OPERATIONS } from "../../server/http/contract/document";
import { budgetOf, credentialRoutes } from "../../server/http/rate-limit-budgets";
import { type TestStack, startStack } from "../helpers/gateway";
import { type Reply, type TestSession, send, signedIn } from "../helpers/session";

/**
 * Issue 23: a valid credential used to switch the per-address limit off on every route, x402's
 * included. Now a credential replaces its address's budget by its own on the operations that
 * consume it, and only there; /healthz and /readyz answer from a budget of their own.
 */

/** Who a request is made as: an API key, a dashboard session, both at once, or nobody. */
type As = "key" | "session" | "both" | "nobody";

interface Credentials {
  key: string;
  session: TestSession;
}

function expectRateLimited(reply: Reply, by: RegExp) {
  expect(reply.status, JSON.stringify(reply.body)).to.equal(429);
  expect(reply.body).to.include({ success: false, code: "rate_limited" });
  expect(reply.body.error).to.match(by);
  expect(Number(reply.headers.get("retry-after"))).to.be.within(1, 60);
}

const MCP_INITIALIZE = {
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } },
};

/** One request from `from` (an address a trusted proxy vouches for), made as `as`. */
function ask(
  stack: TestStack,
  credentials: Credentials,
  request: { method: string; path: string; body?: unknown; as: As; from?: string },
): Promise<Reply> {
  const headers: Record<string, string> = { accept: "application/json, text/event-stream" };
  if (request.from) headers["x-forwarded-for"] = request.from;
  if (request.as === "key" || request.as === "both") headers.authorization = `Bearer ${credentials.key}`;
  if (request.as === "session" || request.as === "both") {
    headers.cookie = credentials.session.cookie;
    headers["x-csrf-token"] = credentials.session.csrfToken;
  }
  return send(stack.url + request.path, request.method, headers, request.body);
}

describe("request budgets: a credential replaces the address's budget, never switches it off", () => {
  let stack: TestStack;
  let credentials: Credentials;
  let people = 0;
  const start = async (config: Partial<Config>) => {
    stack = await startStack({ config: { trustProxy: ["loopback"], ...config } });
    credentials = { key: stack.key, session: await signedIn(stack, "ada@example.com") };
  };
  /** A new key or session, so that each row starts with a whole credential budget. */
  const fresh = async (): Promise<Credentials> => ({
    key: (await stack.addBuyer("1")).key,
    session: await signedIn(stack, `person${++people}@example.com`),
  });

  describe("routes that consume no credential keep the per-address limit, whatever credential is sent", () => {
    before(async () => {
      await start({ publicRateLimitPerMin: 3, credentialRateLimitPerMin: 1_000 });
    });
    after(async () => {
      await stack?.close();
    });

    /** [route, made as, the route's own answer before the limit]: each row from an address of its own. */
    const PUBLIC: Array<[string, string, As, number, unknown?]> = [
      ["POST", "/x402/skills/echo/call", "key", 503, {}],
      ["POST", "/x402/skills/echo/call", "session", 503, {}],
      ["GET", "/x402/discovery/resources", "both", 503],
      ["GET", "/v1/skills", "both", 200],
      ["GET", "/v1/skills/echo", "both", 200],
      ["GET", "/v1/platform", "both", 200],
      ["GET", "/openapi.json", "both", 200],
      ["GET", "/assets/app.css", "session", 200],
      ["GET", "/marketplace", "session", 200],
      ["GET", "/v1/nope", "both", 404],
      ["GET", "/auth/siwe/nonce", "session", 200],
      // A session route reads no API key, and a key route no session: the other credential changes nothing.
      ["GET", "/v1/me", "key", 401],
      ["POST", "/mcp", "session", 401, MCP_INITIALIZE],
    ];

    PUBLIC.forEach(([method, path, as, status, body], row) => {
      it(`counts ${method} ${path} made with ${as === "both" ? "a key and a session" : `a valid ${as}`} against the address: 429 on the 4th`, async () => {
        const from = `198.51.100.${row + 1}`;
        for (let i = 0; i < 3; i++) expect((await ask(stack, credentials, { method, path, body, as, from })).status).to.equal(status);
        expectRateLimited(await ask(stack, credentials, { method, path, body, as, from }), /^Too many requests from your address/);
      });
    });

    it("refuses the review's flood: 620 keyed x402 calls from one address meet 429 after the address's 600", async () => {
      await stack.close();
      stack = await startStack();
      const replies = await Promise.all(
        Array.from({ length: 620 }, () => send(`${stack.url}/x402/skills/echo/call`, "POST", { authorization: `Bearer ${stack.key}` }, {})),
      );
      expect(replies.filter((r) => r.status === 503)).to.have.length(600);
      for (const reply of replies.filter((r) => r.status !== 503)) expectRateLimited(reply, /from your address/);
    });
  });

  describe("routes that consume a credential count it against its own budget instead", () => {
    before(async () => {
      await start({ publicRateLimitPerMin: 2, credentialRateLimitPerMin: 4 });
    });
    after(async () => {
      await stack?.close();
    });

    /** [route, the credential it consumes, its answer]: more requests than the address may make, fewer than the credential. */
    const CREDENTIAL: Array<[string, string, "key" | "session", number, unknown?]> = [
      ["GET", "/v1/balance", "key", 200],
      ["GET", "/v1/balance", "session", 200],
      ["GET", "/v1/usage", "key", 200],
      ["GET", "/v1/earnings", "key", 200],
      ["GET", "/v1/withdrawals", "key", 200],
      ["GET", "/v1/history", "session", 200],
      ["GET", "/v1/keys", "session", 200],
      ["GET", "/v1/me", "session", 200],
      ["GET", "/v1/seller/skills", "session", 200],
      ["POST", "/v1/skills/echo/try", "session", 404, { key_id: "not-a-key", input: {} }],
      ["POST", "/mcp", "key", 200, MCP_INITIALIZE],
    ];

    CREDENTIAL.forEach(([method, path, as, status, body], row) => {
      it(`counts ${method} ${path} per ${as === "key" ? "API key" : "session"}: 429 on the 5th, another ${as} and the address untouched`, async () => {
        const from = `203.0.113.${row + 1}`;
        const [mine, theirs] = [await fresh(), await fresh()];
        for (let i = 0; i < 4; i++) expect((await ask(stack, mine, { method, path, body, as, from })).status).to.equal(status);
        expectRateLimited(
          await ask(stack, mine, { method, path, body, as, from }),
          as === "key" ? /^Too many requests with this API key/ : /^Too many requests with this session/,
        );
        expect((await ask(stack, theirs, { method, path, body, as, from })).status).to.equal(status);
        // The credential's requests took nothing from its address's budget of 2.
        for (let i = 0; i < 2; i++)
          expect((await ask(stack, mine, { method: "GET", path: "/v1/skills", as: "nobody", from })).status).to.equal(200);
      });
    });

    it("counts a bad key or a made-up session on an account route against the address", async () => {
      const from = "203.0.113.200";
      const bad = { key: "atom_not-a-key", session: { ...credentials.session, cookie: "sg_session=made-up" } };
      expect((await ask(stack, bad, { method: "GET", path: "/v1/balance", as: "key", from })).status).to.equal(401);
      expect((await ask(stack, bad, { method: "GET", path: "/v1/balance", as: "session", from })).status).to.equal(401);
      expectRateLimited(await ask(stack, bad, { method: "GET", path: "/v1/balance", as: "key", from }), /from your address/);
    });

    it("refuses a key's flood of GET /v1/balance at CREDENTIAL_RATE_LIMIT_PER_MIN, 600 by default", async () => {
      await stack.close();
      stack = await startStack();
      const replies = await Promise.all(Array.from({ length: 620 }, () => stack.get("/v1/balance")));
      expect(replies.filter((r) => r.status === 200)).to.have.length(600);
      for (const reply of replies.filter((r) => r.status !== 200)) expectRateLimited(reply, /with this API key/);
    });
  });

  describe("health checks answer from a budget of their own", () => {
    afterEach(async () => {
      await stack?.close();
    });

    it("answers /healthz and /readyz 200 after a flood from their address, with or without a credential", async () => {
      await start({ publicRateLimitPerMin: 3, credentialRateLimitPerMin: 3 });
      const from = "192.0.2.1";
      const flood = async (request: { method: string; path: string; as: As }) => {
        const replies = await Promise.all(Array.from({ length: 10 }, () => ask(stack, credentials, { ...request, from })));
        expect(replies.filter((r) => r.status === 429)).to.have.length(7);
      };
      await flood({ method: "GET", path: "/v1/skills", as: "nobody" });
      await flood({ method: "GET", path: "/v1/balance", as: "key" });
      await flood({ method: "GET", path: "/v1/balance", as: "session" });
      for (const as of ["nobody", "key", "session"] as const) {
        for (const path of ["/healthz", "/readyz"])
          expect((await ask(stack, credentials, { method: "GET", path, as, from })).status, `${path} as ${as}`).to.equal(200);
        expect((await ask(stack, credentials, { method: "HEAD", path: "/healthz", as, from })).status).to.equal(200);
      }
    });

    it("refuses a flood of health checks on their own budget, leaving every other budget whole", async () => {
      await start({ healthRateLimitPerMin: 3, publicRateLimitPerMin: 2, credentialRateLimitPerMin: 2 });
      const from = "192.0.2.2";
      for (const path of ["/healthz", "/readyz", "/healthz"])
        expect((await ask(stack, credentials, { method: "GET", path, as: "key", from })).status).to.equal(200);
      expectRateLimited(
        await ask(stack, credentials, { method: "GET", path: "/readyz", as: "nobody", from }),
        /^Too many health checks from your address/,
      );
      for (let i = 0; i < 2; i++) {
        expect((await ask(stack, credentials, { method: "GET", path: "/v1/skills", as: "nobody", from })).status).to.equal(200);
        expect((await ask(stack, credentials, { method: "GET", path: "/v1/balance", as: "key", from })).status).to.equal(200);
      }
      // Per address: another load balancer's probes are not refused.
      expect((await ask(stack, credentials, { method: "GET", path: "/healthz", as: "nobody", from: "192.0.2.3" })).status).to.equal(200);
    });

    it("lets a probe through when the store fails, and refuses everything else (500)", async () => {
      const failing = (): Store => ({
        init: () => {},
        get: async () => undefined,
        increment: async () => {
          throw new Error("redis: connection refused");
        },
        decrement: async () => {},
        resetKey: async () => {},
      });
      stack = await startStack({ gateway: { rateLimitStore: failing } });
      for (const path of ["/healthz", "/readyz"]) expect((await send(stack.url + path, "GET", {})).status, path).to.equal(200);
      expect((await send(`${stack.url}/v1/skills`, "GET", {})).status).to.equal(500);
      expect((await stack.get("/v1/balance")).status).to.equal(500);
    });
  });
});

describe("which budget counts a request (server/http/rate-limit-budgets.ts)", () => {
  const KEY = "atom_valid";
  const SESSION = "valid-session";
  const keys = { authenticate: async (token: string) => (token === KEY ? { id: "key-1" } : undefined) } as unknown as ApiKeys;
  const sessions = {
    find: async (token: string) =>
      token === SESSION ? { accountId: "a", csrfToken: "c", expiresAtMs: Infinity, tokenHash: "h1" } : undefined,
  } as unknown as Sessions;
  const budget = budgetOf({ keys, sessions });
  const request = (method: string, path: string, headers: Record<string, string> = {}) => ({ method, path, headers }) as unknown as Request;
  const key = { authorization: `Bearer ${KEY}` };
  const session = { cookie: `sg_session=${SESSION}` };

  /** [method, path, headers, budget, holder]. */
  const TABLE: Array<[string, string, Record<string, string>, string, string?]> = [
    ["GET", "/v1/balance", key, "credential", "key:key-1"],
    ["GET", "/v1/balance", session, "credential", "session:h1"],
    // An account route reads the Authorization header when there is one, even beside a valid session.
    ["GET", "/v1/balance", { ...session, authorization: "Bearer atom_wrong" }, "public"],
    ["GET", "/v1/balance", { authorization: "Bearer atom_wrong" }, "public"],
    ["GET", "/v1/balance", {}, "public"],
    // Express routes HEAD as GET, case-insensitively, with or without a trailing slash; not a percent-encoded letter.
    ["HEAD", "/v1/balance", key, "credential", "key:key-1"],
    ["GET", "/V1/Balance/", key, "credential", "key:key-1"],
    ["GET", "/v1/%62alance", key, "public"],
    ["PATCH", "/v1/keys/k_123", session, "credential", "session:h1"],
    // A keys:manage key's route (keys made by code) takes a key or a session; a session's own route, no key.
    ["PATCH", "/v1/keys/k_123", key, "credential", "key:key-1"],
    ["PATCH", "/v1/account", key, "public"],
    ["GET", "/v1/keys/k_123", session, "public"],
    ["POST", "/mcp", key, "credential", "key:key-1"],
    ["POST", "/mcp", session, "public"],
    ["GET", "/mcp", key, "public"],
    ["POST", "/v1/skills/echo/try", session, "credential", "session:h1"],
    ["POST", "/x402/skills/echo/call", { ...key, ...session }, "public"],
    ["GET", "/v1/skills/echo", { ...key, ...session }, "public"],
    ["POST", "/v1/topups/card/notify", { ...key, ...session }, "public"],
    ["GET", "/assets/app.js", session, "public"],
    ["GET", "/healthz", key, "health"],
    ["HEAD", "/readyz", {}, "health"],
    ["POST", "/healthz", {}, "public"],
    ["GET", "/healthz/x", {}, "public"],
  ];

  for (const [method, path, headers, name, holder] of TABLE) {
    it(`counts ${method} ${path} with ${Object.keys(headers).join(" and ") || "no credential"} on the ${name} budget`, async () => {
      const chosen = await budget(request(method, path, headers));
      expect(chosen.name).to.equal(name);
      if (holder) expect(chosen).to.include({ holder });
    });
  }

  it("takes no operation the contract declares without credentials for one that consumes them", () => {
    const routes = credentialRoutes();
    const open = OPERATIONS.filter((op) => op.auth === "none" || op.auth === "provider");
    for (const op of open) {
      const path = op.path.replace(/\{[^}]+\}/g, "x");
      const taken = routes.find((r) => r.method === op.method.toUpperCase() && r.pattern.test(path));
      expect(taken, `${op.method.toUpperCase()} ${op.path}`).to.equal(undefined);
    }
  });

  it("finds every operation that consumes a credential at its own path", () => {
    const routes = credentialRoutes();
    const consuming = OPERATIONS.filter((op) => op.auth === "api_key" || op.auth === "session" || op.auth === "account");
    expect(routes).to.have.length(consuming.length);
    for (const op of consuming) {
      const path = op.path.replace(/\{[^}]+\}/g, "x");
      expect(
        routes.some((r) => r.method === op.method.toUpperCase() && r.auth === op.auth && r.pattern.test(path)),
        op.path,
      ).to.equal(true);
    }
  });
});
