import type { Sql } from "../db/sql";

/*
 * Where an account's display name is kept (accounts.display_name, schema version 19); ./display-name.ts checks
 * a name before it is set.
 */

/** The account's display name, or null when it has set none. */
export async function displayNameOf(db: Sql, accountId: string): Promise<string | null> {
  return (await db.value<string | null>("SELECT display_name FROM accounts WHERE id = ?", [accountId])) ?? null;
}

/** Sets (or, with null, removes) the account's display name; the caller checked it with `checkDisplayName`. */
export async function setDisplayName(db: Sql, accountId: string, name: string | null): Promise<void> {
  await db.run("UPDATE accounts SET display_name = ? WHERE id = ?", [name, accountId]);
}
