import { type Refusal, refusal } from "./errors";

/**
 * The one policy for text that people type and other people read: skill names and descriptions, display names,
 * key names. Such text reaches strangers (the marketplace, MCP tool lists, x402 discovery, CSV files) and the
 * database, so it is checked once, here, before anything is done with it.
 *
 * Text is put in Unicode's composed form (NFC), so that one name has one spelling, and trimmed. Refused anywhere:
 * control characters (Cc: NUL, which PostgreSQL cannot store, escape sequences, C1), format characters (Cf:
 * bidirectional overrides and isolates, which make "Ech\u202Eo" read as something else, zero-width characters, soft
 * hyphens, tags), lone surrogates (Cs), private-use (Co) and unassigned (Cn) code points, and the line and paragraph
 * separators (Zl, Zp). A line feed is allowed only in prose (a description), where it is the paragraph break. A pile of
 * five or more combining marks, which draws over the lines around it, is refused too.
 *
 * Names must identify what they name: besides the above, they must show at least one letter, digit, symbol or
 * punctuation mark, and they may not hold the fillers and selectors that render as nothing.
 *
 * Like config.ts and errors.ts, this file sits outside the layers: any part may import it, and it imports only
 * errors.ts.
 */

/** The character classes no user-supplied text may hold (the line feed of prose aside). */
const FORBIDDEN = /[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}]/u;
/** The same with the line feed allowed. */
const FORBIDDEN_IN_PROSE = /(?!\n)[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}]/u;
/** Fillers and variation selectors that show as nothing (the class holds the Hangul fillers as separate code points). */
// eslint-disable-next-line no-misleading-character-class
const BLANK = /[\u034F\u115F\u1160\u3164\uFFA0\u2800\uFE00-\uFE0F]/u;
/** Something a reader can see: a letter, digit, symbol or punctuation mark. */
const VISIBLE = /[\p{L}\p{N}\p{S}\p{P}]/u;
/** Combining marks stacked high enough to draw over the neighbouring lines. */
const MARK_PILE = /\p{M}{5,}/u;

/** How one field's text is checked. */
export interface TextRule {
  /** How messages name the field (the API's name for it, e.g. `description`). */
  field: string;
  /** Bounds, in characters (code points), once normalized and trimmed. */
  minChars: number;
  maxChars: number;
  /** `name`: one line that must show something and hide nothing; `prose`: line feeds allowed (CRLF is read as LF). */
  kind: "name" | "prose";
}

export type CheckTextReturnType = { ok: true; text: string } | Refusal<"invalid_request">;

/** Normalizes `raw` (NFC, trimmed; CRLF to LF in prose) and checks it against `rule`: the text to store, or why not. */
export function checkText(raw: string, rule: TextRule): CheckTextReturnType {
  const normalized = raw.normalize("NFC");
  const text = (rule.kind === "prose" ? normalized.replace(/\r\n?/g, "\n") : normalized).trim();
  const chars = [...text].length;
  if (chars < rule.minChars || chars > rule.maxChars) {
    const bounds = rule.minChars > 0 ? `${rule.minChars} to ${rule.maxChars}` : `at most ${rule.maxChars}`;
    return refusal("invalid_request", `${rule.field} must be ${bounds} characters, spaces around it not counted.`);
  }
  if (hasForbiddenCharacters(text, rule.kind === "prose") || MARK_PILE.test(text))
    return refusal(
      "invalid_request",
      `${rule.field} must not contain control or invisible characters (such as NUL, bidirectional overrides or zero-width characters)${
        rule.kind === "prose" ? "; line breaks are allowed" : ", nor line breaks"
      }.`,
    );
  if (rule.kind === "name" && text !== "" && (BLANK.test(text) || !VISIBLE.test(text)))
    return refusal("invalid_request", `${rule.field} must show something: letters, digits or symbols, without blank fillers.`);
  return { ok: true, text };
}

/** Whether `text` holds a character the policy refuses anywhere (a line feed allowed when `lines`). */
export function hasForbiddenCharacters(text: string, lines = false): boolean {
  return (lines ? FORBIDDEN_IN_PROSE : FORBIDDEN).test(text);
}

/**
 * At most `maxChars` characters of `text` as one paragraph: runs of white space (line feeds included) become one space,
 * refused characters (stored before this policy) become U+FFFD, and a cut shows as "…". For placing someone's text
 * where it must stay short and cannot lay itself out: a tool list an agent reads, a client's input quoted in a message.
 */
export function excerpt(text: string, maxChars: number): string {
  const flat = text.replace(/\s+/gu, " ").replace(new RegExp(FORBIDDEN.source, "gu"), "\uFFFD").trim();
  const chars = [...flat];
  return chars.length <= maxChars
    ? flat
    : `${chars
        .slice(0, maxChars - 1)
        .join("")
        .trimEnd()}…`;
}
