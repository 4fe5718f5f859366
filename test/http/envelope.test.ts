import { expect } from "chai";
import { callMetadata, dataEnvelope, errorEnvelope, successEnvelope, type CallMeta } from "../../server/http/envelope";

const meta = (overrides: Partial<CallMeta> = {}): CallMeta => ({
  skillId: "echo",
  responseTimeMs: 42,
  chargedMicros: 1_000n,
  ...overrides,
});

describe("envelopes", () => {
  describe("successEnvelope", () => {
    it('uses the spec\'s snake_case metadata for POST /v1/call ("call")', () => {
      expect(successEnvelope("call", { echoed: "hi" }, meta())).to.deep.equal({
        success: true,
        data: { echoed: "hi" },
        metadata: { skill_id: "echo", response_time_ms: 42, price_paid: 0.001 },
      });
    });

    it('uses the spec\'s camelCase metadata for POST /v1/skills/:skillId/call ("skill_call")', () => {
      expect(successEnvelope("skill_call", { echoed: "hi" }, meta())).to.deep.equal({
        success: true,
        data: { echoed: "hi" },
        metadata: { skillId: "echo", cost: 0.001, responseTime: 42 },
      });
    });

    it("serializes to JSON without a bigint left in it", () => {
      const body = JSON.stringify(successEnvelope("call", [1, 2], meta({ chargedMicros: 250_000n })));
      expect(body).to.equal('{"success":true,"data":[1,2],"metadata":{"skill_id":"echo","response_time_ms":42,"price_paid":0.25}}');
    });
  });

  describe("callMetadata", () => {
    const usd: [bigint, number][] = [
      [0n, 0],
      [1n, 0.000001],
      [1_000n, 0.001],
      [1_100n, 0.0011],
      [123_456n, 0.123456],
      [500_000n, 0.5],
      [1_000_000n, 1],
      [12_345_678_901n, 12_345.678901],
    ];
    for (const [micros, amount] of usd) {
      it(`states ${micros} base units as exactly ${amount} USD on both endpoints`, () => {
        expect(callMetadata("call", meta({ chargedMicros: micros })).price_paid).to.equal(amount);
        expect(callMetadata("skill_call", meta({ chargedMicros: micros })).cost).to.equal(amount);
      });
    }

    it("reports 0, not a missing field, for a call that was not charged", () => {
      expect(callMetadata("call", meta({ chargedMicros: 0n }))).to.have.property("price_paid", 0);
      expect(callMetadata("skill_call", meta({ chargedMicros: 0n }))).to.have.property("cost", 0);
    });

    it("rounds the response time to hundredths of a millisecond", () => {
      expect(callMetadata("call", meta({ responseTimeMs: 12.3456 })).response_time_ms).to.equal(12.35);
      expect(callMetadata("skill_call", meta({ responseTimeMs: 0.004 })).responseTime).to.equal(0);
    });

    it("carries only the spec's fields for each endpoint, no mix of casings", () => {
      expect(callMetadata("call", meta())).to.have.all.keys("skill_id", "response_time_ms", "price_paid");
      expect(callMetadata("skill_call", meta())).to.have.all.keys("skillId", "cost", "responseTime");
    });
  });

  describe("errorEnvelope", () => {
    it("keeps the spec's {success: false, error} and adds the code", () => {
      expect(errorEnvelope("insufficient_balance", "Insufficient balance: add funds")).to.deep.equal({
        success: false,
        error: "Insufficient balance: add funds",
        code: "insufficient_balance",
      });
    });

    it("adds extra fields beside them", () => {
      const metadata = callMetadata("call", meta({ chargedMicros: 0n }));
      expect(errorEnvelope("skill_error", "skill backend answered HTTP 503", { metadata })).to.deep.equal({
        success: false,
        error: "skill backend answered HTTP 503",
        code: "skill_error",
        metadata: { skill_id: "echo", response_time_ms: 42, price_paid: 0 },
      });
    });
  });

  describe("dataEnvelope", () => {
    it("wraps read data as {success: true, data}", () => {
      expect(dataEnvelope({ balance: 1 })).to.deep.equal({ success: true, data: { balance: 1 } });
    });
  });
});
