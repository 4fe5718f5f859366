/**
 * Money is integer USDC base units (6 decimals, so one unit is one micro-dollar) everywhere
 * inside the system. These two functions are the only doors to and from human amounts.
 */

export const USDC_DECIMALS = 6;
const UNIT = 10n ** BigInt(USDC_DECIMALS);

/** Converts base units to a USD number for a JSON response; exact for any amount below 2^53 units. */
export function microsToUsd(micros: bigint): number {
  const sign = micros < 0n ? "-" : "";
  const abs = micros < 0n ? -micros : micros;
  const whole = abs / UNIT;
  const frac = (abs % UNIT).toString().padStart(USDC_DECIMALS, "0");
  return Number(`${sign}${whole}.${frac}`);
}

/** A USD amount for a sentence: at least 2 decimals, more when it has them ("5.00", "0.001", "1.234567"). */
export function usdText(micros: bigint): string {
  const sign = micros < 0n ? "-" : "";
  const abs = micros < 0n ? -micros : micros;
  let frac = (abs % UNIT).toString().padStart(USDC_DECIMALS, "0");
  while (frac.length > 2 && frac.endsWith("0")) frac = frac.slice(0, -1);
  return `${sign}${abs / UNIT}.${frac}`;
}

/**
 * A USD amount for a person to read, the one money format of the gateway's messages and the dashboard:
 * a dollar sign, thousands separators, at least 2 decimals and up to 6 when the amount has them
 * ("$5.00", "$0.50", "$0.001", "$1,234.567891", "-$2.50"). server/web/src/format.ts writes the same.
 */
export function usdDisplay(micros: bigint): string {
  const text = usdText(micros);
  const negative = text.startsWith("-");
  const [whole, frac] = (negative ? text.slice(1) : text).split(".");
  return `${negative ? "-" : ""}$${whole.replace(/\B(?=(\d{3})+(?!\d))/g, ",")}.${frac}`;
}

/** Parses a decimal USD string ("0.001", "10") into base units; rejects more than 6 decimals. */
export function usdToMicros(usd: string): bigint {
  const match = /^(\d+)(?:\.(\d{1,6}))?$/.exec(usd.trim());
  if (!match) throw new RangeError(`not a USD amount with at most ${USDC_DECIMALS} decimals: "${usd}"`);
  const frac = (match[2] ?? "").padEnd(USDC_DECIMALS, "0");
  return BigInt(match[1]) * UNIT + BigInt(frac);
}
