import { expect } from "chai";
import { axisTicks, layoutBars, xLabelIndices } from "../../server/web/src/bars";

describe("dashboard spend chart geometry (server/web/src/bars.ts)", () => {
  it("scales bars to the busiest day from base units, and keeps a tiny day visible", () => {
    const bars = layoutBars(
      [
        { date: "2026-11-20", spend: 0, spend_base_units: "0", calls: 0 },
        { date: "2026-11-21", spend: 0.001, spend_base_units: "1000", calls: 1 },
        { date: "2026-11-22", spend: 2, spend_base_units: "2000000", calls: 5 },
      ],
      100,
    );
    expect(bars.map((b) => b.height)).to.deep.equal([0, 1, 100]);
    expect(bars[2].units).to.equal(2_000_000n);
  });

  it("draws no bars when nothing was spent", () => {
    expect(layoutBars([{ date: "2026-11-20", spend: 0, calls: 0 }], 100).map((b) => b.height)).to.deep.equal([0]);
  });
});

describe("dashboard spend chart axes (server/web/src/bars.ts)", () => {
  it("puts round dollar ticks on the y axis: steps of 1, 2, 2.5 or 5 times a power of ten, reaching the busiest day", () => {
    // $0.012 at most: $0.005 steps up to $0.015 ($0.0025 would take 5 steps, $0.0030 is not round).
    expect(axisTicks(12_000n)).to.deep.equal([0n, 5_000n, 10_000n, 15_000n]);
    expect(axisTicks(2_000_000n)).to.deep.equal([0n, 500_000n, 1_000_000n, 1_500_000n, 2_000_000n]);
    expect(axisTicks(10_000_000n)).to.deep.equal([0n, 2_500_000n, 5_000_000n, 7_500_000n, 10_000_000n]);
    expect(axisTicks(1_000n)).to.deep.equal([0n, 250n, 500n, 750n, 1_000n]);
    expect(axisTicks(7n)).to.deep.equal([0n, 2n, 4n, 6n, 8n]);
    expect(axisTicks(1n)).to.deep.equal([0n, 1n]);
    expect(axisTicks(123_456_789_012n)).to.deep.equal([0n, 50_000_000_000n, 100_000_000_000n, 150_000_000_000n]);
  });

  it("keeps at most the steps asked for, and the last tick at or above the busiest day", () => {
    for (let max = 1n; max < 100_000n; max = max * 3n + 1n) {
      for (const steps of [3, 4, 5]) {
        const ticks = axisTicks(max, steps);
        expect(ticks.length - 1, `${max}/${steps}`).to.be.within(1, steps);
        expect(ticks.at(-1)! >= max, `${max}/${steps}`).to.equal(true);
        expect(ticks.at(-2)! < max, `${max}/${steps}`).to.equal(true);
      }
    }
  });

  it("gives an empty chart a scale of its own, up to $0.001", () => {
    expect(axisTicks(0n)).to.deep.equal([0n, 1_000n]);
  });

  it("scales bars to the axis's top, not to the busiest day", () => {
    const days = [
      { date: "2026-11-20", spend: 0.012, spend_base_units: "12000", calls: 6 },
      { date: "2026-11-21", spend: 0.003, spend_base_units: "3000", calls: 1 },
    ];
    expect(layoutBars(days, 100, 15_000n).map((b) => b.height)).to.deep.equal([80, 20]);
  });

  it("labels at most six days of the x axis, evenly, always the last", () => {
    expect(xLabelIndices(30)).to.deep.equal([4, 9, 14, 19, 24, 29]);
    expect(xLabelIndices(7)).to.deep.equal([0, 2, 4, 6]);
    expect(xLabelIndices(3)).to.deep.equal([0, 1, 2]);
    expect(xLabelIndices(1)).to.deep.equal([0]);
    expect(xLabelIndices(0)).to.deep.equal([]);
    expect(xLabelIndices(366)).to.have.length(6);
  });
});
