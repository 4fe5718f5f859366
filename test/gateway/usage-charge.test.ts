import { expect } from "chai";
import { readUsageCharge } from "../../server/gateway/usage-charge";
import { signCharge } from "../../server/gateway/signature";

/** readUsageCharge: the order of its checks, and the fee split of what was reported (issue 27 §1). */
describe("readUsageCharge", () => {
  const skill = { priceMicros: 10_000n, signingSecret: "secret" };
  const CALL = "call-1";
  const included = { feeMode: "included" as const, feeBps: 1_000n };
  const signed = (charge: string) => ({ charge, signature: signCharge("secret", CALL, charge) });

  it("splits what was reported per the fee mode", () => {
    expect(readUsageCharge(skill, CALL, signed("0.0042"), included)).to.deep.equal({
      ok: true,
      charge: { chargedMicros: 4_200n, sellerMicros: 3_780n, feeMicros: 420n },
    });
    expect(readUsageCharge(skill, CALL, signed("0.0042"), { feeMode: "on_top", feeBps: 1_000n })).to.deep.equal({
      ok: true,
      charge: { chargedMicros: 4_620n, sellerMicros: 4_200n, feeMicros: 420n },
    });
    expect(readUsageCharge(skill, CALL, signed("0.01"), included)).to.include({ ok: true });
    expect(readUsageCharge(skill, CALL, signed("0"), included)).to.deep.equal({
      ok: true,
      charge: { chargedMicros: 0n, sellerMicros: 0n, feeMicros: 0n },
    });
  });

  const PROBLEMS: Array<[string, Parameters<typeof readUsageCharge>[2], string]> = [
    ["no report", undefined, "the backend reported no X-Skill-Charge"],
    ["a signature alone", { signature: "v1=00" }, "the backend reported no X-Skill-Charge"],
    ["no signature", { charge: "0.001" }, "X-Skill-Charge is not signed (no X-Skill-Charge-Signature)"],
    ["a malformed charge, signed", signed("0.0000001"), "X-Skill-Charge is not a USD amount with at most 6 decimals"],
    ["a wrong signature over too much", { charge: "0.02", signature: signCharge("other", CALL, "0.02") }, "does not match"],
    ["too much, signed", signed("0.010001"), "X-Skill-Charge of $0.010001 is above the skill's max_price of $0.01"],
  ];
  for (const [what, reported, problem] of PROBLEMS) {
    it(`refuses ${what}`, () => {
      const read = readUsageCharge(skill, CALL, reported, included);
      expect(read.ok).to.equal(false);
      expect(!read.ok && read.problem).to.contain(problem);
    });
  }
});
