/**
 * Calldata the browser wallet sends, written out by hand: the dashboard needs two fixed calls,
 * not an ABI library (test/web/calldata.test.ts checks them against viem). Pure: no DOM.
 */
/** SkillEscrow.claim() and claimTo(recipient) calldata: a fixed selector, and one address word. */
export function escrowClaimData(to?: string): string {
  if (to === undefined) return "0x4e71d92d";
  if (!/^0x[0-9a-fA-F]{40}$/.test(to)) throw new Error("The address to send to must be 0x and 40 hex digits.");
  return `0xa262f5f8${"0".repeat(24)}${to.slice(2).toLowerCase()}`;
}
