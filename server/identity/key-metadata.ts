import { type TextRule, checkText } from "../text";

/**
 * A key's metadata: a small map of strings its maker attaches to it, to say what the key is for (which agent, which
 * end user, which deployment). The gateway never acts on it; it shows it wherever the key is shown: GET /v1/keys, the
 * usage listing and its CSV, the dashboard. It is bounded so that it stays a label, not a store:
 * - at most MAX_METADATA_ENTRIES entries;
 * - each name 1 to MAX_METADATA_NAME_CHARS characters of letters, digits and `_ . : -`, starting with a letter or a
 *   digit (so no name is `__proto__`, and every name is safe in a CSV cell, a URL or a log line);
 * - each value a string of at most MAX_METADATA_VALUE_CHARS characters under the text policy of names (../text.ts:
 *   NFC, trimmed, no control or invisible characters, one line); "" is a value.
 */

export type KeyMetadata = Record<string, string>;

export const MAX_METADATA_ENTRIES = 20;
export const MAX_METADATA_NAME_CHARS = 40;
export const MAX_METADATA_VALUE_CHARS = 500;

const NAME = new RegExp(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,${MAX_METADATA_NAME_CHARS - 1}}$`);

/** The one-line rule of the whole map, for messages and the OpenAPI document. */
export const METADATA_RULE =
  `metadata must be an object of at most ${MAX_METADATA_ENTRIES} entries, each name 1 to ${MAX_METADATA_NAME_CHARS} letters, digits, ` +
  `"_", ".", ":" or "-" (starting with a letter or a digit), each value a string of at most ${MAX_METADATA_VALUE_CHARS} characters; null or {} for none.`;

/** The metadata as the gateway keeps it, or the message of the first thing wrong with it. */
export type CheckMetadataReturnType = { ok: true; metadata: KeyMetadata } | { ok: false; message: string };

/**
 * Checks a value sent as a key's metadata: a plain object within the bounds above, each value normalized by the text
 * policy. The message names the entry that is wrong (by its name, cut short when it is too long to be one).
 */
export function checkMetadata(value: unknown): CheckMetadataReturnType {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return { ok: false, message: METADATA_RULE };
  const entries = Object.entries(value);
  if (entries.length > MAX_METADATA_ENTRIES)
    return { ok: false, message: `metadata has ${entries.length} entries; at most ${MAX_METADATA_ENTRIES}.` };
  const out: [string, string][] = [];
  for (const [name, raw] of entries) {
    if (!NAME.test(name))
      return {
        ok: false,
        message: `metadata: the name ${JSON.stringify(name.slice(0, MAX_METADATA_NAME_CHARS + 1))} is not 1 to ${MAX_METADATA_NAME_CHARS} letters, digits, "_", ".", ":" or "-" starting with a letter or a digit.`,
      };
    if (typeof raw !== "string") return { ok: false, message: `metadata.${name} must be a string.` };
    const rule: TextRule = { field: `metadata.${name}`, minChars: 0, maxChars: MAX_METADATA_VALUE_CHARS, kind: "name" };
    const checked = checkText(raw, rule);
    if (!checked.ok) return { ok: false, message: checked.message };
    out.push([name, checked.text]);
  }
  // fromEntries defines each name as an own property, whatever it is: nothing reaches a prototype.
  return { ok: true, metadata: Object.fromEntries(out) };
}

/** As stored in api_keys.metadata: NULL for none, else the JSON object. */
export function metadataText(metadata: KeyMetadata): string | null {
  return Object.keys(metadata).length === 0 ? null : JSON.stringify(metadata);
}

/** Read from api_keys.metadata (NULL: none). */
export function parseMetadata(text: string | null): KeyMetadata {
  if (text === null) return {};
  const value = JSON.parse(text) as unknown;
  return typeof value === "object" && value !== null && !Array.isArray(value)
    ? Object.fromEntries(Object.entries(value).filter((entry): entry is [string, string] => typeof entry[1] === "string"))
    : {};
}
