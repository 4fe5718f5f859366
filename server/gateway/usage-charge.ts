import type { Skill } from "../catalog/skills";
import { type Charge, type FeeMode, computeCharge } from "../ledger/fees";
import { usdDisplay } from "../ledger/money";
import type { ReportedCharge } from "./forward";
import { parseCharge, verifyCharge } from "./signature";

/** What a usage-priced call came to: its charge split per the fee mode, or why the backend's report cannot be used. */
export type UsageCharge = { ok: true; charge: Charge } | { ok: false; problem: string };

/**
 * Reads what a usage-priced skill's call came to from its backend's 2xx (issue 27): X-Skill-Charge, a USD amount of
 * at most 6 decimals, at most the skill's max_price (`priceMicros`), signed in X-Skill-Charge-Signature with the
 * skill's signing secret over `<call id>.<charge>` (./signature.ts signCharge). The amount is the skill's price for
 * this call: it is split (or has the fee added on top) as a fixed price is, so the fee split applies to what was used.
 *
 * Checked in this order, the first failure named: the header is there, it is signed, it is a well-formed amount, the
 * signature holds, the amount is within max_price. A problem says what was wrong and never what the answer held.
 */
export function readUsageCharge(
  skill: Pick<Skill, "priceMicros" | "signingSecret">,
  callId: string,
  reported: ReportedCharge | undefined,
  fees: { feeMode: FeeMode; feeBps: bigint },
): UsageCharge {
  const charge = reported?.charge;
  const signature = reported?.signature;
  if (charge === undefined) return { ok: false, problem: "the backend reported no X-Skill-Charge" };
  if (signature === undefined) return { ok: false, problem: "X-Skill-Charge is not signed (no X-Skill-Charge-Signature)" };
  const micros = parseCharge(charge);
  if (micros === undefined) return { ok: false, problem: "X-Skill-Charge is not a USD amount with at most 6 decimals" };
  if (!verifyCharge(skill.signingSecret, callId, charge, signature)) {
    return { ok: false, problem: "X-Skill-Charge-Signature does not match the charge and the call" };
  }
  if (micros > skill.priceMicros) {
    return {
      ok: false,
      problem: `X-Skill-Charge of ${usdDisplay(micros)} is above the skill's max_price of ${usdDisplay(skill.priceMicros)}`,
    };
  }
  return { ok: true, charge: computeCharge(micros, fees.feeMode, fees.feeBps) };
}
