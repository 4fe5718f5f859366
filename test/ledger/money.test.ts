import { expect } from "chai";
import fc from "fast-check";
import { microsToUsd, usdDisplay, usdText, usdToMicros } from "../../server/ledger/money";

// One billion dollars: below it a USD number has at most 15 significant digits, so its
// shortest decimal form (what JSON.stringify writes) carries every micro-dollar back.
const ONE_BILLION_USD_MICROS = 10n ** 15n;

describe("money", () => {
  describe("microsToUsd", () => {
    const cases: [bigint, number][] = [
      [0n, 0],
      [1n, 0.000001],
      [10n, 0.00001],
      [999_999n, 0.999999],
      [1_000_000n, 1],
      [1_500_000n, 1.5],
      [123_456_789n, 123.456789],
      [-1n, -0.000001],
      [-2_500_000n, -2.5],
      [ONE_BILLION_USD_MICROS - 1n, 999_999_999.999999],
    ];
    for (const [micros, usd] of cases) {
      it(`turns ${micros} base units into ${usd} USD`, () => {
        expect(microsToUsd(micros)).to.equal(usd);
      });
    }

    it("gives the nearest double to the exact amount for every value below 2^53 units", () => {
      fc.assert(
        fc.property(fc.bigInt({ min: -(2n ** 53n) + 1n, max: 2n ** 53n - 1n }), (micros) => {
          // Number(micros) is exact here and IEEE division rounds correctly, so this is
          // the double nearest to micros / 10^6: what an exact conversion must return.
          expect(microsToUsd(micros)).to.equal(Number(micros) / 1e6);
        }),
        { seed: 0x6d6f6e, numRuns: 2000 },
      );
    });
  });

  describe("usdText", () => {
    const cases: [bigint, string][] = [
      [0n, "0.00"],
      [1n, "0.000001"],
      [1_000n, "0.001"],
      [10_000n, "0.01"],
      [5_000_000n, "5.00"],
      [5_500_000n, "5.50"],
      [1_234_567n, "1.234567"],
      [1_000_000_000_000n, "1000000.00"],
      [-2_500_000n, "-2.50"],
    ];
    for (const [micros, text] of cases) {
      it(`writes ${micros} base units as "${text}"`, () => {
        expect(usdText(micros)).to.equal(text);
        expect(usdToMicros(text.replace("-", ""))).to.equal(micros < 0n ? -micros : micros);
      });
    }
  });

  describe("usdDisplay (the one money format of messages and the dashboard)", () => {
    const cases: [bigint, string][] = [
      [0n, "$0.00"],
      [1n, "$0.000001"],
      [1_000n, "$0.001"],
      [2_500n, "$0.0025"],
      [500_000n, "$0.50"],
      [5_000_000n, "$5.00"],
      [1_234_567n, "$1.234567"],
      [10_000_000_000n, "$10,000.00"],
      [1_234_567_890_000n, "$1,234,567.89"],
      [-2_500_000n, "-$2.50"],
    ];
    for (const [micros, text] of cases) {
      it(`writes ${micros} base units as "${text}"`, () => expect(usdDisplay(micros)).to.equal(text));
    }
  });

  describe("usdToMicros", () => {
    const cases: [string, bigint][] = [
      ["0", 0n],
      ["0.0", 0n],
      ["0.000001", 1n],
      ["0.001", 1_000n],
      ["1", 1_000_000n],
      ["1.5", 1_500_000n],
      ["10.25", 10_250_000n],
      ["007.100000", 7_100_000n],
      ["123456789012345678901234567890.123456", 123_456_789_012_345_678_901_234_567_890_123_456n],
    ];
    for (const [usd, micros] of cases) {
      it(`reads "${usd}" as ${micros} base units`, () => {
        expect(usdToMicros(usd)).to.equal(micros);
      });
    }

    it("rejects an amount with more than 6 decimals instead of rounding it", () => {
      expect(() => usdToMicros("0.0000001")).to.throw(RangeError, "at most 6 decimals");
      expect(() => usdToMicros("1.1234567")).to.throw(RangeError, "at most 6 decimals");
    });

    it("rejects a negative amount", () => {
      expect(() => usdToMicros("-1")).to.throw(RangeError);
      expect(() => usdToMicros("-0.5")).to.throw(RangeError);
    });

    const garbage = ["", " ", ".", "1.", ".5", "abc", "1e3", "1E-6", "0x10", "1,5", "1.2.3", "+1", "NaN", "Infinity", "１", "1 000", "$1"];
    for (const input of garbage) {
      it(`rejects ${JSON.stringify(input)}`, () => {
        expect(() => usdToMicros(input)).to.throw(RangeError, "not a USD amount");
      });
    }
  });

  describe("round trips", () => {
    it("reads back every amount below one billion USD from its JSON number", () => {
      fc.assert(
        fc.property(fc.bigInt({ min: 0n, max: ONE_BILLION_USD_MICROS - 1n }), (micros) => {
          const json = JSON.stringify({ usd: microsToUsd(micros) });
          const usd = String((JSON.parse(json) as { usd: number }).usd);
          expect(usdToMicros(usd)).to.equal(micros);
        }),
        { seed: 0x726f75, numRuns: 2000 },
      );
    });

    it("reads back the edge amounts from their JSON number", () => {
      for (const micros of [0n, 1n, 9n, 10n, 999_999n, 1_000_000n, 1_000_001n, ONE_BILLION_USD_MICROS - 1n]) {
        expect(usdToMicros(String(microsToUsd(micros)))).to.equal(micros);
      }
    });

    it("turns every string of at most 6 decimals into base units and back", () => {
      fc.assert(
        fc.property(fc.bigInt({ min: 0n, max: 10n ** 30n }), (micros) => {
          const whole = micros / 1_000_000n;
          const frac = (micros % 1_000_000n).toString().padStart(6, "0");
          expect(usdToMicros(`${whole}.${frac}`)).to.equal(micros);
        }),
        { seed: 0x737472, numRuns: 1000 },
      );
    });
  });
});
