import { expect } from "chai";
import { costLine, failureLine, qualityLine } from "../../server/http/tool-text";
import {
  costLine as sdkCostLine,
  failureLine as sdkFailureLine,
  qualityLine as sdkQualityLine,
} from "../../clients/typescript/src/tool-text";

describe("the hosted MCP server's sentences about money (server/http/tool-text.ts)", () => {
  it("says what a call charged, naming the skill and the call", () => {
    expect(costLine({ skill_id: "echo", price_paid: 0.001, call_id: "c-1" })).to.equal("Charged $0.001 for echo (call c-1).");
  });

  it("says a replay was already paid, never Charged", () => {
    expect(costLine({ skill_id: "echo", price_paid: 0.001, call_id: "c-1", replayed: true })).to.equal(
      "Already paid: $0.001 for echo (call c-1, replayed).",
    );
  });

  it("says once that a failure charged nothing", () => {
    expect(failureLine("Skill error: backend answered 503. You were not charged.", "skill_error")).to.equal(
      "Skill error: backend answered 503. You were not charged. You may retry, or do without it.",
    );
    expect(failureLine("Insufficient balance: this call costs $0.001 and $0.00 is available")).to.equal(
      "Insufficient balance: this call costs $0.001 and $0.00 is available. Nothing was charged.",
    );
  });

  it("says what to do next: a 429's wait, a bad argument's fix", () => {
    expect(failureLine("Rate limit exceeded: 100 calls per minute for this API key.", "rate_limited", 7)).to.equal(
      "Rate limit exceeded: 100 calls per minute for this API key. Nothing was charged. Retry after 7 s.",
    );
    expect(failureLine("Input does not match the skill's schema: /text must be string", "invalid_input")).to.equal(
      "Input does not match the skill's schema: /text must be string. Nothing was charged. Fix the arguments and call again.",
    );
  });

  it("says a skill's measured quality in one sentence, the rate rounded down, or that there are too few calls", () => {
    expect(qualityLine({ calls_7d: 1250, success_rate_7d: 0.9925, p50_ms_7d: 125, p95_ms_7d: 400 })).to.equal(
      "Succeeded 99.2% of 1,250 calls this week, p95 400 ms.",
    );
    expect(qualityLine({ calls_7d: 20, success_rate_7d: 1, p50_ms_7d: 1, p95_ms_7d: 2.5 })).to.equal(
      "Succeeded 100% of 20 calls this week, p95 2.5 ms.",
    );
    expect(qualityLine({ calls_7d: 1_000_000, success_rate_7d: 0.5, p50_ms_7d: 100, p95_ms_7d: 12_500 })).to.equal(
      "Succeeded 50% of 1,000,000 calls this week, p95 12,500 ms.",
    );
    expect(qualityLine(null)).to.equal("Too few calls this week to measure its success rate.");
  });

  it("says what the SDK's text says (the CLI's stdio MCP server and LangChain), word for word, for every outcome", () => {
    // The server cannot import the published SDK, nor the SDK the server: the two copies are held together here.
    const codes = [
      undefined,
      "invalid_input",
      "skill_rejected_input",
      "invalid_request",
      "key_spend_limit_reached",
      "insufficient_balance",
      "skill_not_allowed",
      "skill_not_found",
      "price_above_max",
      "skill_error",
      "skill_timeout",
      "skill_unreachable",
      "skill_invalid_response",
      "skill_backend_forbidden",
      "skill_bad_output",
      "rate_limited",
      "daily_limit_reached",
    ];
    for (const code of codes)
      for (const message of ["Something failed", "Skill error: it broke.\nYou were not charged.", "Nothing was charged: the price rose"])
        for (const retryAfter of [undefined, 7])
          expect(failureLine(message, code, retryAfter), `${code} ${message}`).to.equal(sdkFailureLine(message, code, retryAfter));
    for (const quality of [
      null,
      { calls_7d: 1250, success_rate_7d: 0.9925, p50_ms_7d: 125, p95_ms_7d: 340 },
      { calls_7d: 21, success_rate_7d: 0.9523, p50_ms_7d: 1.6, p95_ms_7d: 6.3 },
      { calls_7d: 12345, success_rate_7d: 0.9999, p50_ms_7d: 1000, p95_ms_7d: 125_000 },
    ])
      expect(qualityLine(quality)).to.equal(sdkQualityLine(quality));
    for (const replayed of [false, true])
      for (const callId of [undefined, "c-1"])
        expect(costLine({ skill_id: "echo", price_paid: 0.002, call_id: callId, replayed })).to.equal(
          sdkCostLine({ skillId: "echo", cost: 0.002, callId, replayed }),
        );
  });
});
