import { expect } from "chai";
import {
  BadRequestError,
  InsufficientBalanceError,
  KeySpendLimitReachedError,
  NotFoundError,
  PriceAboveMaxError,
  RateLimitError,
  SkillError,
  SkillGatewayError,
  TimeoutError,
  costLine,
  failureText,
} from "../src";

/** The sentences the TypeScript clients give a model, one per outcome (issue 26 section 4). */
describe("the SDK's text for a model (tool-text.ts)", () => {
  const meta = { skillId: "echo", cost: 0.001, callId: "c-1", replayed: false };

  it("success: what was charged, for which skill and call", () => {
    expect(costLine(meta)).to.equal("Charged $0.001 for echo (call c-1).");
  });

  it("replay: already paid, never Charged", () => {
    expect(costLine({ ...meta, replayed: true })).to.equal("Already paid: $0.001 for echo (call c-1, replayed).");
  });

  const cases: Array<[string, SkillGatewayError, string]> = [
    [
      "402 balance",
      new InsufficientBalanceError("Insufficient balance: this call costs $0.001 and $0.00 is available. Add funds.", {
        status: 402,
        code: "insufficient_balance",
      }),
      "Insufficient balance: this call costs $0.001 and $0.00 is available. Add funds. Nothing was charged.",
    ],
    [
      "402 key limit",
      new KeySpendLimitReachedError(
        "This key's spending limit of $1.00 per day is reached ($1.00 spent); it resets at 2026-01-02T00:00:00Z.",
        {
          status: 402,
          code: "key_spend_limit_reached",
        },
      ),
      "This key's spending limit of $1.00 per day is reached ($1.00 spent); it resets at 2026-01-02T00:00:00Z. Nothing was charged. Paid calls with this API key are refused until the limit allows them.",
    ],
    [
      "409 price cap",
      new PriceAboveMaxError(
        `The skill "echo" costs $0.002 per call, above this call's max_price of $0.001: nothing was charged. Accept the new price with a max_price of at least $0.002.`,
        { status: 409, code: "price_above_max" },
      ),
      `The skill "echo" costs $0.002 per call, above this call's max_price of $0.001: nothing was charged. Accept the new price with a max_price of at least $0.002.`,
    ],
    [
      "403",
      new SkillGatewayError(`This API key may not call the skill "echo": it is not in the key's allowed_skills.`, {
        status: 403,
        code: "skill_not_allowed",
      }),
      `This API key may not call the skill "echo": it is not in the key's allowed_skills. Nothing was charged. Do without it, or use a key allowed to call it.`,
    ],
    [
      "404",
      new NotFoundError(`Skill not found: "ech". Check the skill_id slug or UUID.`, { status: 404, code: "skill_not_found" }),
      `Skill not found: "ech". Check the skill_id slug or UUID. Nothing was charged.`,
    ],
    [
      "429",
      new RateLimitError("Rate limit exceeded: 100 calls per minute for this API key.", {
        status: 429,
        code: "rate_limited",
        retryAfterMs: 6_500,
      }),
      "Rate limit exceeded: 100 calls per minute for this API key. Nothing was charged. Retry after 7 s.",
    ],
    [
      "502",
      new SkillError("Skill error: skill backend answered HTTP 503. You were not charged.", { status: 502, code: "skill_error" }),
      "Skill error: skill backend answered HTTP 503. You were not charged. You may retry, or do without it.",
    ],
    [
      "502 timeout",
      new SkillError("Skill error: skill backend timed out after 30000 ms. You were not charged.", { status: 502, code: "skill_timeout" }),
      "Skill error: skill backend timed out after 30000 ms. You were not charged. You may retry, or do without it.",
    ],
    [
      "no answer (the SDK's timeout)",
      new TimeoutError("No answer within 60000 ms.", { code: "timeout" }),
      "No answer within 60000 ms. No answer came, so the call may have been charged; a retry with the same Idempotency-Key is charged at most once.",
    ],
    [
      "400 bad argument",
      new BadRequestError("Input does not match the skill's schema: /text must be string", { status: 400, code: "invalid_input" }),
      "Input does not match the skill's schema: /text must be string. Nothing was charged. Fix the arguments and call again.",
    ],
  ];
  for (const [outcome, error, text] of cases) {
    it(`${outcome}: one line, the charge said once, what to do next`, () => {
      expect(failureText(error)).to.equal(text);
    });
  }
});
