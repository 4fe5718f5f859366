/**
 * Who is signed in, as far as the page knows: the answer of GET /v1/me, refreshed after
 * anything that moves money, and mirrored in the header (balance pill, Sign in / Sign out).
 * The session cookie itself is httpOnly, so asking the API is the only way to know.
 */

import { ApiFailure, get } from "./api";
import { formatUsd } from "./format";
import type { Me } from "./types";

let current: Me | null = null;

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
    pill.textContent = current ? `${formatUsd(current.balance.available, current.balance.available_base_units)} USDC` : "";
    pill.title = current ? "Available balance" : "";
  }
  if (signIn) signIn.hidden = current !== null;
  if (signOut) signOut.hidden = current === null;
}
