import type { Sql } from "../db/sql";
import { type Refusal, refusal } from "../errors";

/**
 * An account's display name: how the marketplace names it as the seller of its skills. The account sets it
 * (PATCH /v1/account); until then the marketplace shows its payout address, shortened. It is kept apart from
 * the account's `name`, which records how it signed up (an e-mail address, an OAuth login, a wallet address)
 * and is never shown to strangers.
 */

/** The longest display name, in characters (code points). */
export const DISPLAY_NAME_MAX_CHARS = 60;

/**
 * Characters a display name may not hold: control characters (C0, DEL, C1), and the invisible format
 * characters that reorder or hide text (bidirectional overrides and isolates, zero-width characters), which
 * would let a name read differently from what it is.
 */
const FORBIDDEN = /[\p{Cc}\u200B-\u200F\u202A-\u202E\u2060-\u2064\u2066-\u2069\uFEFF]/u;

export type DisplayNameCheck = { ok: true; name: string } | Refusal<"invalid_request">;

/** Trims a proposed display name and checks it: 1 to 60 characters, none of them a control or hidden one. */
export function checkDisplayName(raw: string): DisplayNameCheck {
  const name = raw.trim();
  const chars = [...name].length;
  if (chars === 0 || chars > DISPLAY_NAME_MAX_CHARS)
    return refusal("invalid_request", `The display name must be 1 to ${DISPLAY_NAME_MAX_CHARS} characters, spaces around it not counted.`);
  if (FORBIDDEN.test(name)) return refusal("invalid_request", "The display name must not contain control or invisible characters.");
  return { ok: true, name };
}

/** The account's display name, or null when it has set none. */
export async function displayNameOf(db: Sql, accountId: string): Promise<string | null> {
  return (await db.value<string | null>("SELECT display_name FROM accounts WHERE id = ?", [accountId])) ?? null;
}

/** Sets (or, with null, removes) the account's display name; the caller checked it with `checkDisplayName`. */
export async function setDisplayName(db: Sql, accountId: string, name: string | null): Promise<void> {
  await db.run("UPDATE accounts SET display_name = ? WHERE id = ?", [name, accountId]);
}
