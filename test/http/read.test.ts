import { expect } from "chai";
import { describeEachEngine } from "../helpers/engines";
import { type TestStack, startStack } from "../helpers/gateway";

describeEachEngine("read endpoints", (engine) => {
  let stack: TestStack;
  beforeEach(async () => {
    stack = await startStack({ engine: engine.name });
  });
  afterEach(async () => {
    await stack.close();
  });

  describe("GET /v1/skills", () => {
    it("lists the skills publicly with their price in USD and no secrets", async () => {
      const res = await stack.get("/v1/skills", null);
      expect(res.status).to.equal(200);
      expect(res.body.success).to.equal(true);
      const echo = res.body.data.find((s: { slug: string }) => s.slug === "echo");
      expect(echo).to.include({ slug: "echo", name: "echo", price: 0.001, price_per_call: 0.001, currency: "USDC" });
      expect(echo.id).to.match(/^[0-9a-f-]{36}$/);
      expect(JSON.stringify(res.body)).not.to.contain(stack.gw.skills.resolve("echo")!.signingSecret);
      expect(JSON.stringify(res.body)).not.to.contain("backend");
    });

    it("shows what a caller pays when the fee is on top", async () => {
      await stack.close();
      stack = await startStack({ engine: engine.name, config: { feeMode: "on_top" } });
      const res = await stack.get("/v1/skills/echo", null);
      expect(res.body.data).to.include({ price: 0.001, price_per_call: 0.0011 });
    });
  });

  describe("GET /v1/skills/:skillId", () => {
    it("finds a skill by slug or UUID and answers 404 otherwise", async () => {
      const bySlug = await stack.get("/v1/skills/echo", null);
      expect(bySlug.status).to.equal(200);
      const byId = await stack.get(`/v1/skills/${bySlug.body.data.id}`, null);
      expect(byId.body.data.slug).to.equal("echo");
      const missing = await stack.get("/v1/skills/nope", null);
      expect(missing.status).to.equal(404);
      expect(missing.body).to.include({ success: false, code: "skill_not_found" });
    });
  });

  describe("GET /v1/balance", () => {
    it("needs a key", async () => {
      const res = await stack.get("/v1/balance", null);
      expect(res.status).to.equal(401);
      expect(res.body.success).to.equal(false);
    });

    it("shows available and held USD, and held while a call is in flight", async () => {
      await stack.addSkill("hang", "/hang", { timeoutMs: 400, priceMicros: 250_000n });
      const reached = stack.backend.nextRequest("/hang");
      const pending = stack.post("/v1/call", { skill_id: "hang", input: {} });
      await reached;
      const during = await stack.get("/v1/balance");
      expect(during.body.data).to.deep.equal({
        currency: "USDC",
        available: 9.75,
        held: 0.25,
        available_base_units: "9750000",
        held_base_units: "250000",
      });
      await pending;
      const after = await stack.get("/v1/balance");
      expect(after.body.data).to.include({ available: 10, held: 0 });
    });
  });

  describe("GET /v1/usage", () => {
    it("lists the account's calls newest first with cost and status", async () => {
      await stack.post("/v1/call", { skill_id: "echo", input: {} });
      await stack.post("/v1/call", { skill_id: "fail", input: {} });
      await stack.post("/v1/skills/echo/call", {});
      const res = await stack.get("/v1/usage");
      expect(res.status).to.equal(200);
      const calls = res.body.data.calls;
      expect(calls.map((c: any) => [c.skill_id, c.status, c.http_status, c.cost])).to.deep.equal([
        ["echo", "success", 200, 0.001],
        ["fail", "failed", 502, 0],
        ["echo", "success", 200, 0.001],
      ]);
      expect(calls[0].endpoint).to.equal("/v1/skills/:skillId/call");
      expect(calls[1].outcome).to.equal("skill_error");
      expect(Date.parse(calls[0].created_at)).to.be.a("number").and.not.NaN;
    });

    it("shows only the caller's own calls", async () => {
      const other = await stack.addBuyer("1");
      await stack.post("/v1/call", { skill_id: "echo", input: {} }, { key: other.key });
      const res = await stack.get("/v1/usage");
      expect(res.body.data.calls).to.deep.equal([]);
    });

    it("pages with limit and before, and refuses a bad limit", async () => {
      for (let i = 0; i < 3; i++) {
        await stack.post("/v1/call", { skill_id: "echo", input: { i } });
        await new Promise((r) => setTimeout(r, 3));
      }
      const page = await stack.get("/v1/usage?limit=2");
      expect(page.body.data.calls).to.have.length(2);
      const rest = await stack.get(`/v1/usage?limit=2&before=${page.body.data.next_before}`);
      expect(rest.body.data.calls).to.have.length(1);
      expect(rest.body.data.next_before).to.equal(null);
      expect((await stack.get("/v1/usage?limit=0")).status).to.equal(400);
      expect((await stack.get("/v1/usage?limit=abc")).status).to.equal(400);
    });

    it("never skips calls that share a millisecond with a page's last one: that page runs to the end of it", async () => {
      // 7 calls in one millisecond and 2 in the one before, read 3 at a time: with a page
      // cut inside a millisecond, `before=<ms>` would skip the rest of it.
      const apiKeyId = (await stack.gw.keys.authenticate(stack.key))!.id;
      const record = (id: string, createdAtMs: number) =>
        stack.gw.calls.record({
          id,
          accountId: stack.buyerId,
          apiKeyId,
          skillId: stack.gw.skills.resolve("echo")!.id,
          endpoint: "call",
          httpStatus: 502,
          outcome: "skill_error",
          chargedMicros: 0n,
          holdId: null,
          latencyUs: 1_000,
          createdAtMs,
        });
      const ids: string[] = [];
      for (let i = 0; i < 2; i++) {
        ids.push(`older-${i}`);
        await record(`older-${i}`, 1_700_000_000_000);
      }
      for (let i = 0; i < 7; i++) {
        ids.push(`burst-${i}`);
        await record(`burst-${i}`, 1_700_000_000_001);
      }
      const seen: string[] = [];
      let before = "";
      for (let pages = 0; pages < 10; pages++) {
        const page = await stack.get(`/v1/usage?limit=3${before}`);
        seen.push(...page.body.data.calls.map((c: { id: string }) => c.id));
        if (page.body.data.next_before === null) break;
        before = `&before=${page.body.data.next_before}`;
      }
      expect([...seen].sort()).to.deep.equal([...ids].sort());
      expect(seen.slice(0, 7)).to.deep.equal([...ids.slice(2)].reverse());
    });
  });
});
