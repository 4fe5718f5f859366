import { expect } from "chai";
import { costLine, failureLine } from "../../server/http/tool-text";

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
});
