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
});
