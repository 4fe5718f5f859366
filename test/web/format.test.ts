import { expect } from "chai";
import {
  decimalUsd,
  formatBaseUnits,
  formatCount,
  formatDay,
  formatLatency,
  formatResets,
  formatSpendLimit,
  formatUsd,
  middleEllipsis,
  usdToBaseUnits,
} from "../../server/web/src/format";

describe("dashboard money formatting (server/web/src/format.ts)", () => {
  it("shows at least 2 decimals, and a tenth of a cent when there is one (the one money format, the server's messages' too)", () => {
    expect(formatUsd(10)).to.equal("$10.00");
    expect(formatUsd(0.001)).to.equal("$0.001");
    expect(formatUsd(0)).to.equal("$0.00");
    expect(formatUsd(0.5)).to.equal("$0.50");
  });

  it("shows up to 6 decimals when the amount needs them", () => {
    expect(formatUsd(0.0025)).to.equal("$0.0025");
    expect(formatUsd(0.000001)).to.equal("$0.000001");
    expect(formatUsd(1.234567)).to.equal("$1.234567");
    expect(formatUsd(123456.78)).to.equal("$123,456.78");
  });

  it("formats negative amounts with the sign before the dollar", () => {
    expect(formatUsd(-1.5)).to.equal("-$1.50");
    expect(formatUsd(-0.001)).to.equal("-$0.001");
    expect(formatBaseUnits(-2_500n)).to.equal("-$0.0025");
  });

  it("prefers the exact base-units string when the API sends one", () => {
    expect(formatUsd(0.1, "100000")).to.equal("$0.10");
    expect(formatUsd(9007199254.740993, "9007199254740993")).to.equal("$9,007,199,254.740993");
    expect(formatUsd(-1, "-1000000")).to.equal("-$1.00");
  });

  it("never rounds through floats: 0.1 + 0.2 style amounts print as sent", () => {
    expect(formatUsd(0.3)).to.equal("$0.30");
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

  it("names a key's spending limit with its period, from the exact base units", () => {
    const limit = (usd: number | null, base: string | null, period: "day" | "month" | "total" | null) => ({
      spend_limit_usd: usd,
      spend_limit_base_units: base,
      spend_limit_period: period,
    });
    expect(formatSpendLimit(limit(5, "5000000", "day"))).to.equal("$5.00 per day");
    expect(formatSpendLimit(limit(0.0025, "2500", "month"))).to.equal("$0.0025 per month");
    expect(formatSpendLimit(limit(1_000_000, "1000000000000", "total"))).to.equal("$1,000,000.00 in total");
    expect(formatSpendLimit(limit(null, null, null))).to.equal("No limit");
  });

  it("says when a key's count resets: a time, never for a total, nothing without a limit", () => {
    expect(formatResets({ spend_limit_period: "day", resets_at: "2026-11-23T00:00:00.000Z" })).to.match(/^resets \S.*2026/);
    expect(formatResets({ spend_limit_period: "total", resets_at: null })).to.equal("never resets");
    expect(formatResets({ spend_limit_period: null, resets_at: null })).to.equal("");
  });

  it("writes base units as a plain decimal a person can edit", () => {
    expect([5_000_000n, 2_500n, 1n, 0n, 1_234_567n, -1_500_000n].map(decimalUsd)).to.deep.equal([
      "5",
      "0.0025",
      "0.000001",
      "0",
      "1.234567",
      "-1.5",
    ]);
  });

  it("formats latencies in ms, the calls log's unit, whatever their size", () => {
    expect(formatLatency(12.345)).to.equal("12.3 ms");
    expect(formatLatency(1240)).to.equal("1,240 ms");
    expect(formatLatency(null)).to.equal("—");
  });

  it("formats a usage day (UTC) the one way, and counts with their noun", () => {
    expect(formatDay("2026-11-21")).to.equal("Nov 21");
    expect(formatDay("2026-01-01", { year: true })).to.equal("Jan 1, 2026");
    expect(formatDay("not a day")).to.equal("not a day");
    expect(formatCount(1, "call")).to.equal("1 call");
    expect(formatCount(1204, "call")).to.equal("1,204 calls");
  });
});
