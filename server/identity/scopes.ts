/**
 * What an API key may do: its scopes, from a closed vocabulary. A dashboard session may do everything; a key only
 * what its scopes name (docs/keys.md has the table of which operation needs which). The HTTP contract declares the
 * scope each operation needs (server/http/contract/common.ts), and the key-auth middleware enforces it from there.
 */
export const KEY_SCOPES = ["calls", "usage:read", "funds:withdraw", "keys:manage"] as const;

export type KeyScope = (typeof KEY_SCOPES)[number];

/** What each scope allows, in a line (docs/keys.md, the OpenAPI document). */
export const SCOPE_MEANING: Record<KeyScope, string> = {
  calls: "call skills; read this key's own calls",
  "usage:read": "read the account's usage, history, balance and earnings",
  "funds:withdraw": "make and list withdrawal vouchers",
  "keys:manage": "manage the account's keys (the provisioning API); never call skills",
};

/** A new key's scopes unless its maker asks for others: the least. */
export const DEFAULT_SCOPES: readonly KeyScope[] = ["calls"];

/**
 * The scopes a key made before scopes existed holds (schema version 23, PostgreSQL migration 0009): exactly what such a
 * key could do, namely call skills, read the account's books, and make withdrawal vouchers. Never keys:manage.
 */
export const LEGACY_SCOPES: readonly KeyScope[] = ["calls", "usage:read", "funds:withdraw"];

export function isKeyScope(value: unknown): value is KeyScope {
  return typeof value === "string" && (KEY_SCOPES as readonly string[]).includes(value);
}

/** Scopes as stored: space-separated (as OAuth writes a scope), in the vocabulary's order. */
export function scopesText(scopes: readonly KeyScope[]): string {
  return KEY_SCOPES.filter((scope) => scopes.includes(scope)).join(" ");
}

/**
 * Scopes read from the table. A word outside the vocabulary (written by a newer gateway) grants nothing here: a scope
 * this code does not know it cannot enforce, so it is dropped rather than guessed at.
 */
export function parseScopes(text: string): KeyScope[] {
  const words = new Set(text.split(" "));
  return KEY_SCOPES.filter((scope) => words.has(scope));
}

/** The most skills a key's allowed_skills may name. */
export const MAX_ALLOWED_SKILLS = 100;

/** The furthest a key's expires_at may be from its creation: 366 days (a key without one never expires). */
export const MAX_KEY_LIFETIME_MS = 366 * 86_400_000;

/** Whether a key with `expiresAtMs` has expired at `nowMs`: at its expiry exactly, it has. */
export function isExpired(key: { expiresAtMs: number | null }, nowMs: number): boolean {
  return key.expiresAtMs !== null && nowMs >= key.expiresAtMs;
}

/** Whether a key with `allowedSkills` (null: every skill) may call the skill with this id and slug. */
export function allowsSkill(key: { allowedSkills: readonly string[] | null }, skill: { id: string; slug: string }): boolean {
  if (key.allowedSkills === null) return true;
  return key.allowedSkills.some((ref) => ref === skill.slug || ref.toLowerCase() === skill.id);
}
