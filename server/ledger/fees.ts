/** `included`: the caller pays the listed price, the fee comes out of it. `on_top`: the caller pays price + fee. */
export type FeeMode = "included" | "on_top";

export interface Charge {
  /** What the caller pays. */
  chargedMicros: bigint;
  /** What the seller earns. */
  sellerMicros: bigint;
  /** What the platform earns. */
  feeMicros: bigint;
}

/**
 * Splits one call's price. The fee is rounded down, so the seller never loses to rounding,
 * and seller + fee always equals exactly what the caller is charged.
 *
 * - `included`: the caller pays the listed price; the platform keeps feeBps of it.
 * - `on_top`: the seller receives the listed price; the caller pays price + feeBps of it.
 */
export function computeCharge(priceMicros: bigint, feeMode: FeeMode, feeBps: bigint): Charge {
  if (priceMicros < 0n) throw new RangeError(`negative price: ${priceMicros}`);
  if (feeBps < 0n || feeBps > 10_000n) throw new RangeError(`fee out of range: ${feeBps} bps`);
  const feeMicros = (priceMicros * feeBps) / 10_000n;
  if (feeMode === "included") {
    return { chargedMicros: priceMicros, sellerMicros: priceMicros - feeMicros, feeMicros };
  }
  return { chargedMicros: priceMicros + feeMicros, sellerMicros: priceMicros, feeMicros };
}
