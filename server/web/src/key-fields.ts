/**
 * What the API Keys page's fields hold, as text a person types, to and from what the API takes (docs/keys.md): a
 * key's metadata as `name=value` lines, its allowed skills as a list of slugs, its expiry as a UTC day. Pure: the page
 * (pages/key-access.ts) reads and fills its inputs through these, and test/web/key-fields.test.ts holds them.
 */

/** The scopes a key may hold, in the API's order, each with what it lets the key do. */
export const SCOPE_CHOICES = [
  { scope: "calls", label: "Call skills", hint: "and read its own calls" },
  { scope: "usage:read", label: "Read usage", hint: "the account's calls, history, balance" },
  { scope: "funds:withdraw", label: "Withdraw", hint: "make withdrawal vouchers" },
  { scope: "keys:manage", label: "Manage keys", hint: "make and change keys from code; never calls" },
] as const;

/** A key's metadata as the textarea shows it: one `name=value` per line, in the map's order. */
export function metadataLines(metadata: Record<string, string>): string {
  return Object.entries(metadata)
    .map(([name, value]) => `${name}=${value}`)
    .join("\n");
}

/**
 * The metadata typed as `name=value` lines (blank lines skipped; the name and value trimmed; the value may hold "="),
 * or the problem with the first line that has no "=" or no name. The gateway checks the rest (names, lengths, count).
 */
export function parseMetadataLines(text: string): { ok: true; metadata: Record<string, string> } | { ok: false; problem: string } {
  const entries: [string, string][] = [];
  for (const [index, line] of text.split(/\r?\n/).entries()) {
    if (line.trim() === "") continue;
    const at = line.indexOf("=");
    const name = at < 0 ? "" : line.slice(0, at).trim();
    if (name === "")
      return { ok: false, problem: `Metadata line ${index + 1}: write each entry as name=value (e.g. agent=researcher-7), one per line.` };
    if (entries.some(([seen]) => seen === name)) return { ok: false, problem: `Metadata line ${index + 1}: "${name}" is given twice.` };
    entries.push([name, line.slice(at + 1).trim()]);
  }
  return { ok: true, metadata: Object.fromEntries(entries) };
}

/** The metadata in one line for a list or a table cell: `agent=researcher-7 · end_user=u_42`; "" when there is none. */
export function metadataSummary(metadata: Record<string, string> | null | undefined): string {
  return Object.entries(metadata ?? {})
    .map(([name, value]) => `${name}=${value}`)
    .join(" · ");
}

/** Allowed skills as typed: slugs or ids separated by commas or spaces; null (every skill) when there are none. */
export function parseSkillList(text: string): string[] | null {
  const refs = text.split(/[\s,]+/).filter((ref) => ref !== "");
  return refs.length === 0 ? null : refs;
}

/** Allowed skills as the input shows them: "echo, weather-now"; "" for every skill. */
export function skillListText(skills: readonly string[] | null): string {
  return skills === null ? "" : skills.join(", ");
}

const DAY_MS = 86_400_000;

/**
 * The expires_at for a day picked in a date input ("2026-12-31"): the end of that UTC day, the next day's 00:00 UTC;
 * null for no day (never expires). Undefined for text that is not a day.
 */
export function expiryOfDay(day: string): string | null | undefined {
  if (day === "") return null;
  if (!/^\d{4}-\d{2}-\d{2}$/.test(day)) return undefined;
  const startMs = Date.parse(`${day}T00:00:00Z`);
  return Number.isNaN(startMs) ? undefined : new Date(startMs + DAY_MS).toISOString();
}

/** The day a date input shows for a key's expires_at: the UTC day its last working moment is in; "" for never. */
export function dayOfExpiry(expiresAt: string | null): string {
  if (expiresAt === null) return "";
  return new Date(Date.parse(expiresAt) - 1).toISOString().slice(0, 10);
}
