import { expect } from "chai";
import fc from "fast-check";
import type { FeeMode } from "../../server/ledger/fees";
import { computeCharge } from "../../server/ledger/fees";

interface Row {
  priceMicros: bigint;
  feeBps: bigint;
  chargedMicros: bigint;
  sellerMicros: bigint;
  feeMicros: bigint;
}

const INCLUDED: Row[] = [
  { priceMicros: 1_000_000n, feeBps: 1000n, chargedMicros: 1_000_000n, sellerMicros: 900_000n, feeMicros: 100_000n },
  { priceMicros: 1_000n, feeBps: 1000n, chargedMicros: 1_000n, sellerMicros: 900n, feeMicros: 100n },
  { priceMicros: 10n, feeBps: 1000n, chargedMicros: 10n, sellerMicros: 9n, feeMicros: 1n },
  // 19 * 10% = 1.9 micros: the fee rounds down and the seller keeps the remainder.
  { priceMicros: 19n, feeBps: 1000n, chargedMicros: 19n, sellerMicros: 18n, feeMicros: 1n },
  { priceMicros: 9n, feeBps: 1000n, chargedMicros: 9n, sellerMicros: 9n, feeMicros: 0n },
  { priceMicros: 1n, feeBps: 1000n, chargedMicros: 1n, sellerMicros: 1n, feeMicros: 0n },
  { priceMicros: 0n, feeBps: 1000n, chargedMicros: 0n, sellerMicros: 0n, feeMicros: 0n },
  { priceMicros: 3_333_333n, feeBps: 250n, chargedMicros: 3_333_333n, sellerMicros: 3_250_000n, feeMicros: 83_333n },
  { priceMicros: 1_000_000n, feeBps: 0n, chargedMicros: 1_000_000n, sellerMicros: 1_000_000n, feeMicros: 0n },
  { priceMicros: 1_000_000n, feeBps: 1n, chargedMicros: 1_000_000n, sellerMicros: 999_900n, feeMicros: 100n },
  { priceMicros: 1_000_000n, feeBps: 10_000n, chargedMicros: 1_000_000n, sellerMicros: 0n, feeMicros: 1_000_000n },
];

const ON_TOP: Row[] = [
  { priceMicros: 1_000_000n, feeBps: 1000n, chargedMicros: 1_100_000n, sellerMicros: 1_000_000n, feeMicros: 100_000n },
  { priceMicros: 10n, feeBps: 1000n, chargedMicros: 11n, sellerMicros: 10n, feeMicros: 1n },
  { priceMicros: 19n, feeBps: 1000n, chargedMicros: 20n, sellerMicros: 19n, feeMicros: 1n },
  { priceMicros: 9n, feeBps: 1000n, chargedMicros: 9n, sellerMicros: 9n, feeMicros: 0n },
  { priceMicros: 0n, feeBps: 1000n, chargedMicros: 0n, sellerMicros: 0n, feeMicros: 0n },
  { priceMicros: 3_333_333n, feeBps: 250n, chargedMicros: 3_416_666n, sellerMicros: 3_333_333n, feeMicros: 83_333n },
  { priceMicros: 1_000_000n, feeBps: 0n, chargedMicros: 1_000_000n, sellerMicros: 1_000_000n, feeMicros: 0n },
  { priceMicros: 1_000_000n, feeBps: 10_000n, chargedMicros: 2_000_000n, sellerMicros: 1_000_000n, feeMicros: 1_000_000n },
];

describe("computeCharge", () => {
  const tables: [FeeMode, Row[]][] = [
    ["included", INCLUDED],
    ["on_top", ON_TOP],
  ];
  for (const [feeMode, rows] of tables) {
    describe(`with the fee ${feeMode === "included" ? "included in the price" : "on top of the price"}`, () => {
      for (const row of rows) {
        it(`splits a price of ${row.priceMicros} at ${row.feeBps} bps into ${row.sellerMicros} + ${row.feeMicros}, charging ${row.chargedMicros}`, () => {
          expect(computeCharge(row.priceMicros, feeMode, row.feeBps)).to.deep.equal({
            chargedMicros: row.chargedMicros,
            sellerMicros: row.sellerMicros,
            feeMicros: row.feeMicros,
          });
        });
      }
    });
  }

  it("always charges exactly seller + fee, with the fee rounded down", () => {
    fc.assert(
      fc.property(
        fc.bigInt({ min: 0n, max: 2n ** 64n }),
        fc.oneof(fc.constantFrom(0n, 1n, 1000n, 9999n, 10_000n), fc.bigInt({ min: 0n, max: 10_000n })),
        fc.constantFrom<FeeMode>("included", "on_top"),
        (priceMicros, feeBps, feeMode) => {
          const { chargedMicros, sellerMicros, feeMicros } = computeCharge(priceMicros, feeMode, feeBps);
          expect(sellerMicros + feeMicros).to.equal(chargedMicros);
          // Rounded down: fee <= price * bps / 10000 < fee + 1, in exact integers.
          expect(feeMicros * 10_000n <= priceMicros * feeBps).to.equal(true);
          expect(priceMicros * feeBps < (feeMicros + 1n) * 10_000n).to.equal(true);
          expect(sellerMicros >= 0n && feeMicros >= 0n).to.equal(true);
          if (feeMode === "included") expect(chargedMicros).to.equal(priceMicros);
          else expect(sellerMicros).to.equal(priceMicros);
        },
      ),
      { seed: 0x666565, numRuns: 2000 },
    );
  });

  it("refuses a negative price", () => {
    expect(() => computeCharge(-1n, "included", 1000n)).to.throw(RangeError, "negative price: -1");
    expect(() => computeCharge(-1n, "on_top", 1000n)).to.throw(RangeError, "negative price: -1");
  });

  it("refuses a fee below 0 or above 10000 bps", () => {
    expect(() => computeCharge(1_000n, "included", -1n)).to.throw(RangeError, "fee out of range: -1 bps");
    expect(() => computeCharge(1_000n, "on_top", 10_001n)).to.throw(RangeError, "fee out of range: 10001 bps");
  });
});
