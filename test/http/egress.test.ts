import http from "node:http";
import type { AddressInfo } from "node:net";
import { expect } from "chai";
import { assertBalanced } from "../../server/ledger/invariants";
import { EgressPolicy } from "../../server/gateway/egress";
import { type TestStack, startStack } from "../helpers/gateway";
import { type TestSession, signedIn } from "../helpers/session";

/**
 * The review's critical finding: a seller's backend_url pointed the gateway at the chain node
 * (127.0.0.1:8545), which answered eth_accounts and eth_sendTransaction. Here a "canary" on
 * loopback plays the internal service; it is not allowlisted, and it must never hear a request.
 */
async function startCanary() {
  const state = { requests: 0 };
  const server = http.createServer((_req, res) => {
    state.requests++;
    res
      .writeHead(200, { "content-type": "application/json" })
      .end(JSON.stringify({ jsonrpc: "2.0", id: 1, result: ["0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266"] }));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return { state, port, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

/** A backend that redirects every call to `location`. */
async function startRedirector(location: string) {
  const server = http.createServer((_req, res) => res.writeHead(302, { location }).end());
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe("egress policy through the gateway (server-side request forgery)", () => {
  let stack: TestStack;
  let canary: Awaited<ReturnType<typeof startCanary>>;
  let seller: TestSession;
  /** What the test's resolver answers for *.example.com names, in order; then the last answer forever. */
  let dnsAnswers: string[];

  const resolveHost = async () => {
    const address = dnsAnswers.length > 1 ? dnsAnswers.shift()! : dnsAnswers[0];
    return [{ address, family: 4 }];
  };

  beforeEach(async () => {
    canary = await startCanary();
    dnsAnswers = ["93.184.216.34"];
    stack = await startStack({
      gateway: { resolveHost },
    });
    seller = await signedIn(stack, "mallory@example.com");
  });
  afterEach(async () => {
    await stack.close();
    await canary.close();
  });

  const list = (slug: string, backendUrl: string) =>
    seller.request("POST", "/v1/seller/skills", { slug, name: slug, price: "0.01", backend_url: backendUrl });

  /** Expects the call to be a 502 skill_backend_forbidden that charged nothing and reached nobody. */
  async function expectForbiddenCall(slug: string): Promise<void> {
    const before = await stack.available();
    const res = await stack.post("/v1/call", { skill_id: slug, input: { method: "eth_accounts" } });
    expect(res.status).to.equal(502);
    expect(res.body).to.include({ success: false, code: "skill_backend_forbidden" });
    expect(res.body.metadata).to.include({ price_paid: 0 });
    await stack.gw.db.durable();
    expect(await stack.available()).to.equal(before);
    expect((await stack.gw.ledger.balance(stack.buyerId)).heldMicros).to.equal(0n);
    await assertBalanced(stack.gw.db);
    expect(canary.state.requests).to.equal(0);
  }

  describe("refuses at listing, with a 400 that says why", () => {
    const internal: [string, (port: number) => string][] = [
      ["the chain node on loopback", (port) => `http://127.0.0.1:${port}/`],
      ["loopback as a decimal number", (port) => `http://2130706433:${port}/`],
      ["loopback in hex", (port) => `http://0x7f.1:${port}/`],
      ["loopback in octal", (port) => `http://0177.0.0.1:${port}/`],
      ["the unspecified address", (port) => `http://0.0.0.0:${port}/`],
      ["IPv6 loopback", (port) => `http://[::1]:${port}/`],
      ["IPv4-mapped IPv6 loopback", (port) => `http://[::ffff:127.0.0.1]:${port}/`],
      ["localhost", (port) => `http://localhost:${port}/`],
      ["the cloud metadata service", () => "http://169.254.169.254/latest/meta-data/"],
      ["a private network address", () => "http://10.0.0.1/"],
      ["credentials in the URL", () => "https://user:pass@skills.example.com/"],
      ["a file URL", () => "file:///etc/passwd"],
    ];
    for (const [what, url] of internal) {
      it(`refuses ${what}`, async () => {
        const res = await list("evil", url(canary.port));
        expect(res.status).to.equal(400);
        expect(res.body).to.include({ success: false, code: "invalid_request" });
        expect(res.body.error).to.match(/backend/);
        expect((await seller.request("GET", "/v1/seller/skills")).body.data).to.deep.equal([]);
      });
    }

    it("refuses a name that resolves to loopback", async () => {
      dnsAnswers = ["127.0.0.1"];
      const res = await list("evil", `http://node.example.com:${canary.port}/`);
      expect(res.status).to.equal(400);
      expect(res.body.error).to.include("resolves to a loopback address").and.not.include("127.0.0.1");
    });

    it("refuses an edit that points a listed skill inside", async () => {
      // Listed as the seller's own (a public backend this test cannot run, so not through the listing's test call).
      await stack.gw.skills.upsert({
        slug: "fine",
        name: "fine",
        priceMicros: 10_000n,
        sellerAccountId: seller.accountId,
        backendUrl: "https://skills.example.com/fine",
        timeoutMs: 2_000,
      });
      const res = await seller.request("PATCH", "/v1/seller/skills/fine", { backend_url: `http://127.0.0.1:${canary.port}/` });
      expect(res.status).to.equal(400);
      expect((await seller.request("GET", "/v1/seller/skills")).body.data[0].backend_url).to.equal("https://skills.example.com/fine");
    });
  });

  describe("refuses at call time, uncharged, with 502 skill_backend_forbidden", () => {
    it("refuses a stored skill whose backend is the chain node (listed before the policy existed)", async () => {
      await stack.gw.skills.upsert({
        slug: "legacy",
        name: "legacy",
        priceMicros: 1_000n,
        sellerAccountId: stack.sellerId,
        backendUrl: `http://127.0.0.1:${canary.port}/`,
        timeoutMs: 2_000,
      });
      await expectForbiddenCall("legacy");
    });

    it("refuses every numeric spelling of loopback", async () => {
      for (const [i, host] of ["2130706433", "0x7f000001", "0177.0.0.1", "127.1", "[::ffff:7f00:1]"].entries()) {
        await stack.gw.skills.upsert({
          slug: `spelling-${i}`,
          name: host,
          priceMicros: 1_000n,
          sellerAccountId: stack.sellerId,
          backendUrl: `http://${host}:${canary.port}/`,
          timeoutMs: 2_000,
        });
        await expectForbiddenCall(`spelling-${i}`);
      }
    });

    it("refuses a name that resolved to a public address at listing and re-resolves to loopback at call time (DNS rebinding)", async () => {
      dnsAnswers = ["93.184.216.34", "127.0.0.1"];
      const url = `http://rebind.example.com:${canary.port}/`;
      // The listing's check passes (a public address), and the skill is stored as a listing stores it.
      const policy = new EgressPolicy(
        { allowlist: stack.gw.config.skillBackendAllowlist, allowedPorts: stack.gw.config.skillBackendPorts },
        resolveHost,
      );
      expect((await policy.checkListing(url, "seller")).ok).to.equal(true);
      await stack.gw.skills.upsert({
        slug: "rebind",
        name: "rebind",
        priceMicros: 1_000n,
        sellerAccountId: seller.accountId,
        backendUrl: url,
        timeoutMs: 2_000,
      });
      await expectForbiddenCall("rebind");
    });

    it("makes the listing's test call under the policy too: a name that re-resolves to loopback by then is refused, and reaches nobody", async () => {
      dnsAnswers = ["93.184.216.34", "127.0.0.1"];
      const res = await list("rebind", `http://rebind.example.com:${canary.port}/`);
      expect(res.status).to.equal(400);
      expect(res.body.error).to.match(/^The backend did not answer the test call/);
      expect((await seller.request("GET", "/v1/seller/skills")).body.data).to.deep.equal([]);
      expect(canary.state.requests).to.equal(0);
    });

    it("does not follow a redirect from an allowed backend to an internal one", async () => {
      const redirector = await startRedirector(`http://127.0.0.1:${canary.port}/`);
      try {
        await stack.close();
        stack = await startStack({ config: { skillBackendAllowlist: [redirector.url] } });
        await stack.addSkill("redirect", "/", { backendUrl: `${redirector.url}/` });
        const before = await stack.available();
        const res = await stack.post("/v1/call", { skill_id: "redirect", input: {} });
        expect(res.status).to.equal(502);
        expect(res.body.code).to.equal("skill_error");
        expect(await stack.available()).to.equal(before);
        expect(canary.state.requests).to.equal(0);
      } finally {
        await redirector.close();
      }
    });

    it("still calls the allowlisted backend (the demo's case)", async () => {
      const res = await stack.post("/v1/call", { skill_id: "echo", input: { ok: true } });
      expect(res.status).to.equal(200);
      expect(res.body.data).to.deep.equal({ ok: true });
    });
  });
});

/**
 * Issue 23: the operator allowlists an internal origin for its own skill (as `npm start` does its demo backend), and
 * any new account listed a skill there and read the internal service's answer in the test call's snippet. The
 * canary plays that internal service, allowlisted by the operator; no seller's listing, edit or stored row may reach
 * it, while the operator's registered skill there still answers.
 */
describe("an allowlisted internal origin is the operator's alone", () => {
  let stack: TestStack;
  let canary: Awaited<ReturnType<typeof startCanary>>;
  let internal: string;
  let seller: TestSession;

  beforeEach(async () => {
    canary = await startCanary();
    internal = `http://127.0.0.1:${canary.port}`;
    stack = await startStack({ config: { skillBackendAllowlist: [internal] } });
    seller = await signedIn(stack, "mallory@example.com");
  });
  afterEach(async () => {
    await stack.close();
    await canary.close();
  });

  const list = (slug: string, backendUrl: string) =>
    seller.request("POST", "/v1/seller/skills", { slug, name: slug, price: "0.01", backend_url: backendUrl });
  /** A listing of the seller's own at the test backend, which stands in for a public one. */
  const listPublic = async (slug: string) => expect((await list(slug, `${stack.backend.url}/echo`)).status).to.equal(201);
  /** The operator's skill on the internal origin, registered as `npm run register-skill` does, sold by the seller. */
  const registerForSeller = (slug: string) =>
    stack.gw.skills.upsert({
      slug,
      name: slug,
      priceMicros: 10_000n,
      sellerAccountId: seller.accountId,
      backendUrl: `${internal}/rpc`,
      timeoutMs: 2_000,
    });
  /** A change made in the database, not through the gateway, then loaded as another replica's write would be. */
  const pointRowAt = async (slug: string, backendUrl: string) => {
    await stack.gw.db.run("UPDATE skills SET backend_url = ?, updated_at = updated_at + 1 WHERE slug = ?", [backendUrl, slug]);
    await stack.gw.skills.refresh();
  };
  const call = (slug: string) => stack.post("/v1/call", { skill_id: slug, input: { method: "eth_accounts" } });

  const attempts: {
    what: string;
    refusal: "invalid_request" | "skill_backend_forbidden";
    attempt: () => Promise<{ status: number; body: any }>;
  }[] = [
    {
      what: "a new account lists a skill there",
      refusal: "invalid_request",
      attempt: () => list("evil", `${internal}/admin/secret`),
    },
    {
      what: "a seller moves its own listing there",
      refusal: "invalid_request",
      attempt: async () => {
        await listPublic("moved");
        return seller.request("PATCH", "/v1/seller/skills/moved", { backend_url: `${internal}/admin/secret` });
      },
    },
    {
      what: "the seller of the operator's skill there moves it to another path on the same origin",
      refusal: "invalid_request",
      attempt: async () => {
        await registerForSeller("ops");
        return seller.request("PATCH", "/v1/seller/skills/ops", { backend_url: `${internal}/admin/secret` });
      },
    },
    {
      what: "the seller of the operator's skill there sets the operator's own URL again",
      refusal: "invalid_request",
      attempt: async () => {
        await registerForSeller("ops");
        return seller.request("PATCH", "/v1/seller/skills/ops", { backend_url: `${internal}/rpc` });
      },
    },
    {
      what: "a seller's listing is pointed there in the database, then called",
      refusal: "skill_backend_forbidden",
      attempt: async () => {
        await listPublic("rowed");
        await pointRowAt("rowed", `${internal}/admin/secret`);
        return call("rowed");
      },
    },
    {
      what: "the operator's skill, once its seller moved it away, is pointed back in the database, then called",
      refusal: "skill_backend_forbidden",
      attempt: async () => {
        await registerForSeller("ops");
        const moved = await seller.request("PATCH", "/v1/seller/skills/ops", { backend_url: `${stack.backend.url}/echo` });
        expect(moved.status, JSON.stringify(moved.body)).to.equal(200);
        await pointRowAt("ops", `${internal}/rpc`);
        return call("ops");
      },
    },
  ];

  for (const { what, refusal, attempt } of attempts) {
    it(`refuses when ${what}: ${refusal}, and the internal service hears nothing`, async () => {
      const before = await stack.available();
      const res = await attempt();
      expect(res.status, JSON.stringify(res.body)).to.equal(refusal === "invalid_request" ? 400 : 502);
      expect(res.body).to.include({ success: false, code: refusal });
      expect(res.body.error).to.match(/not a public internet address/);
      expect(JSON.stringify(res.body)).to.not.include("0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266");
      expect(canary.state.requests).to.equal(0);
      await stack.gw.db.durable();
      expect(await stack.available()).to.equal(before);
      const listed = (await seller.request("GET", "/v1/seller/skills")).body.data as { slug: string; backend_url: string }[];
      if (refusal === "invalid_request") expect(listed.filter((s) => s.backend_url.includes("/admin/secret"))).to.deep.equal([]);
      await assertBalanced(stack.gw.db);
    });
  }

  it("still serves the operator's skill there, through an edit by its seller that leaves the URL alone", async () => {
    await registerForSeller("ops");
    expect((await seller.request("PATCH", "/v1/seller/skills/ops", { price: "0.02" })).status).to.equal(200);
    const res = await call("ops");
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(res.body.data).to.include({ jsonrpc: "2.0" });
    expect(res.body.metadata).to.include({ price_paid: 0.02 });
    expect(canary.state.requests).to.equal(1);
  });
});
