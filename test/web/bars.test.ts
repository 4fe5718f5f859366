import { expect } from "chai";
import { layoutBars } from "../../server/web/src/bars";

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
