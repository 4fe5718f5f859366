import { expect } from "chai";
import { type SpendPeriod, periodEndMs, periodStartMs } from "../../server/ledger/spend-limits";

const at = (iso: string) => Date.parse(iso);
const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

describe("spending periods (UTC)", () => {
  const cases: Array<[SpendPeriod, string, string, string | null]> = [
    // period, now, the period's start, its end
    ["day", "2026-11-22T13:45:07.123Z", "2026-11-22T00:00:00.000Z", "2026-11-23T00:00:00.000Z"],
    ["day", "2026-11-22T00:00:00.000Z", "2026-11-22T00:00:00.000Z", "2026-11-23T00:00:00.000Z"],
    ["day", "2026-11-22T23:59:59.999Z", "2026-11-22T00:00:00.000Z", "2026-11-23T00:00:00.000Z"],
    ["day", "2026-12-31T18:00:00.000Z", "2026-12-31T00:00:00.000Z", "2027-01-01T00:00:00.000Z"],
    ["day", "2028-02-28T10:00:00.000Z", "2028-02-28T00:00:00.000Z", "2028-02-29T00:00:00.000Z"],
    ["day", "1969-12-31T12:00:00.000Z", "1969-12-31T00:00:00.000Z", "1970-01-01T00:00:00.000Z"],
    ["month", "2026-11-22T13:45:07.123Z", "2026-11-01T00:00:00.000Z", "2026-12-01T00:00:00.000Z"],
    ["month", "2026-01-31T23:59:59.999Z", "2026-01-01T00:00:00.000Z", "2026-02-01T00:00:00.000Z"],
    ["month", "2026-02-15T00:00:00.000Z", "2026-02-01T00:00:00.000Z", "2026-03-01T00:00:00.000Z"],
    ["month", "2028-02-29T12:00:00.000Z", "2028-02-01T00:00:00.000Z", "2028-03-01T00:00:00.000Z"],
    ["month", "2100-02-28T12:00:00.000Z", "2100-02-01T00:00:00.000Z", "2100-03-01T00:00:00.000Z"],
    ["month", "2000-02-29T12:00:00.000Z", "2000-02-01T00:00:00.000Z", "2000-03-01T00:00:00.000Z"],
    ["month", "2026-04-30T23:59:59.999Z", "2026-04-01T00:00:00.000Z", "2026-05-01T00:00:00.000Z"],
    ["month", "2026-12-31T23:59:59.999Z", "2026-12-01T00:00:00.000Z", "2027-01-01T00:00:00.000Z"],
    ["month", "2027-01-01T00:00:00.000Z", "2027-01-01T00:00:00.000Z", "2027-02-01T00:00:00.000Z"],
    ["total", "2026-11-22T13:45:07.123Z", "1970-01-01T00:00:00.000Z", null],
  ];
  for (const [period, now, start, end] of cases) {
    it(`puts ${now} in the ${period} from ${start} to ${end ?? "forever"}`, () => {
      const startMs = periodStartMs(period, at(now));
      expect(iso(startMs)).to.equal(start);
      expect(iso(periodEndMs(period, startMs))).to.equal(end);
    });
  }

  it("gives every month its own length: 28, 29 in a leap year (not 2100), 30 or 31 days", () => {
    const days = (year: number, month: number) => {
      const start = Date.UTC(year, month - 1, 1);
      return (periodEndMs("month", start)! - start) / 86_400_000;
    };
    expect([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12].map((m) => days(2026, m))).to.deep.equal([
      31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31,
    ]);
    expect([days(2024, 2), days(2028, 2), days(2000, 2), days(2100, 2)]).to.deep.equal([29, 29, 29, 28]);
  });

  it("starts the next period exactly where the previous one ends, one millisecond after its last", () => {
    for (const period of ["day", "month"] as const) {
      let startMs = periodStartMs(period, at("2027-12-15T08:00:00Z"));
      for (let i = 0; i < 40; i++) {
        const endMs = periodEndMs(period, startMs)!;
        expect(periodStartMs(period, endMs - 1), `${period} #${i}`).to.equal(startMs);
        expect(periodStartMs(period, endMs), `${period} #${i}`).to.equal(endMs);
        startMs = endMs;
      }
    }
  });

  it("reads the time in UTC whatever the process's time zone", () => {
    const saved = process.env.TZ;
    // Node reads TZ afresh when it changes; the arithmetic never asks for local time.
    process.env.TZ = "Pacific/Kiritimati";
    try {
      expect(iso(periodStartMs("day", at("2026-11-22T23:30:00Z")))).to.equal("2026-11-22T00:00:00.000Z");
      expect(iso(periodStartMs("month", at("2026-11-30T23:30:00Z")))).to.equal("2026-11-01T00:00:00.000Z");
    } finally {
      if (saved === undefined) delete process.env.TZ;
      else process.env.TZ = saved;
    }
  });

  it("refuses a time that is not a number", () => {
    expect(() => periodStartMs("day", Number.NaN)).to.throw(RangeError);
  });
});
