import { expect } from "chai";
import { type TestStack, startStack } from "../helpers/gateway";

describe("rate limits on the call endpoints", () => {
  let stack: TestStack;
  afterEach(async () => {
    await stack.close();
  });

  it("allows 100 calls a minute per key by default, then answers 429 with Retry-After, uncharged", async () => {
    stack = await startStack();
    const startedAtMs = Date.now();
    const results = await Promise.all(Array.from({ length: 105 }, () => stack.post("/v1/call", { skill_id: "echo", input: {} })));
    // GCRA gives one call back every 600 ms (a minute / 100), so a burst that takes longer than
    // that on a loaded machine may rightly see one more: the burst allowance is 100, plus refills.
    const refills = Math.floor((Date.now() - startedAtMs) / 600);
    const ok = results.filter((r) => r.status === 200).length;
    expect(ok).to.be.within(100, 100 + refills);
    const limited = results.filter((r) => r.status === 429);
    expect(limited).to.have.length(105 - ok);
    for (const r of limited) {
      expect(r.body).to.include({ success: false, code: "rate_limited" });
      expect(Number(r.headers.get("retry-after"))).to.be.within(1, 60);
      expect(r.headers.get("ratelimit-remaining")).to.equal("0");
    }
    expect(await stack.available()).to.equal(10_000_000n - BigInt(ok) * 1_000n);
  });

  it("counts a flood of refused calls in aggregate: no line each in the calls log, the day's count in /v1/usage/daily", async () => {
    stack = await startStack({ config: { rateLimitPerMin: 2 } });
    const results = await Promise.all(Array.from({ length: 40 }, () => stack.post("/v1/call", { skill_id: "echo", input: {} })));
    const refused = results.filter((r) => r.status === 429);
    expect(refused.length).to.be.at.least(35);
    // A refused call gets no call id: it has no line.
    for (const r of refused) expect(r.headers.get("x-call-id")).to.equal(null);
    const lines = await stack.gw.db.value<bigint>("SELECT COUNT(*) FROM calls");
    expect(Number(lines)).to.equal(40 - refused.length);
    const daily = (await stack.get("/v1/usage/daily?days=1")).body.data;
    expect(daily.total).to.include({ calls: 40 - refused.length, refused: refused.length });
    // One row per key, skill, outcome and minute, however many calls it counts.
    expect(Number(await stack.gw.db.value<bigint>("SELECT COUNT(*) FROM call_refusals"))).to.be.within(1, 2);
  });

  it("counts each key apart", async () => {
    stack = await startStack({ config: { rateLimitPerMin: 2 } });
    const second = (await stack.gw.keys.create(stack.buyerId)).key;
    const send = (key?: string) => stack.post("/v1/call", { skill_id: "echo", input: {} }, { key });
    expect([(await send()).status, (await send()).status, (await send()).status]).to.deep.equal([200, 200, 429]);
    expect((await send(second)).status).to.equal(200);
  });

  it("honours a skill's own limit per caller without eating into the key's allowance", async () => {
    stack = await startStack();
    await stack.addSkill("scarce", "/echo", { rateLimitPerMin: 2 });
    const send = (skill: string) => stack.post("/v1/call", { skill_id: skill, input: {} });
    expect((await send("scarce")).status).to.equal(200);
    expect((await send("scarce")).status).to.equal(200);
    const limited = await send("scarce");
    expect(limited.status).to.equal(429);
    expect(limited.body.error).to.contain('skill "scarce"');
    const echo = await send("echo");
    expect(echo.status).to.equal(200);
    expect(echo.headers.get("ratelimit-remaining")).to.equal("97");
    expect(await stack.available()).to.equal(10_000_000n - 3_000n);
  });

  it("caps an account's calls per UTC day when a daily cap is set", async () => {
    stack = await startStack({ config: { dailyCallCap: 3 } });
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) statuses.push((await stack.post("/v1/call", { skill_id: "echo", input: {} })).status);
    expect(statuses).to.deep.equal([200, 200, 200, 429]);
    const res = await stack.post("/v1/call", { skill_id: "echo", input: {} });
    expect(res.body.code).to.equal("daily_limit_reached");
    expect(Number(res.headers.get("retry-after"))).to.be.within(1, 86_400);
    expect(await stack.available()).to.equal(10_000_000n - 3_000n);
  });

  it("keeps the day's count across a restart", async () => {
    stack = await startStack({ config: { dailyCallCap: 2 } });
    await stack.post("/v1/call", { skill_id: "echo", input: {} });
    await stack.post("/v1/call", { skill_id: "echo", input: {} });
    const { dbPath } = stack;
    await stack.gw.close();
    const restarted = await startStack({ config: { dailyCallCap: 2 }, dbPath });
    try {
      // The restarted stack made a new buyer; the first one's key still works and is still capped.
      const res = await restarted.post("/v1/call", { skill_id: "echo", input: {} }, { key: stack.key });
      expect(res.status).to.equal(429);
      expect(res.body.code).to.equal("daily_limit_reached");
    } finally {
      await restarted.close();
      await stack.backend.close();
      stack = { close: async () => {} } as TestStack;
    }
  });
});

describe("one rate-limit header style on every endpoint that limits", () => {
  let stack: TestStack;
  afterEach(async () => {
    await stack.close();
  });

  // The IETF draft's RateLimit-Policy, -Limit, -Remaining and -Reset, as the call endpoints send them (issue 26
  // section 3): never the combined `RateLimit` header of a later draft, which /mcp and the Express routes sent before.
  const style = (headers: Headers) => ({
    policy: headers.get("ratelimit-policy"),
    limit: headers.get("ratelimit-limit"),
    remaining: headers.get("ratelimit-remaining"),
    reset: headers.get("ratelimit-reset"),
    combined: headers.get("ratelimit"),
  });
  const expectStyle = (headers: Headers, limit: number) => {
    const sent = style(headers);
    expect(sent.combined).to.equal(null);
    expect(sent.policy).to.equal(`${limit};w=60`);
    expect(sent.limit).to.equal(String(limit));
    expect(Number(sent.remaining)).to.be.within(0, limit - 1);
    expect(Number(sent.reset)).to.be.within(0, 60);
  };

  it("sends RateLimit-Policy, -Limit, -Remaining and -Reset on the call endpoints, /mcp and the Express routes", async () => {
    stack = await startStack({ config: { rateLimitPerMin: 50, credentialRateLimitPerMin: 70, publicRateLimitPerMin: 90 } });
    expectStyle((await stack.post("/v1/call", { skill_id: "echo", input: {} })).headers, 50);
    expectStyle((await stack.post("/v1/skills/echo/call", {})).headers, 50);
    const mcp = await fetch(`${stack.url}/mcp`, {
      method: "POST",
      headers: { authorization: `Bearer ${stack.key}`, "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} }),
    });
    expect(mcp.status).to.equal(200);
    expectStyle(mcp.headers, 70);
    expectStyle((await stack.get("/v1/balance")).headers, 70);
    expectStyle((await stack.get("/v1/skills", null)).headers, 90);
  });
});
