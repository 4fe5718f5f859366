/**
 * Money and text formatting for the dashboard. Pure functions only (no DOM), so the unit
 * tests can import them under Node.
 *
 * Money is never float arithmetic: the API's USD numbers have at most 6 decimals and print
 * exactly (String(0.001) === "0.001"), so they are parsed as decimal text into integer base
 * units (1 USDC = 1,000,000), and formatted back from those integers.
 */

const DECIMALS = 6;
const UNIT = 10n ** BigInt(DECIMALS);
/**
 * The one money format, the gateway's messages' too (server/ledger/money.ts usdDisplay): at least 2 decimals,
 * up to 6 when the amount has them: "$5.00", "$0.50", "$0.001", "$0.0025".
 */
const MIN_DECIMALS = 2;

/** A USD amount as the API sends it: a JSON number (≤ 6 decimals), or a decimal string. */
export type UsdAmount = number | string;

/** Parses a base-units string ("-1500", "1000") into an integer; undefined when it is not one. */
export function parseBaseUnits(text: string): bigint | undefined {
  return /^-?\d+$/.test(text.trim()) ? BigInt(text.trim()) : undefined;
}

/**
 * Converts a USD amount (a JSON number or a decimal string) into base units, exactly.
 * Returns undefined for anything that is not a finite amount with at most 6 decimals.
 */
export function usdToBaseUnits(amount: UsdAmount): bigint | undefined {
  if (typeof amount === "number" && !Number.isFinite(amount)) return undefined;
  const text = decimalText(amount);
  const match = /^(-)?(\d+)(?:\.(\d{1,6}))?$/.exec(text);
  if (!match) return undefined;
  const units = BigInt(match[2]) * UNIT + BigInt((match[3] ?? "").padEnd(DECIMALS, "0"));
  return match[1] ? -units : units;
}

/** The plain decimal text of a number: JS prints 1e-7 and 1e21 in exponent form, which the parser rejects. */
function decimalText(amount: UsdAmount): string {
  if (typeof amount === "string") return amount.trim();
  const text = String(amount);
  if (!/e/i.test(text)) return text;
  // toFixed(6) is exact enough here: only tiny (< 1e-6) or huge (≥ 1e21) numbers get here.
  return Math.abs(amount) < 1 ? amount.toFixed(DECIMALS) : BigInt(amount).toString();
}

/** Formats base units as dollars: `$10.00`, `$0.001`, `$0.0025`, `-$1.50`, with thousands separators. */
export function formatBaseUnits(units: bigint): string {
  const negative = units < 0n;
  const abs = negative ? -units : units;
  const whole = (abs / UNIT).toString().replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  let frac = (abs % UNIT).toString().padStart(DECIMALS, "0");
  while (frac.length > MIN_DECIMALS && frac.endsWith("0")) frac = frac.slice(0, -1);
  return `${negative ? "-" : ""}$${whole}.${frac}`;
}

/**
 * Formats an amount the API sent. `baseUnits` (the `*_base_units` string) wins when present,
 * being exact by construction; otherwise the USD number is parsed as decimal text.
 * Returns "—" for a missing amount (null: the API does not know it, e.g. the chain is away).
 */
export function formatUsd(amount: UsdAmount | null | undefined, baseUnits?: string | null): string {
  const fromBase = typeof baseUnits === "string" ? parseBaseUnits(baseUnits) : undefined;
  if (fromBase !== undefined) return formatBaseUnits(fromBase);
  if (amount === null || amount === undefined) return "—";
  const units = usdToBaseUnits(amount);
  return units === undefined ? String(amount) : formatBaseUnits(units);
}

/** Base units as a plain decimal a person can edit: "5", "0.0025" (no "$", no separators, no trailing zeros). */
export function decimalUsd(units: bigint): string {
  const negative = units < 0n;
  const abs = negative ? -units : units;
  const frac = (abs % UNIT).toString().padStart(DECIMALS, "0").replace(/0+$/, "");
  return `${negative ? "-" : ""}${abs / UNIT}${frac === "" ? "" : `.${frac}`}`;
}

/** How the dashboard names a spending limit's period, after its amount: "$5.00 per day". */
export const PERIOD_WORDS = { day: "per day", month: "per month", total: "in total" } as const;

/** A key's spending limit: "$5.00 per day", or "No limit". */
export function formatSpendLimit(key: {
  spend_limit_usd: UsdAmount | null;
  spend_limit_base_units: string | null;
  spend_limit_period: keyof typeof PERIOD_WORDS | null;
}): string {
  if (key.spend_limit_period === null || (key.spend_limit_usd === null && key.spend_limit_base_units === null)) return "No limit";
  return `${formatUsd(key.spend_limit_usd, key.spend_limit_base_units)} ${PERIOD_WORDS[key.spend_limit_period]}`;
}

/**
 * When a key's spending count starts again, for a person: "resets Nov 23, 2026, 01:00" (in the viewer's time zone;
 * the period itself is UTC's), "never resets" for a total, "" without a limit.
 */
export function formatResets(key: { spend_limit_period: keyof typeof PERIOD_WORDS | null; resets_at: string | null }): string {
  if (key.spend_limit_period === null) return "";
  return key.resets_at === null ? "never resets" : `resets ${formatDateTime(key.resets_at)}`;
}

/** Shortens a long value for display (`0x1234…cdef`); copy buttons always copy the whole value. */
export function middleEllipsis(value: string, head = 6, tail = 4): string {
  return value.length <= head + tail + 1 ? value : `${value.slice(0, head)}…${value.slice(-tail)}`;
}

/** A date-time in the viewer's locale, short; the raw text when the API sent something unparsable. */
export function formatDateTime(iso: string | null | undefined): string {
  if (!iso) return "—";
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  return date.toLocaleString(undefined, { year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" });
}

/** A latency, always in milliseconds (the unit of the calls log): `12.3 ms`, `1,240 ms`. */
export function formatLatency(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return "—";
  return `${(Math.round(ms * 10) / 10).toLocaleString("en-US")} ms`;
}

/**
 * A UTC day as the API sends it (2026-11-21), for a person: "Nov 21", or "Nov 21, 2026" with `year`, in the
 * viewer's locale. The day is UTC's wherever the viewer is (a usage day is a UTC day); the raw text when it is
 * not a date.
 */
export function formatDay(date: string, options: { year?: boolean } = {}): string {
  const ms = /^\d{4}-\d{2}-\d{2}$/.test(date) ? Date.parse(`${date}T00:00:00Z`) : Number.NaN;
  if (Number.isNaN(ms)) return date;
  return new Date(ms).toLocaleDateString(undefined, {
    month: "short",
    day: "numeric",
    ...(options.year ? { year: "numeric" } : {}),
    timeZone: "UTC",
  });
}

/** A count with its noun: "1 call", "6 calls", "1,204 calls". */
export function formatCount(count: number, noun: string): string {
  return `${count.toLocaleString("en-US")} ${noun}${count === 1 ? "" : "s"}`;
}

/** A "last used" column: "Never" rather than an empty cell. */
export function formatLastUsed(iso: string | null | undefined): string {
  return iso ? formatDateTime(iso) : "Never";
}

/** A message as a sentence: first letter a capital, so every message reads alike whoever wrote it. */
export function sentence(message: string): string {
  return message.charAt(0).toUpperCase() + message.slice(1);
}

/**
 * Parses a USD amount as typed ("5", "0.001", "10.50") into base units; undefined when it is
 * not a plain non-negative amount with at most `decimals` decimals.
 */
export function typedUsd(text: string, decimals = 6): bigint | undefined {
  const match = new RegExp(`^(\\d+)(?:\\.(\\d{1,${decimals}}))?$`).exec(text.trim());
  if (!match) return undefined;
  return BigInt(match[1]) * UNIT + BigInt((match[2] ?? "").padEnd(DECIMALS, "0"));
}
