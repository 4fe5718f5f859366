/**
 * The geometry of the spend-per-day chart. Pure (no DOM): the heights come from base-unit
 * integers, so a day's bar is proportional to its exact spend, never to a rounded float, and
 * the y axis's ticks are round amounts of base units.
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

/**
 * One bar per day, scaled so that `top` (by default the largest day; the y axis's last tick when there is
 * one) reaches `maxHeight`.
 */
export function layoutBars(days: readonly DaySpend[], maxHeight: number, top?: bigint): Bar[] {
  const units = days.map(unitsOf);
  const max = top ?? units.reduce((a, b) => (b > a ? b : a), 0n);
  return days.map((day, i) => {
    const u = units[i] > 0n ? (units[i] > max ? max : units[i]) : 0n;
    // Integer scaling first, then one conversion: exact up to the chart's resolution.
    const height = max <= 0n || u === 0n ? 0 : Math.max(1, Number((u * BigInt(Math.round(maxHeight * 100))) / max) / 100);
    return { date: day.date, height, units: u };
  });
}

/** The top of an empty chart's y axis: $0.001, the smallest price worth a scale. */
export const EMPTY_AXIS_TOP = 1_000n;

/**
 * The ticks of the y axis, in base units: 0, then equal steps up to the first at or above `max`, at most
 * `steps` of them. A step is 1, 2, 2.5 or 5 times a power of ten base units (2.5 only from 10 units up,
 * where it is whole), the smallest that reaches `max` in `steps`: the labels read $0.005, $0.010, $0.015.
 */
export function axisTicks(max: bigint, steps = 4): bigint[] {
  if (max <= 0n) return [0n, EMPTY_AXIS_TOP];
  const n = BigInt(steps);
  const atLeast = (max + n - 1n) / n;
  let magnitude = 1n;
  while (magnitude * 10n <= atLeast) magnitude *= 10n;
  const candidates = [magnitude, 2n * magnitude, ...(magnitude >= 10n ? [(5n * magnitude) / 2n] : []), 5n * magnitude, 10n * magnitude];
  const step = candidates.find((c) => c >= atLeast)!;
  const count = (max + step - 1n) / step;
  return Array.from({ length: Number(count) + 1 }, (_, i) => BigInt(i) * step);
}

/**
 * Which of `count` days the x axis labels: at most `most`, evenly spaced and counted back from the last
 * (today, usually), so the newest day always has its date. Ascending indices.
 */
export function xLabelIndices(count: number, most = 6): number[] {
  if (count <= 0) return [];
  const every = Math.max(1, Math.ceil(count / most));
  const indices: number[] = [];
  for (let i = count - 1; i >= 0; i -= every) indices.unshift(i);
  return indices;
}
