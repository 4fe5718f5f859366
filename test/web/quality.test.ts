import { expect } from "chai";
import { formatRate, qualitySummary, sortSkills } from "../../server/web/src/quality";
import type { Skill } from "../../server/web/src/types";

/** A marketplace skill with `overrides`. */
const buildSkill = (slug: string, overrides: Partial<Skill> = {}): Skill => ({
  id: slug,
  slug,
  name: slug,
  description: "",
  price: 0.001,
  price_per_call: 0.001,
  currency: "USDC",
  rate_limit_per_min: null,
  input_schema: null,
  ...overrides,
});

const quality = (rate: number, p95: number) => ({ calls_7d: 100, success_rate_7d: rate, p50_ms_7d: 10, p95_ms_7d: p95 });

describe("the dashboard's quality figures (server/web/src/quality.ts)", () => {
  it("rounds a success rate down to a tenth of a percent", () => {
    expect(formatRate(0.9925)).to.equal("99.2%");
    expect(formatRate(0.9999)).to.equal("99.9%");
    expect(formatRate(1)).to.equal("100%");
    expect(formatRate(0.5)).to.equal("50%");
  });

  it("says a card's line, or that there are too few calls", () => {
    expect(qualitySummary({ calls_7d: 1250, success_rate_7d: 0.992, p50_ms_7d: 100, p95_ms_7d: 1250 })).to.equal(
      "99.2% of 1,250 calls · p95 1,250 ms",
    );
    expect(qualitySummary(null)).to.equal("Too few calls this week to measure");
  });

  it("orders the marketplace by price, success rate or latency, unmeasured skills last and the API's order between equals", () => {
    const skills = [
      buildSkill("a", { price_per_call: 0.01, quality: quality(0.9, 400) }),
      buildSkill("b", { price_per_call: 0.002, quality: null }),
      buildSkill("c", { price_per_call: 0.002, quality: quality(0.99, 1250) }),
      buildSkill("d", { price_per_call: 0.5, quality: quality(0.99, 100) }),
    ];
    const slugs = (order: Parameters<typeof sortSkills>[1]) => sortSkills(skills, order).map((s) => s.slug);
    expect(slugs("listed")).to.deep.equal(["a", "b", "c", "d"]);
    expect(slugs("price")).to.deep.equal(["b", "c", "a", "d"]);
    expect(slugs("success")).to.deep.equal(["c", "d", "a", "b"]);
    expect(slugs("latency")).to.deep.equal(["d", "a", "c", "b"]);
  });
});
