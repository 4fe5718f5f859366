/**
 * A skill's measured quality in the dashboard (GET /v1/skills's `quality`), and the Marketplace's sort orders. Pure: no
 * DOM, so the unit tests run it under Node.
 */

import { usdToBaseUnits } from "./format";
import type { Skill, SkillQuality } from "./types";

/** A success rate for a person, rounded down to a tenth of a percent (never better than measured): "99.2%", "100%". */
export function formatRate(rate: number): string {
  const tenths = Math.floor(Math.round(rate * 10_000) / 10);
  return `${Math.floor(tenths / 10)}${tenths % 10 === 0 ? "" : `.${tenths % 10}`}%`;
}

/** The short line a skill's card says: "99.2% of 1,250 calls · p95 400 ms", or that there are too few calls. */
export function qualitySummary(quality: SkillQuality | null | undefined): string {
  if (!quality) return "Too few calls this week to measure";
  return `${formatRate(quality.success_rate_7d)} of ${quality.calls_7d.toLocaleString("en-US")} calls · p95 ${quality.p95_ms_7d.toLocaleString("en-US")} ms`;
}

/** How the Marketplace may be ordered. */
export type SkillOrder = "listed" | "price" | "success" | "latency";

export const SKILL_ORDERS: ReadonlyArray<{ value: SkillOrder; label: string }> = [
  { value: "listed", label: "As listed" },
  { value: "price", label: "Price: lowest first" },
  { value: "success", label: "Success rate: highest first" },
  { value: "latency", label: "Latency (p95): fastest first" },
];

const priceOf = (skill: Skill) => usdToBaseUnits(skill.price_per_call ?? skill.price) ?? 0n;

/**
 * The skills in `order`; the API's order otherwise and between equals. A skill without figures (too few calls) goes
 * after every skill with them when ordering by success rate or latency: unmeasured is not better.
 */
export function sortSkills<T extends Skill>(skills: readonly T[], order: SkillOrder): T[] {
  const indexed = skills.map((skill, index) => ({ skill, index }));
  const compare = (a: T, b: T): number => {
    if (order === "price") {
      const pa = priceOf(a);
      const pb = priceOf(b);
      return pa < pb ? -1 : pa > pb ? 1 : 0;
    }
    if (order === "success" || order === "latency") {
      if (!a.quality || !b.quality) return a.quality ? -1 : b.quality ? 1 : 0;
      return order === "success" ? b.quality.success_rate_7d - a.quality.success_rate_7d : a.quality.p95_ms_7d - b.quality.p95_ms_7d;
    }
    return 0;
  };
  return indexed.sort((a, b) => compare(a.skill, b.skill) || a.index - b.index).map((x) => x.skill);
}
