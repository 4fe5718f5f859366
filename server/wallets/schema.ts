import type { SchemaStep } from "../db/migrations";

/**
 * The embedded wallets' table.
 *
 * Each step belongs to one global schema version (server/schema.ts names the versions and applies them in order):
 * a step is never edited once it has shipped; a change is a step of a new version. Money columns are INTEGER base units.
 */
export const WALLETS_SCHEMA: readonly SchemaStep[] = [
  {
    version: 10,
    sql: `
-- Each account's embedded wallet: an ERC-4337 SimpleAccount (EntryPoint v0.7) at a counterfactual address,
-- where the user sends USDC and the gateway moves it into the escrow (server/wallets/sweep.ts). The owner
-- is the user's own wallet for SIWE accounts ('siwe': no key here) or a key the server generated ('server'),
-- stored only encrypted: AES-256-GCM under WALLET_ENCRYPTION_KEY, bound to the account and the address.
-- Addresses lowercase, like account_addresses.
CREATE TABLE embedded_wallets (
  account_id           TEXT PRIMARY KEY REFERENCES accounts(id),
  address              TEXT NOT NULL UNIQUE,
  owner_kind           TEXT NOT NULL CHECK (owner_kind IN ('siwe', 'server')),
  owner_address        TEXT NOT NULL,
  encrypted_owner_key  BLOB,
  created_at           INTEGER NOT NULL,
  CHECK ((owner_kind = 'server') = (encrypted_owner_key IS NOT NULL))
) WITHOUT ROWID;
`,
  },
];
