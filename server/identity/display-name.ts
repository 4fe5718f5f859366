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
 * Characters a display name may not hold: control characters (C0, DEL, C1), every format character (bidirectional
 * marks, overrides and isolates, zero-width characters, soft hyphens, tags), line and paragraph separators,
 * unassigned and private-use code points, and the fillers and selectors that show as nothing, which would let a
 * name read differently from what it is. (A run of five or more combining marks is refused too.)
 */
// Each listed code point is refused on its own (the class is meant to hold the Hangul fillers as separate code points).
// eslint-disable-next-line no-misleading-character-class
const FORBIDDEN = /[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}\u034F\u115F\u1160\u3164\uFFA0\u2800\uFE00-\uFE0F]/u;
/** A name must show something: at least one letter, digit, symbol or punctuation mark. */
const VISIBLE = /[\p{L}\p{N}\p{S}\p{P}]/u;

export type DisplayNameCheck = { ok: true; name: string } | Refusal<"invalid_request">;

/** Trims a proposed display name and checks it: 1 to 60 characters, none of them a control or hidden one. */
export function checkDisplayName(raw: string): DisplayNameCheck {
  const name = raw.normalize("NFC").trim();
  const chars = [...name].length;
  if (chars === 0 || chars > DISPLAY_NAME_MAX_CHARS)
    return refusal("invalid_request", `The display name must be 1 to ${DISPLAY_NAME_MAX_CHARS} characters, spaces around it not counted.`);
  if (FORBIDDEN.test(name) || !VISIBLE.test(name) || /\p{M}{5,}/u.test(name))
    return refusal("invalid_request", "The display name must not contain control or invisible characters.");
  return { ok: true, name };
}
