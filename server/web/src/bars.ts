/**
 * The geometry of the spend-per-day chart. Pure (no DOM): the heights come from base-unit
 * integers, so a day's bar is proportional to its exact spend, never to a rounded float.
 */

export interface DaySpend {
  date: string;
  spend: number;
  spend_base_units?: string;
  calls: number;
}

export interface Bar {
  date: string;
  /** Bar height in chart units, 0..maxHeight; a day with any spend gets at least 1 so it is visible. */
  height: number;
  units: bigint;
}

const unitsOf = (day: DaySpend): bigint => {
  if (typeof day.spend_base_units === "string" && /^-?\d+$/.test(day.spend_base_units)) return BigInt(day.spend_base_units);
  const match = /^(\d+)(?:\.(\d{1,6}))?$/.exec(String(day.spend));
  return match ? BigInt(match[1]) * 1_000_000n + BigInt((match[2] ?? "").padEnd(6, "0")) : 0n;
};

/** One bar per day, scaled so that the largest day reaches `maxHeight`. */
export function layoutBars(days: readonly DaySpend[], maxHeight: number): Bar[] {
  const units = days.map(unitsOf);
  const max = units.reduce((a, b) => (b > a ? b : a), 0n);
  return days.map((day, i) => {
    const u = units[i] > 0n ? units[i] : 0n;
    // Integer scaling first, then one conversion: exact up to the chart's resolution.
    const height = max === 0n || u === 0n ? 0 : Math.max(1, Number((u * BigInt(Math.round(maxHeight * 100))) / max) / 100);
    return { date: day.date, height, units: u };
  });
}
