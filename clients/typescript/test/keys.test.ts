import { expect } from "chai";
import { type TestStack, startStack } from "../../../test/helpers/gateway";
import { AuthenticationError, ConnectionError, NotFoundError, SkillGateway, SkillGatewayError, type SkillGatewayOptions } from "../src";

async function rejectionOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected the promise to reject");
}

/**
 * client.keys against the real gateway (port 0): a keys:manage key makes, lists, changes and revokes keys for its
 * agents; the gateway's refusals arrive as typed errors with their code; create and revoke are never sent twice.
 */
describe("SkillGateway.keys against the real gateway", function () {
  let stack: TestStack;
  let managerKey: string;
  /** A client of the stack with `apiKey` (the management key by default), counting its fetches. */
  const clientOf = (options: SkillGatewayOptions = {}) => {
    const counter = { attempts: 0 };
    const inner = options.fetch ?? fetch;
    const client = new SkillGateway({
      apiKey: managerKey,
      baseUrl: stack.url,
      backoff: { initialDelayMs: 1 },
      ...options,
      fetch: (input, init) => {
        counter.attempts++;
        return inner(input, init);
      },
    });
    return Object.assign(client, { counter });
  };

  before(async () => {
    stack = await startStack();
    managerKey = (await stack.gw.keys.create(stack.buyerId, { name: "provisioner", scopes: ["keys:manage"] })).key;
  });
  after(async () => {
    await stack.close();
  });

  it("creates a key for an agent, which calls skills; lists, updates and revokes it", async () => {
    const client = clientOf();
    const expiresAt = new Date(Date.now() + 7 * 86_400_000);
    const made = await client.keys.create({
      name: "agent for u_42",
      spendLimitUsd: "0.50",
      spendLimitPeriod: "day",
      allowedSkills: ["echo"],
      expiresAt,
      metadata: { agent: "researcher-7", end_user: "u_42" },
    });
    expect(made).to.deep.include({
      name: "agent for u_42",
      scopes: ["calls"],
      allowed_skills: ["echo"],
      spend_limit_usd: 0.5,
      spend_limit_period: "day",
      expires_at: expiresAt.toISOString(),
      metadata: { agent: "researcher-7", end_user: "u_42" },
    });

    const agent = new SkillGateway({ apiKey: made.key, baseUrl: stack.url });
    expect((await agent.call("echo", { hi: 1 })).metadata.cost).to.equal(0.001);
    // The management key itself calls nothing.
    const refused = (await rejectionOf(client.call("echo", {}))) as SkillGatewayError;
    expect([refused.status, refused.code]).to.deep.equal([403, "scope_missing"]);

    const listed = (await client.keys.list()).find((k) => k.id === made.id)!;
    expect(listed).to.deep.include({ metadata: { agent: "researcher-7", end_user: "u_42" }, spent_usd: 0.001 });
    expect(listed).to.not.have.property("key");

    const updated = await client.keys.update(made.id, { name: "agent for u_43", metadata: { end_user: "u_43" }, expiresAt: null });
    expect(updated).to.deep.include({ name: "agent for u_43", metadata: { end_user: "u_43" }, expires_at: null, allowed_skills: ["echo"] });
    expect((await client.keys.update(made.id, { spendLimitPeriod: "month" })).spend_limit_period).to.equal("month");

    expect(await client.keys.revoke(made.id)).to.deep.equal({ id: made.id, revoked: true });
    expect(await rejectionOf(agent.call("echo", {}))).to.be.instanceOf(AuthenticationError);
    expect(await rejectionOf(client.keys.revoke(made.id))).to.be.instanceOf(NotFoundError);
  });

  it("gives the gateway's refusals as errors with their status and code", async () => {
    const client = clientOf();
    const wider = (await rejectionOf(client.keys.create({ scopes: ["calls", "funds:withdraw"] }))) as SkillGatewayError;
    expect(wider).to.be.instanceOf(SkillGatewayError);
    expect([wider.status, wider.code]).to.deep.equal([403, "authority_exceeded"]);
    expect(wider.message).to.match(/funds:withdraw/);
    const bad = (await rejectionOf(client.keys.create({ metadata: { "end user": "x" } }))) as SkillGatewayError;
    expect([bad.status, bad.code]).to.deep.equal([400, "invalid_request"]);
    // A key without keys:manage manages nothing.
    const caller = clientOf({ apiKey: stack.key });
    const scope = (await rejectionOf(caller.keys.list())) as SkillGatewayError;
    expect([scope.status, scope.code]).to.deep.equal([403, "scope_missing"]);
  });

  it("never sends a create or a revoke twice, and retries a list or an update", async () => {
    // Every first attempt fails before it reaches the gateway; the next ones go through.
    let failNext = true;
    const flaky: typeof fetch = async (input, init) => {
      if (failNext) {
        failNext = false;
        throw new TypeError("fetch failed", { cause: new Error("ECONNRESET") });
      }
      return fetch(input, init);
    };
    const client = clientOf({ fetch: flaky });
    const before = (await clientOf().keys.list()).length;
    expect(await rejectionOf(client.keys.create({ name: "once" }))).to.be.instanceOf(ConnectionError);
    expect(client.counter.attempts).to.equal(1);
    expect((await clientOf().keys.list()).length).to.equal(before);

    const made = await client.keys.create({ name: "twice?" });
    failNext = true;
    expect(await rejectionOf(client.keys.revoke(made.id))).to.be.instanceOf(ConnectionError);
    expect(client.counter.attempts).to.equal(3);

    failNext = true;
    expect((await client.keys.list()).some((k) => k.id === made.id)).to.equal(true);
    expect(client.counter.attempts).to.equal(5);
    failNext = true;
    expect((await client.keys.update(made.id, { name: "changed" })).name).to.equal("changed");
    expect(client.counter.attempts).to.equal(7);
  });
});
