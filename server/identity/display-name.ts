import type { Refusal } from "../errors";
import { type TextRule, checkText } from "../text";

/**
 * An account's display name: how the marketplace names it as the seller of its skills. The account sets it
 * (PATCH /v1/account); until then the marketplace shows its payout address, shortened. It is kept apart from
 * the account's `name`, which records how it signed up (an e-mail address, an OAuth login, a wallet address)
 * and is never shown to strangers.
 */

/** The longest display name, in characters (code points). */
export const DISPLAY_NAME_MAX_CHARS = 60;

/** A display name is a name under the text policy (../text.ts): one line, 1 to 60 characters, nothing hidden. */
export const DISPLAY_NAME_RULE: TextRule = { field: "display_name", minChars: 1, maxChars: DISPLAY_NAME_MAX_CHARS, kind: "name" };

export type DisplayNameCheck = { ok: true; name: string } | Refusal<"invalid_request">;

/** Normalizes a proposed display name and checks it against the text policy. */
export function checkDisplayName(raw: string): DisplayNameCheck {
  const checked = checkText(raw, DISPLAY_NAME_RULE);
  return checked.ok ? { ok: true, name: checked.text } : checked;
}
