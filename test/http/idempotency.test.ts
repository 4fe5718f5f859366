import { expect } from "chai";
import { describeEachEngine } from "../helpers/engines";
import { type TestStack, startStack } from "../helpers/gateway";

describeEachEngine("Idempotency-Key on the call endpoints", (engine) => {
  let stack: TestStack;
  beforeEach(async () => {
    stack = await startStack({ engine: engine.name });
  });
  afterEach(async () => {
    await stack.close();
  });

  const call = (key: string, input: unknown = { n: 1 }, path = "/v1/call") =>
    stack.post(path, path === "/v1/call" ? { skill_id: "echo", input } : input, { headers: { "idempotency-key": key } });

  it("returns the first result to a retry without charging twice", async () => {
    const first = await call("retry-1");
    const second = await call("retry-1");
    expect(first.status).to.equal(200);
    expect(second.status).to.equal(200);
    expect(second.body).to.deep.equal(first.body);
    expect(second.headers.get("idempotent-replayed")).to.equal("true");
    expect(await stack.available()).to.equal(10_000_000n - 1_000n);
    expect(stack.backend.hits.get("/echo")).to.equal(1);
  });

  it("works the same on the per-skill endpoint", async () => {
    const first = await call("retry-2", { n: 2 }, "/v1/skills/echo/call");
    const second = await call("retry-2", { n: 2 }, "/v1/skills/echo/call");
    expect(second.body).to.deep.equal(first.body);
    expect(first.body.metadata.cost).to.equal(0.001);
    expect(await stack.available()).to.equal(10_000_000n - 1_000n);
  });

  it("refuses the same key with another body (422) and charges nothing", async () => {
    await call("retry-3", { n: 1 });
    const res = await call("retry-3", { n: 2 });
    expect(res.status).to.equal(422);
    expect(res.body).to.include({ success: false, code: "idempotency_key_reused" });
    expect(await stack.available()).to.equal(10_000_000n - 1_000n);
  });

  it("refuses the same key on the other endpoint, since that is another request", async () => {
    await call("retry-4", { n: 1 });
    const res = await call("retry-4", { n: 1 }, "/v1/skills/echo/call");
    expect(res.status).to.equal(422);
  });

  it("answers 409 to a retry while the first attempt is still running", async () => {
    await stack.addSkill("hang", "/hang", { timeoutMs: 500 });
    const reached = stack.backend.nextRequest("/hang");
    const first = stack.post("/v1/call", { skill_id: "hang", input: {} }, { headers: { "idempotency-key": "slow-1" } });
    await reached;
    const second = await stack.post("/v1/call", { skill_id: "hang", input: {} }, { headers: { "idempotency-key": "slow-1" } });
    expect(second.status).to.equal(409);
    expect(second.body.code).to.equal("idempotency_key_in_use");
    expect((await first).status).to.equal(502);
  });

  it("lets a retry run again after a backend failure, which was not charged", async () => {
    const first = await stack.post("/v1/call", { skill_id: "fail", input: {} }, { headers: { "idempotency-key": "fail-1" } });
    const second = await stack.post("/v1/call", { skill_id: "fail", input: {} }, { headers: { "idempotency-key": "fail-1" } });
    expect([first.status, second.status]).to.deep.equal([502, 502]);
    expect(second.headers.get("idempotent-replayed")).to.equal(null);
    expect(stack.backend.hits.get("/fail")).to.equal(2);
    expect(await stack.available()).to.equal(10_000_000n);
  });

  it("lets a retry run again after a 402, once the balance is topped up", async () => {
    const poor = await stack.addBuyer("0");
    const send = () => stack.post("/v1/call", { skill_id: "echo", input: {} }, { key: poor.key, headers: { "idempotency-key": "topup" } });
    expect((await send()).status).to.equal(402);
    await stack.gw.ledger.credit(poor.accountId, 5_000n, "dev_credit");
    expect((await send()).status).to.equal(200);
    expect((await send()).headers.get("idempotent-replayed")).to.equal("true");
    expect(await stack.available(poor.accountId)).to.equal(4_000n);
  });

  it("keeps keys apart per account", async () => {
    const other = await stack.addBuyer("1");
    await call("shared-key");
    const res = await stack.post(
      "/v1/call",
      { skill_id: "echo", input: { n: 1 } },
      { key: other.key, headers: { "idempotency-key": "shared-key" } },
    );
    expect(res.status).to.equal(200);
    expect(res.headers.get("idempotent-replayed")).to.equal(null);
    expect(await stack.available(other.accountId)).to.equal(1_000_000n - 1_000n);
  });

  it("forgets a key after its 24 h", async () => {
    await call("old-key");
    await stack.gw.db.run("UPDATE idempotency_keys SET created_at = created_at - ?", [24 * 3_600_000 + 1]);
    const res = await call("old-key", { n: 99 });
    expect(res.status).to.equal(200);
    expect(await stack.available()).to.equal(10_000_000n - 2_000n);
  });

  it("rejects a malformed Idempotency-Key", async () => {
    const res = await stack.post("/v1/call", { skill_id: "echo", input: {} }, { headers: { "idempotency-key": "x".repeat(300) } });
    expect(res.status).to.equal(400);
    expect(await stack.available()).to.equal(10_000_000n);
  });
});
