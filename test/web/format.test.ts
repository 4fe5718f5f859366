import { expect } from "chai";
import { formatBaseUnits, formatLatency, formatUsd, middleEllipsis, usdToBaseUnits } from "../../server/web/src/format";

describe("dashboard money formatting (server/web/src/format.ts)", () => {
  it("shows at least 3 decimals, so a tenth of a cent is visible", () => {
    expect(formatUsd(10)).to.equal("$10.000");
    expect(formatUsd(0.001)).to.equal("$0.001");
    expect(formatUsd(0)).to.equal("$0.000");
  });

  it("shows up to 6 decimals when the amount needs them", () => {
    expect(formatUsd(0.0025)).to.equal("$0.0025");
    expect(formatUsd(0.000001)).to.equal("$0.000001");
    expect(formatUsd(1.234567)).to.equal("$1.234567");
    expect(formatUsd(123456.78)).to.equal("$123,456.780");
  });

  it("formats negative amounts with the sign before the dollar", () => {
    expect(formatUsd(-1.5)).to.equal("-$1.500");
    expect(formatUsd(-0.001)).to.equal("-$0.001");
    expect(formatBaseUnits(-2_500n)).to.equal("-$0.0025");
  });

  it("prefers the exact base-units string when the API sends one", () => {
    expect(formatUsd(0.1, "100000")).to.equal("$0.100");
    expect(formatUsd(9007199254.740993, "9007199254740993")).to.equal("$9,007,199,254.740993");
    expect(formatUsd(-1, "-1000000")).to.equal("-$1.000");
  });

  it("never rounds through floats: 0.1 + 0.2 style amounts print as sent", () => {
    expect(formatUsd(0.3)).to.equal("$0.300");
    expect(usdToBaseUnits(0.3)).to.equal(300_000n);
    expect(usdToBaseUnits("19.999999")).to.equal(19_999_999n);
  });

  it("says — for an amount the API does not know, and refuses more than 6 decimals", () => {
    expect(formatUsd(null)).to.equal("—");
    expect(formatUsd(undefined)).to.equal("—");
    expect(usdToBaseUnits("0.0000001")).to.equal(undefined);
    expect(usdToBaseUnits(Number.NaN)).to.equal(undefined);
  });

  it("shortens long values in the middle and leaves short ones alone", () => {
    expect(middleEllipsis("0x1234567890abcdef1234567890abcdef12345678")).to.equal("0x1234…5678");
    expect(middleEllipsis("atom_abc")).to.equal("atom_abc");
  });

  it("formats latencies in ms below a second and s above", () => {
    expect(formatLatency(12.345)).to.equal("12.3 ms");
    expect(formatLatency(1240)).to.equal("1.24 s");
    expect(formatLatency(null)).to.equal("—");
  });
});
