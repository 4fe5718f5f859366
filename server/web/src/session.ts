/**
 * Who is signed in, as far as the page knows: the answer of GET /v1/me, refreshed after
 * anything that moves money, and mirrored in the header (balance pill, Sign in / Sign out).
 * The session cookie itself is httpOnly, so asking the API is the only way to know.
 */

import { ApiFailure, get } from "./api";
import { h } from "./dom";
import { formatBaseUnits, formatUsd, parseBaseUnits, usdToBaseUnits } from "./format";
import type { Me } from "./types";

let current: Me | null = null;

/**
 * Below this the balance pill warns: $1.00, the smallest top-up (the escrow's minimum deposit). A fixed dollar
 * figure rather than "the price of a typical call": prices run from $0.001 to $0.50, and a balance below a dollar
 * is a few calls from empty at the dearer end.
 */
export const LOW_BALANCE_UNITS = 1_000_000n;

/** Whether the available balance is below LOW_BALANCE_UNITS. */
function isLow(account: Me): boolean {
  const { available, available_base_units } = account.balance;
  const units = available_base_units !== undefined ? parseBaseUnits(available_base_units) : usdToBaseUnits(available);
  return units !== undefined && units < LOW_BALANCE_UNITS;
}

/** The signed-in account as last loaded, or null. */
export function me(): Me | null {
  return current;
}

/**
 * Reloads /v1/me. A 401 means signed out; any other failure keeps what was known, so a
 * gateway hiccup does not look like a sign-out.
 */
export async function refreshMe(): Promise<Me | null> {
  try {
    current = await get<Me>("/v1/me");
  } catch (error) {
    if (error instanceof ApiFailure && (error.status === 401 || error.status === 403)) current = null;
    else if (!(error instanceof ApiFailure)) throw error;
  }
  renderHeader();
  return current;
}

/** Forgets the session (after sign-out). */
export function forget(): void {
  current = null;
  renderHeader();
}

/** Updates the header's balance pill and the Sign in link / Sign out button. */
function renderHeader(): void {
  const pill = document.getElementById("balance-pill");
  const signIn = document.getElementById("nav-signin");
  const signOut = document.getElementById("nav-signout");
  if (pill) {
    pill.hidden = current === null;
    pill.dataset.testid = "balance-pill";
    const low = current !== null && isLow(current);
    pill.classList.toggle("pill-low", low);
    pill.replaceChildren(current ? `${formatUsd(current.balance.available, current.balance.available_base_units)} USDC` : "");
    if (low) pill.append(" · ", h("a", { href: "/wallet", class: "pill-action", testid: "low-balance" }, "Low: top up"));
    pill.title = current
      ? low
        ? `Low balance: below ${formatBaseUnits(LOW_BALANCE_UNITS)}. Top up on the Wallet page.`
        : "Available balance"
      : "";
  }
  if (signIn) signIn.hidden = current !== null;
  if (signOut) signOut.hidden = current === null;
}
