import fs from "node:fs";
import { expect } from "chai";
import { ERROR_CODES, GatewayError, refusal, refusalError } from "../../server/errors";
import type { ErrorCode } from "../../server/errors";
import { ApiError, ERROR_STATUS, toApiError } from "../../server/http/errors";
import { ERRORS_DOC, docErrorTable, renderErrorTable } from "../../scripts/error-table";

/**
 * Every code a client can see and the status it must get: docs/api.md §5 (401, 402, 404,
 * 429, 500, 502 for skill failures) and the gateway's own additions. Written out here, not
 * derived from ERROR_STATUS, so a changed status fails this table.
 */
const EXPECTED: Record<ErrorCode, number> = {
  payment_required: 402,
  payment_invalid: 402,
  payment_reused: 402,
  payment_settlement_failed: 402,
  invalid_json: 400,
  invalid_request: 400,
  invalid_input: 400,
  amount_below_minimum: 400,
  user_operation_rejected: 400,
  skill_rejected_input: 400,
  unauthorized: 401,
  key_expired: 401,
  scope_missing: 403,
  skill_not_allowed: 403,
  authority_exceeded: 403,
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
  price_above_max: 409,
  insufficient_balance: 402,
  key_spend_limit_reached: 402,
  skill_not_found: 404,
  not_found: 404,
  no_wallet: 404,
  idempotency_key_in_use: 409,
  method_not_allowed: 405,
  payload_too_large: 413,
  unsupported_media_type: 415,
  idempotency_key_reused: 422,
  rate_limited: 429,
  daily_limit_reached: 429,
  internal_error: 500,
  chain_unavailable: 503,
  chain_not_configured: 503,
  not_ready: 503,
  limits_unavailable: 503,
  database_unavailable: 503,
  sign_in_unavailable: 503,
  skill_error: 502,
  skill_timeout: 502,
  skill_unreachable: 502,
  skill_invalid_response: 502,
  skill_bad_output: 502,
  skill_bad_charge: 502,
  usage_pricing_unsupported: 409,
  skill_backend_forbidden: 502,
};

describe("error codes", () => {
  for (const [code, status] of Object.entries(EXPECTED) as [ErrorCode, number][]) {
    it(`maps ${code} to HTTP ${status}`, () => {
      expect(ERROR_STATUS[code]).to.equal(status);
      expect(new ApiError(code, "message").status).to.equal(status);
    });
  }

  it("has no code outside this table, in the statuses or in the codes themselves", () => {
    expect(Object.keys(ERROR_STATUS)).to.have.members(Object.keys(EXPECTED));
    expect(Object.keys(ERROR_CODES)).to.have.members(Object.keys(EXPECTED));
  });

  it("says in a line what each code means", () => {
    for (const meaning of Object.values(ERROR_CODES)) expect(meaning).to.match(/^\S.{10,}$/);
  });

  describe("docs/errors.md", () => {
    const doc = fs.readFileSync(ERRORS_DOC, "utf8");

    it("lists every code with its status, generated from the one source (npm run docs:errors)", () => {
      const table = docErrorTable(doc);
      expect(table, "docs/errors.md lacks the error-codes markers").to.be.a("string");
      expect(table, "docs/errors.md's error table differs from the code: run npm run docs:errors").to.equal(renderErrorTable());
    });

    it("gives every code it names in a table row the status the code has", () => {
      // Rows such as "| 502 | `skill_error`, `skill_timeout` | ..." anywhere on the page.
      const rows = doc.split("\n").filter((line) => /^\| \d{3} \| `/.test(line));
      expect(rows.length).to.be.greaterThan(Object.keys(EXPECTED).length);
      for (const row of rows) {
        const [, status, codes] = row.split("|").map((cell) => cell.trim());
        for (const [, code] of codes.matchAll(/`([a-z_]+)`/g)) {
          expect(Object.hasOwn(EXPECTED, code), `${code} in docs/errors.md is not a code`).to.equal(true);
          expect(EXPECTED[code as ErrorCode], `docs/errors.md's row for ${code}`).to.equal(Number(status));
        }
      }
    });
  });

  it("uses snake_case for every code", () => {
    for (const code of Object.keys(ERROR_STATUS)) expect(code).to.match(/^[a-z]+(_[a-z]+)*$/);
  });

  describe("GatewayError", () => {
    it("carries its code, message, details and cause, and knows no status", () => {
      const cause = new Error("ECONNREFUSED 127.0.0.1:4337");
      const error = new GatewayError("chain_unavailable", "The bundler is unreachable; try again.", { details: { retry: true }, cause });
      expect(error).to.be.instanceOf(Error);
      expect(error).to.include({ name: "GatewayError", code: "chain_unavailable", message: "The bundler is unreachable; try again." });
      expect(error.details).to.deep.equal({ retry: true });
      expect(error.cause).to.equal(cause);
      expect(error).to.not.have.property("status");
    });

    it("is what a refusal becomes when thrown", () => {
      const error = refusalError(refusal("no_wallet", "This account has no embedded wallet yet.", { details: { account: "a" } }));
      expect(error).to.be.instanceOf(GatewayError);
      expect(error).to.include({ code: "no_wallet", message: "This account has no embedded wallet yet." });
      expect(error.details).to.deep.equal({ account: "a" });
    });
  });

  describe("toApiError, the one path from anything thrown to the client", () => {
    it("gives a base error its code's status and keeps its details", () => {
      const error = toApiError(new GatewayError("wrong_claim_flow", "Use the other flow.", { details: { flow: "owner" } }));
      expect(error).to.include({ code: "wrong_claim_flow", status: 409, message: "Use the other flow." });
      expect(error.details).to.deep.equal({ flow: "owner" });
    });

    it("turns anything else into a 500 that tells nothing of it", () => {
      const secret = new Error("SQLITE_CONSTRAINT: UNIQUE constraint failed: holds.id");
      const error = toApiError(secret, "Internal server error: the call was not charged.");
      expect(error).to.include({ code: "internal_error", status: 500, message: "Internal server error: the call was not charged." });
      expect(error.details).to.deep.equal({});
      expect(error.cause).to.equal(secret);
    });

    it("keeps an ApiError as it is, headers too", () => {
      const thrown = new ApiError("rate_limited", "Slow down.", { "retry-after": "3" });
      expect(toApiError(thrown)).to.equal(thrown);
    });
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
