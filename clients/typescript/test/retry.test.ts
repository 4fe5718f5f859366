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
  const table: Array<[string, unknown, boolean]> = [
    ["429 without Retry-After", new RateLimitError("x", { status: 429, code: "rate_limited" }), true],
    ["500", gatewayError(500, "internal_error"), true],
    ["502", gatewayError(502, "skill_timeout"), true],
    ["409 idempotency_key_in_use", gatewayError(409, "idempotency_key_in_use"), true],
    ["a refused connection", new ConnectionError("x", { code: "connection_error" }), true],
    ["a timed-out attempt", new TimeoutError("x", { code: "timeout" }), true],
    ["400", gatewayError(400, "invalid_input"), false],
    ["401", gatewayError(401, "unauthorized"), false],
    ["402", gatewayError(402, "insufficient_balance"), false],
    ["404", gatewayError(404, "skill_not_found"), false],
    ["409 of another kind", new ConflictError("x", { status: 409, code: "slug_taken" }), false],
    ["422 idempotency_key_reused", gatewayError(422, "idempotency_key_reused"), false],
    ["503", gatewayError(503, "not_ready"), false],
    ["an error that is not the SDK's", new TypeError("bug"), false],
  ];
  for (const [what, error, retried] of table) {
    it(`${retried ? "retries" : "does not retry"} ${what}`, () => {
      expect(retryDelayMs(error, 0, backoff) !== null).to.equal(retried);
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
