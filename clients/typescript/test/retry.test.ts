import { expect } from "chai";
import { Rng } from "../../../test/helpers/random";
import { ConnectionError, ConflictError, RateLimitError, SkillGatewayError, TimeoutError } from "../src";
import { errorFromResponse } from "../src/errors";
import { type BackoffOptions, DEFAULT_BACKOFF, backoffDelayMs, parseRetryAfterMs, retryDelayMs } from "../src/retry";

describe("retry policy", () => {
  const seed = 20_260_101;
  const rng = new Rng(seed);
  const backoff: BackoffOptions = { ...DEFAULT_BACKOFF, random: () => rng.next() };

  it(`waits between half and all of min(maxDelayMs, initialDelayMs * 2^retry) (seed ${seed})`, () => {
    for (let i = 0; i < 500; i++) {
      const retry = rng.int(0, 10);
      const ceiling = Math.min(backoff.maxDelayMs, backoff.initialDelayMs * 2 ** retry);
      const delay = backoffDelayMs(retry, backoff);
      expect(delay, `retry ${retry}`)
        .to.be.at.least(ceiling / 2)
        .and.at.most(ceiling);
    }
  });

  const gatewayError = (status: number, code: string) => errorFromResponse(status, { success: false, error: "x", code }, new Headers());
  // What each failure is retried as: a request that runs no skill, a skill call by default, a skill call that opted in
  // with retrySkillFailures (the seller may have done the work of a skill's 502 or a 500).
  const table: Array<[string, unknown, { read: boolean; call: boolean; optedIn: boolean }]> = [
    ["429 without Retry-After", new RateLimitError("x", { status: 429, code: "rate_limited" }), { read: true, call: true, optedIn: true }],
    ["500", gatewayError(500, "internal_error"), { read: true, call: false, optedIn: true }],
    ["502 skill_timeout", gatewayError(502, "skill_timeout"), { read: true, call: false, optedIn: true }],
    ["502 skill_error", gatewayError(502, "skill_error"), { read: true, call: false, optedIn: true }],
    ["502 skill_invalid_response", gatewayError(502, "skill_invalid_response"), { read: true, call: false, optedIn: true }],
    ["502 skill_unreachable", gatewayError(502, "skill_unreachable"), { read: true, call: false, optedIn: true }],
    ["502 skill_backend_forbidden", gatewayError(502, "skill_backend_forbidden"), { read: false, call: false, optedIn: false }],
    ["409 idempotency_key_in_use", gatewayError(409, "idempotency_key_in_use"), { read: true, call: true, optedIn: true }],
    ["a refused connection", new ConnectionError("x", { code: "connection_error" }), { read: true, call: true, optedIn: true }],
    ["a timed-out attempt", new TimeoutError("x", { code: "timeout" }), { read: true, call: true, optedIn: true }],
    ["400", gatewayError(400, "invalid_input"), { read: false, call: false, optedIn: false }],
    ["401", gatewayError(401, "unauthorized"), { read: false, call: false, optedIn: false }],
    ["402", gatewayError(402, "insufficient_balance"), { read: false, call: false, optedIn: false }],
    ["404", gatewayError(404, "skill_not_found"), { read: false, call: false, optedIn: false }],
    ["409 price_above_max", gatewayError(409, "price_above_max"), { read: false, call: false, optedIn: false }],
    ["409 of another kind", new ConflictError("x", { status: 409, code: "slug_taken" }), { read: false, call: false, optedIn: false }],
    ["422 idempotency_key_reused", gatewayError(422, "idempotency_key_reused"), { read: false, call: false, optedIn: false }],
    ["503", gatewayError(503, "not_ready"), { read: false, call: false, optedIn: false }],
    ["an error that is not the SDK's", new TypeError("bug"), { read: false, call: false, optedIn: false }],
  ];
  for (const [what, error, retried] of table) {
    it(`retries ${what} as ${JSON.stringify(retried)}`, () => {
      expect(retryDelayMs(error, 0, backoff) !== null, "a request that runs no skill").to.equal(retried.read);
      expect(retryDelayMs(error, 0, backoff, { retryFailures: false }) !== null, "a skill call").to.equal(retried.call);
      expect(retryDelayMs(error, 0, backoff, { retryFailures: true }) !== null, "a skill call that opted in").to.equal(retried.optedIn);
    });
  }

  it("waits a 429's Retry-After, and does not retry one beyond maxRetryAfterMs", () => {
    const limited = (retryAfterMs: number) => new RateLimitError("x", { status: 429, code: "rate_limited", retryAfterMs });
    expect(retryDelayMs(limited(2_000), 0, backoff)).to.equal(2_000);
    expect(retryDelayMs(limited(60_000), 0, backoff)).to.equal(60_000);
    expect(retryDelayMs(limited(60_001), 0, backoff)).to.equal(null);
  });

  it("reads Retry-After as delta-seconds or an HTTP date", () => {
    const now = Date.parse("2026-01-01T00:00:00Z");
    expect(parseRetryAfterMs("0", now)).to.equal(0);
    expect(parseRetryAfterMs(" 7 ", now)).to.equal(7_000);
    expect(parseRetryAfterMs("Thu, 01 Jan 2026 00:00:30 GMT", now)).to.equal(30_000);
    expect(parseRetryAfterMs("Wed, 31 Dec 2025 00:00:00 GMT", now)).to.equal(0);
    expect(parseRetryAfterMs("soon", now)).to.equal(undefined);
    expect(parseRetryAfterMs(null, now)).to.equal(undefined);
  });

  it("errorFromResponse keeps the base class for statuses without a subclass", () => {
    const error = gatewayError(413, "payload_too_large");
    expect([error.constructor, error.status, error.code]).to.deep.equal([SkillGatewayError, 413, "payload_too_large"]);
  });
});
