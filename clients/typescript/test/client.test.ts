import { expect } from "chai";
import { Rng } from "../../../test/helpers/random";
import {
  AuthenticationError,
  BadRequestError,
  ConflictError,
  ConnectionError,
  InsufficientBalanceError,
  InternalServerError,
  KeySpendLimitReachedError,
  NotFoundError,
  PriceAboveMaxError,
  RateLimitError,
  SkillError,
  SkillGateway,
  SkillGatewayError,
  type SkillGatewayOptions,
  TimeoutError,
} from "../src";
import { type FakeGateway, type ScriptedAnswer, fail, ok, refusedUrl, startFakeGateway } from "./fake-server";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** Rejections as values, so that a test can look at the error it expects. */
async function rejectionOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected the promise to reject");
}

describe("SkillGateway against a scripted gateway", () => {
  let server: FakeGateway | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  /** A client of a fake gateway answering `script`, with 1 ms backoff and seeded jitter. */
  async function clientFor(script: ScriptedAnswer[], options: SkillGatewayOptions = {}): Promise<SkillGateway> {
    server = await startFakeGateway(script);
    const rng = new Rng(11);
    return new SkillGateway({
      apiKey: "atom_test",
      baseUrl: server.url,
      backoff: { initialDelayMs: 1, random: () => rng.next() },
      ...options,
    });
  }

  const keysSent = () => server!.received.map((r) => r.headers["idempotency-key"]);

  describe("retries", () => {
    it("retries a 429 after its Retry-After and returns the success", async () => {
      const client = await clientFor([fail(429, "rate_limited", { "retry-after": "0" }), ok({ hello: "world" })]);
      const result = await client.call<{ hello: string }>("echo", { hello: "world" });
      expect(result.data.hello).to.equal("world");
      expect(server!.received).to.have.length(2);
    });

    it("does not retry a skill's 502 or a 500 by default: the seller may have done the work", async () => {
      for (const [status, code] of [
        [502, "skill_timeout"],
        [502, "skill_error"],
        [500, "internal_error"],
      ] as const) {
        const client = await clientFor([fail(status, code), ok({ n: 1 })]);
        const error = (await rejectionOf(client.call("echo", {}))) as SkillGatewayError;
        expect([error.status, error.code]).to.deep.equal([status, code]);
        expect(server!.received, code).to.have.length(1);
        await server!.close();
        server = undefined;
      }
    });

    it("retries a 502 twice when the call opts in, and returns the third attempt's success, with one Idempotency-Key on all three", async () => {
      const client = await clientFor([fail(502, "skill_error"), fail(502, "skill_timeout"), ok({ n: 1 })], { retrySkillFailures: true });
      const result = await client.call("echo", { n: 1 });
      expect(result.data).to.deep.equal({ n: 1 });
      const keys = keysSent();
      expect(keys).to.have.length(3);
      expect(keys[0]).to.match(UUID);
      expect(new Set(keys).size).to.equal(1);
      expect(result.metadata.idempotencyKey).to.equal(keys[0]);
    });

    it("gives up after maxRetries and throws the last SkillError with its call id and idempotency key", async () => {
      const client = await clientFor([
        fail(502, "skill_error"),
        fail(502, "skill_error"),
        fail(502, "skill_unreachable", { "x-call-id": "call-3" }),
      ]);
      const error = await rejectionOf(client.call("echo", {}, { retrySkillFailures: true }));
      expect(error).to.be.instanceOf(SkillError).and.instanceOf(SkillGatewayError);
      const e = error as SkillError;
      expect([e.status, e.code, e.message, e.callId]).to.deep.equal([502, "skill_unreachable", "scripted skill_unreachable", "call-3"]);
      expect(e.idempotencyKey).to.equal(keysSent()[0]);
      expect(server!.received).to.have.length(3);
    });

    it("retries a 500 when the client opts in, and throws InternalServerError when it persists", async () => {
      const client = await clientFor([fail(500, "internal_error"), fail(500, "internal_error")], {
        maxRetries: 1,
        retrySkillFailures: true,
      });
      expect(await rejectionOf(client.call("echo", {}))).to.be.instanceOf(InternalServerError);
      expect(server!.received).to.have.length(2);
    });

    it("retries a 409 idempotency_key_in_use and reports the replayed answer", async () => {
      const client = await clientFor([fail(409, "idempotency_key_in_use"), ok({ x: 1 }, undefined, { "idempotent-replayed": "true" })]);
      const result = await client.call("echo", { x: 1 }, { idempotencyKey: "my-key-1" });
      expect(result.metadata.replayed).to.equal(true);
      expect(result.metadata.callId).to.equal(undefined);
      expect(keysSent()).to.deep.equal(["my-key-1", "my-key-1"]);
    });

    it("sends no retry with maxRetries 0", async () => {
      const client = await clientFor([fail(502, "skill_error")], { maxRetries: 0, retrySkillFailures: true });
      expect(await rejectionOf(client.call("echo", {}))).to.be.instanceOf(SkillError);
      expect(server!.received).to.have.length(1);
    });

    it("does not retry a 429 whose Retry-After is beyond maxRetryAfterMs, and reports retryAfterMs", async () => {
      const client = await clientFor([fail(429, "daily_limit_reached", { "retry-after": "3600" })]);
      const error = (await rejectionOf(client.call("echo", {}))) as RateLimitError;
      expect(error).to.be.instanceOf(RateLimitError);
      expect([error.status, error.code, error.retryAfterMs]).to.deep.equal([429, "daily_limit_reached", 3_600_000]);
      expect(server!.received).to.have.length(1);
    });

    it("throws RateLimitError with retryAfterMs when 429s outlast the retries", async () => {
      const limited = fail(429, "rate_limited", { "retry-after": "0" });
      const client = await clientFor([limited, limited, limited]);
      const error = (await rejectionOf(client.call("echo", {}))) as RateLimitError;
      expect(error).to.be.instanceOf(RateLimitError);
      expect(error.retryAfterMs).to.equal(0);
      expect(server!.received).to.have.length(3);
    });
  });

  describe("errors that are never retried", () => {
    const cases: Array<[number, string, new (...args: any[]) => Error]> = [
      [400, "invalid_input", BadRequestError],
      [401, "unauthorized", AuthenticationError],
      [402, "insufficient_balance", InsufficientBalanceError],
      [402, "key_spend_limit_reached", KeySpendLimitReachedError],
      [404, "skill_not_found", NotFoundError],
      [409, "price_above_max", PriceAboveMaxError],
      [422, "idempotency_key_reused", ConflictError],
      [403, "forbidden", SkillGatewayError],
      [413, "payload_too_large", SkillGatewayError],
      [503, "not_ready", SkillGatewayError],
    ];
    for (const [status, code, ErrorClass] of cases) {
      it(`maps ${status} ${code} to ${ErrorClass.name}, with the gateway's message and code, after one attempt`, async () => {
        const client = await clientFor([fail(status, code, { "x-call-id": `call-${status}` })]);
        const error = (await rejectionOf(client.call("echo", {}))) as SkillGatewayError;
        expect(error.constructor).to.equal(ErrorClass);
        expect([error.status, error.code, error.message, error.callId]).to.deep.equal([status, code, `scripted ${code}`, `call-${status}`]);
        expect(server!.received).to.have.length(1);
      });
    }

    it("makes a key's spending limit an InsufficientBalanceError of its own kind, not retried", async () => {
      const client = await clientFor([fail(402, "key_spend_limit_reached"), ok({})]);
      const error = await rejectionOf(client.call("echo", {}));
      expect(error).to.be.instanceOf(KeySpendLimitReachedError).and.instanceOf(InsufficientBalanceError).and.instanceOf(SkillGatewayError);
      expect((error as KeySpendLimitReachedError).name).to.equal("KeySpendLimitReachedError");
      expect(server!.received).to.have.length(1);
    });

    it("keeps the status's class for the spending-limit code on another status", async () => {
      const client = await clientFor([fail(400, "key_spend_limit_reached")]);
      expect(((await rejectionOf(client.call("echo", {}))) as Error).constructor).to.equal(BadRequestError);
    });

    it("maps an answer that is not the gateway's envelope by its status", async () => {
      const client = await clientFor([{ status: 502, headers: { "content-type": "text/html" }, body: "<html>Bad Gateway</html>" }], {
        maxRetries: 0,
      });
      const error = (await rejectionOf(client.call("echo", {}))) as SkillError;
      expect(error).to.be.instanceOf(SkillError);
      expect([error.code, error.message]).to.deep.equal(["http_502", "The gateway answered HTTP 502."]);
    });

    it("refuses a 200 that is not the gateway's envelope", async () => {
      const client = await clientFor([{ status: 200, body: "<html>hello</html>" }]);
      const error = (await rejectionOf(client.call("echo", {}))) as SkillGatewayError;
      expect([error.constructor, error.code]).to.deep.equal([SkillGatewayError, "invalid_response"]);
    });
  });

  describe("no answer", () => {
    it("throws ConnectionError after retrying a refused connection", async () => {
      const url = await refusedUrl();
      let attempts = 0;
      const rng = new Rng(5);
      const client = new SkillGateway({
        apiKey: "atom_test",
        baseUrl: url,
        backoff: { initialDelayMs: 1, random: () => rng.next() },
        fetch: (input, init) => {
          attempts++;
          return fetch(input, init);
        },
      });
      const error = (await rejectionOf(client.call("echo", {}))) as ConnectionError;
      expect(error).to.be.instanceOf(ConnectionError);
      expect([error.status, error.code]).to.deep.equal([undefined, "connection_error"]);
      expect(error.message).to.contain(url);
      expect(attempts).to.equal(3);
    });

    it("throws TimeoutError when the gateway never answers, after retrying with the same key", async () => {
      // Long enough for each attempt to reach the scripted gateway on a loaded machine (50 ms lost one under load).
      const client = await clientFor(["hang", "hang"], { timeoutMs: 400, maxRetries: 1 });
      const error = (await rejectionOf(client.call("echo", {}))) as TimeoutError;
      expect(error).to.be.instanceOf(TimeoutError);
      expect(error.code).to.equal("timeout");
      const keys = keysSent();
      expect(keys).to.have.length(2);
      expect(keys[0]).to.equal(keys[1]);
    });

    it("a per-call timeoutMs overrides the client's", async () => {
      const client = await clientFor(["hang"], { timeoutMs: 600_000, maxRetries: 0 });
      expect(await rejectionOf(client.call("echo", {}, { timeoutMs: 20 }))).to.be.instanceOf(TimeoutError);
    });

    it("stops at once, without a retry, when the caller's signal aborts", async () => {
      const client = await clientFor(["hang", ok({})]);
      const controller = new AbortController();
      const pending = client.call("echo", {}, { signal: controller.signal });
      await server!.arrived(0);
      const reason = new Error("the agent gave up");
      controller.abort(reason);
      expect(await rejectionOf(pending)).to.equal(reason);
      expect(server!.received).to.have.length(1);
    });

    it("stops waiting between retries when the caller's signal aborts", async () => {
      const client = await clientFor([fail(502, "skill_error"), ok({})], { backoff: { initialDelayMs: 600_000 } });
      const controller = new AbortController();
      const pending = client.call("echo", {}, { signal: controller.signal });
      await server!.arrived(0);
      controller.abort(new Error("stop"));
      expect(((await rejectionOf(pending)) as Error).message).to.equal("stop");
      expect(server!.received).to.have.length(1);
    });

    it("sends nothing with a signal already aborted", async () => {
      const client = await clientFor([ok({})]);
      const error = await rejectionOf(client.call("echo", {}, { signal: AbortSignal.abort() }));
      expect((error as Error).name).to.equal("AbortError");
      expect(server!.received).to.have.length(0);
    });
  });

  describe("requests and metadata", () => {
    it("POST /v1/call wraps the input and normalizes the snake_case metadata and the headers", async () => {
      const headers = { "x-call-id": "call-1", "ratelimit-limit": "100", "ratelimit-remaining": "99", "ratelimit-reset": "60" };
      const client = await clientFor([ok({ a: 1 }, { skill_id: "echo", price_paid: 0.001, response_time_ms: 2.5 }, headers)]);
      const { metadata } = await client.call("echo", { a: 1 }, { idempotencyKey: "k-1" });
      expect(metadata).to.deep.equal({
        skillId: "echo",
        cost: 0.001,
        responseTimeMs: 2.5,
        callId: "call-1",
        idempotencyKey: "k-1",
        replayed: false,
        rateLimit: { limit: 100, remaining: 99, resetSec: 60 },
      });
      const [request] = server!.received;
      expect([request.method, request.url, request.headers.authorization, request.headers["content-type"]]).to.deep.equal([
        "POST",
        "/v1/call",
        "Bearer atom_test",
        "application/json",
      ]);
      expect(JSON.parse(request.body)).to.deep.equal({ skill_id: "echo", input: { a: 1 } });
    });

    it("takes the call's id from the metadata, so that a replay names the call it replays", async () => {
      const replay = { "idempotent-replayed": "true" };
      const client = await clientFor([
        ok({ a: 1 }, { skill_id: "echo", price_paid: 0.001, response_time_ms: 1, call_id: "call-9" }, replay),
        ok({ a: 1 }, { skillId: "echo", cost: 0.001, responseTime: 1, callId: "call-10" }, replay),
      ]);
      const viaCall = (await client.call("echo", { a: 1 })).metadata;
      const viaSkill = (await client.skill("echo").call({ a: 1 })).metadata;
      expect([viaCall.callId, viaCall.replayed, viaSkill.callId, viaSkill.replayed]).to.deep.equal(["call-9", true, "call-10", true]);
    });

    it("POST /v1/skills/:skillId/call sends the flat body and normalizes the camelCase metadata", async () => {
      const client = await clientFor([ok({ b: 2 }, { skillId: "my skill", cost: 0.25, responseTime: 7 }, { "x-call-id": "call-2" })]);
      const { data, metadata } = await client.skill("my skill").call<{ b: number }>({ b: 2 });
      expect(data.b).to.equal(2);
      expect([metadata.skillId, metadata.cost, metadata.responseTimeMs, metadata.callId, metadata.rateLimit]).to.deep.equal([
        "my skill",
        0.25,
        7,
        "call-2",
        undefined,
      ]);
      expect(metadata.idempotencyKey).to.match(UUID);
      expect(server!.received[0].url).to.equal("/v1/skills/my%20skill/call");
      expect(JSON.parse(server!.received[0].body)).to.deep.equal({ b: 2 });
    });

    it("gives each call its own Idempotency-Key", async () => {
      const client = await clientFor([ok({}), ok({})]);
      await client.call("echo", {});
      await client.call("echo", {});
      const keys = keysSent();
      expect(keys[0]).to.not.equal(keys[1]);
    });

    it("reads the key and the address from SKILL_GATEWAY_API_KEY and SKILL_GATEWAY_URL", async () => {
      server = await startFakeGateway([ok({})]);
      const saved = { key: process.env.SKILL_GATEWAY_API_KEY, url: process.env.SKILL_GATEWAY_URL };
      process.env.SKILL_GATEWAY_API_KEY = "atom_from_env";
      process.env.SKILL_GATEWAY_URL = `${server.url}/`;
      try {
        const client = new SkillGateway();
        expect(client.baseUrl).to.equal(server.url);
        await client.call("echo", {});
        expect(server.received[0].headers.authorization).to.equal("Bearer atom_from_env");
      } finally {
        for (const [name, value] of [
          ["SKILL_GATEWAY_API_KEY", saved.key],
          ["SKILL_GATEWAY_URL", saved.url],
        ] as const) {
          if (value === undefined) delete process.env[name];
          else process.env[name] = value;
        }
      }
    });

    it("defaults to http://127.0.0.1:8787 without SKILL_GATEWAY_URL", () => {
      const saved = process.env.SKILL_GATEWAY_URL;
      delete process.env.SKILL_GATEWAY_URL;
      try {
        expect(new SkillGateway().baseUrl).to.equal("http://127.0.0.1:8787");
      } finally {
        if (saved !== undefined) process.env.SKILL_GATEWAY_URL = saved;
      }
    });

    it("sends no Authorization header without a key, and GETs the reads without a body", async () => {
      const saved = process.env.SKILL_GATEWAY_API_KEY;
      delete process.env.SKILL_GATEWAY_API_KEY;
      try {
        server = await startFakeGateway([{ status: 200, body: { success: true, data: [] } }]);
        const client = new SkillGateway({ baseUrl: server.url });
        expect(await client.skills.list()).to.deep.equal([]);
        const [request] = server.received;
        expect([request.method, request.url, request.headers.authorization, request.body]).to.deep.equal([
          "GET",
          "/v1/skills",
          undefined,
          "",
        ]);
      } finally {
        if (saved !== undefined) process.env.SKILL_GATEWAY_API_KEY = saved;
      }
    });

    it("pages GET /v1/usage with limit and before until next_before is null", async () => {
      const call = (id: string) => ({ id, cost: 0.001 });
      const client = await clientFor([
        { status: 200, body: { success: true, data: { calls: [call("c3"), call("c2")], next_before: 200 } } },
        { status: 200, body: { success: true, data: { calls: [call("c1")], next_before: null } } },
      ]);
      const ids: string[] = [];
      for await (const c of client.usage({ limit: 2 })) ids.push(c.id);
      expect(ids).to.deep.equal(["c3", "c2", "c1"]);
      expect(server!.received.map((r) => r.url)).to.deep.equal(["/v1/usage?limit=2", "/v1/usage?limit=2&before=200"]);
    });
  });
});
