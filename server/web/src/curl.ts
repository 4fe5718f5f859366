/**
 * Example `curl` commands for a skill's two call endpoints (docs/api.md §3). Pure: the
 * skill page shows them, and the unit tests pin them. The key is always the `$ATOM_KEY`
 * placeholder: a real key never appears in a page someone might screenshot.
 */

export const KEY_PLACEHOLDER = "$ATOM_KEY";

/** Quotes a string for a POSIX shell: single quotes, with each inner ' closed and escaped. */
export function shellQuote(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}

const command = (url: string, body: unknown) =>
  [
    `curl -X POST ${shellQuote(url)}`,
    `  -H "Authorization: Bearer ${KEY_PLACEHOLDER}"`,
    `  -H 'Content-Type: application/json'`,
    `  -d ${shellQuote(JSON.stringify(body))}`,
  ].join(" \\\n");

/** `POST /v1/call` with `{skill_id, input}` in the body. */
export function curlForCall(origin: string, slug: string, input: unknown): string {
  return command(`${origin.replace(/\/+$/, "")}/v1/call`, { skill_id: slug, input });
}

/** `POST /v1/skills/:skillId/call`, whose body is the input itself (no wrapper). */
export function curlForSkillCall(origin: string, slug: string, input: unknown): string {
  return command(`${origin.replace(/\/+$/, "")}/v1/skills/${encodeURIComponent(slug)}/call`, input);
}
