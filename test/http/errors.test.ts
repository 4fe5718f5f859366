import { expect } from "chai";
import { ApiError, ERROR_STATUS, type ErrorCode } from "../../server/http/errors";

/**
 * Every code a client can see and the status it must get: docs/api.md §5 (401, 402, 404,
 * 429, 500, 502 for skill failures) and the gateway's own additions. Written out here, not
 * derived from ERROR_STATUS, so a changed status fails this table.
 */
const EXPECTED: Record<ErrorCode, number> = {
  invalid_json: 400,
  invalid_request: 400,
  invalid_input: 400,
  amount_below_minimum: 400,
  user_operation_rejected: 400,
  skill_rejected_input: 400,
  unauthorized: 401,
  sign_in_failed: 401,
  invalid_signature: 401,
  csrf_failed: 403,
  origin_refused: 403,
  identity_taken: 409,
  session_exists: 409,
  slug_taken: 409,
  payout_address_refused: 409,
  no_deposit_address: 409,
  wallet_swept_automatically: 409,
  sweep_in_progress: 409,
  claim_in_progress: 409,
  nothing_to_claim: 409,
  payout_address_not_wallet: 409,
  wrong_claim_flow: 409,
  withdrawal_in_progress: 409,
  wrong_withdrawal_flow: 409,
  insufficient_balance: 402,
  skill_not_found: 404,
  not_found: 404,
  idempotency_key_in_use: 409,
  method_not_allowed: 405,
  payload_too_large: 413,
  unsupported_media_type: 415,
  idempotency_key_reused: 422,
  rate_limited: 429,
  daily_limit_reached: 429,
  internal_error: 500,
  chain_unavailable: 503,
  not_ready: 503,
  sign_in_unavailable: 503,
  skill_error: 502,
  skill_timeout: 502,
  skill_unreachable: 502,
  skill_invalid_response: 502,
  skill_backend_forbidden: 502,
};

describe("error codes", () => {
  for (const [code, status] of Object.entries(EXPECTED) as [ErrorCode, number][]) {
    it(`maps ${code} to HTTP ${status}`, () => {
      expect(ERROR_STATUS[code]).to.equal(status);
      expect(new ApiError(code, "message").status).to.equal(status);
    });
  }

  it("has no code outside this table", () => {
    expect(Object.keys(ERROR_STATUS)).to.have.members(Object.keys(EXPECTED));
  });

  it("uses snake_case for every code", () => {
    for (const code of Object.keys(ERROR_STATUS)) expect(code).to.match(/^[a-z]+(_[a-z]+)*$/);
  });

  describe("ApiError", () => {
    it("is an Error carrying its code, status, message and headers", () => {
      const error = new ApiError("rate_limited", "Too many requests", { "retry-after": "2" });
      expect(error).to.be.instanceOf(Error);
      expect(error).to.include({ name: "ApiError", code: "rate_limited", status: 429, message: "Too many requests" });
      expect(error.headers).to.deep.equal({ "retry-after": "2" });
    });

    it("has no headers unless given", () => {
      expect(new ApiError("unauthorized", "Missing API key").headers).to.deep.equal({});
    });
  });
});
