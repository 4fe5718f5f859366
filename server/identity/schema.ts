import type { SchemaStep } from "../db/migrations";

/**
 * Identity's tables: API keys, identities, sessions, SIWE nonces, e-mail sign-in links, the outbox, OAuth states.
 *
 * Each step belongs to one global schema version (server/schema.ts names the versions and applies them in order):
 * a step is never edited once it has shipped; a change is a step of a new version. Money columns are INTEGER base units.
 */
export const IDENTITY_SCHEMA: readonly SchemaStep[] = [
  {
    version: 1,
    sql: `
CREATE TABLE api_keys (
  id          TEXT PRIMARY KEY,
  account_id  TEXT NOT NULL REFERENCES accounts(id),
  name        TEXT NOT NULL DEFAULT '',
  prefix      TEXT NOT NULL,
  hash        TEXT NOT NULL UNIQUE,
  rate_limit_per_min INTEGER CHECK (rate_limit_per_min IS NULL OR rate_limit_per_min > 0),
  created_at  INTEGER NOT NULL,
  revoked_at  INTEGER
);
CREATE INDEX api_keys_by_account ON api_keys(account_id);
`,
  },
  {
    version: 7,
    sql: `
-- Who a person is to the outside world: a wallet (SIWE), an e-mail address, a GitHub or a
-- Google account. One account may have several; an identity belongs to one account.
CREATE TABLE identities (
  provider    TEXT NOT NULL CHECK (provider IN ('siwe', 'email', 'github', 'google')),
  subject     TEXT NOT NULL,
  account_id  TEXT NOT NULL REFERENCES accounts(id),
  created_at  INTEGER NOT NULL,
  PRIMARY KEY (provider, subject)
) WITHOUT ROWID;
CREATE INDEX identities_by_account ON identities(account_id);

-- Dashboard sessions. Only the SHA-256 of the session token is stored, like API keys.
CREATE TABLE sessions (
  token_hash  TEXT PRIMARY KEY,
  account_id  TEXT NOT NULL REFERENCES accounts(id),
  csrf_token  TEXT NOT NULL,
  created_at  INTEGER NOT NULL,
  expires_at  INTEGER NOT NULL,
  revoked_at  INTEGER
) WITHOUT ROWID;
CREATE INDEX sessions_by_account ON sessions(account_id);
`,
  },
  {
    version: 8,
    sql: `
-- Nonces the gateway issued for Sign-In With Ethereum (server/identity/siwe.ts). A nonce is
-- good once, until expires_at: verification sets used_at in the same statement that checks
-- it is unset and unexpired, so two requests cannot both use one.
CREATE TABLE siwe_nonces (
  nonce       TEXT PRIMARY KEY,
  created_at  INTEGER NOT NULL,
  expires_at  INTEGER NOT NULL,
  used_at     INTEGER
) WITHOUT ROWID;
CREATE INDEX siwe_nonces_by_expiry ON siwe_nonces(expires_at);

-- When a key last authenticated a request, to the minute (ApiKeys writes it at most once a
-- minute per key, in the background, never on the call path).
ALTER TABLE api_keys ADD COLUMN last_used_at INTEGER;
`,
  },
  {
    version: 9,
    sql: `
-- E-mail magic links (server/identity/email.ts). Only the SHA-256 of a link's token is
-- kept. Consuming sets used_at in the same statement that checks it is unset and
-- unexpired, so a link signs in once. link_to: the signed-in account that asked for it.
CREATE TABLE email_sign_in_tokens (
  token_hash  TEXT PRIMARY KEY,
  email       TEXT NOT NULL,
  link_to     TEXT REFERENCES accounts(id),
  created_at  INTEGER NOT NULL,
  expires_at  INTEGER NOT NULL,
  used_at     INTEGER
) WITHOUT ROWID;
CREATE INDEX email_sign_in_tokens_by_email ON email_sign_in_tokens(email, created_at);

-- The default mailer's outbox: every message the gateway would have sent, for a developer
-- to read when no SMTP server is configured.
CREATE TABLE outbox (
  id          INTEGER PRIMARY KEY,
  to_address  TEXT NOT NULL,
  subject     TEXT NOT NULL,
  body        TEXT NOT NULL,
  created_at  INTEGER NOT NULL
);

-- Started GitHub/Google sign-ins (server/identity/oauth.ts): the state's SHA-256, the PKCE
-- verifier and OIDC nonce that go with it, good once until expires_at.
CREATE TABLE oauth_states (
  state_hash     TEXT PRIMARY KEY,
  provider       TEXT NOT NULL CHECK (provider IN ('github', 'google')),
  code_verifier  TEXT NOT NULL,
  nonce          TEXT NOT NULL,
  link_to        TEXT REFERENCES accounts(id),
  created_at     INTEGER NOT NULL,
  expires_at     INTEGER NOT NULL,
  used_at        INTEGER
) WITHOUT ROWID;
`,
  },
  {
    version: 14,
    sql: `
-- Anyone may ask for a SIWE nonce, so what one client address holds is bounded
-- (server/identity/siwe.ts): each nonce keeps the rate-limit key of the address that asked
-- (an IPv4 address, or an IPv6 /64), for the 10 minutes it lives. NULL for older rows.
ALTER TABLE siwe_nonces ADD COLUMN client TEXT;
CREATE INDEX siwe_nonces_by_client ON siwe_nonces(client, created_at);

-- The periodic prune (server/index.ts) deletes by expiry; these make it, and the counts of
-- what is outstanding, range scans rather than table scans.
CREATE INDEX email_sign_in_tokens_by_expiry ON email_sign_in_tokens(expires_at);
CREATE INDEX oauth_states_by_expiry ON oauth_states(expires_at);
CREATE INDEX sessions_by_expiry ON sessions(expires_at);
CREATE INDEX sessions_revoked ON sessions(revoked_at) WHERE revoked_at IS NOT NULL;
`,
  },
  {
    version: 23,
    sql: `
-- What each key may do (server/identity/scopes.ts): its scopes, space-separated from the closed vocabulary
-- calls, usage:read, funds:withdraw, keys:manage; the skills it may call (a JSON array of slugs or UUIDs, NULL for
-- every skill); and when it stops authenticating (epoch ms, NULL for never). A key made from now on states its
-- scopes (the least, 'calls', unless its maker asks for more); the keys made before scopes existed could call
-- skills, read the account's usage, history and balance, and withdraw: they keep exactly those three, and no more
-- (keys:manage is new, and none of them had it).
ALTER TABLE api_keys ADD COLUMN scopes TEXT NOT NULL DEFAULT 'calls' CHECK (scopes <> '');
ALTER TABLE api_keys ADD COLUMN allowed_skills TEXT;
ALTER TABLE api_keys ADD COLUMN expires_at INTEGER;
UPDATE api_keys SET scopes = 'calls usage:read funds:withdraw';
`,
  },
  {
    version: 24,
    sql: `
-- A key's metadata (server/identity/key-metadata.ts): a small map of strings its maker attaches to say what the key is
-- for (which agent, which end user), shown with the key and in usage. A JSON object of at most 20 entries, checked
-- before it is written; NULL for none. Keys made before it have none.
ALTER TABLE api_keys ADD COLUMN metadata TEXT;
`,
  },
  {
    version: 25,
    sql: `
-- The gateway as an OAuth 2.1 authorization server for its hosted MCP endpoint (server/identity/mcp-oauth.ts), so that
-- remote MCP clients (claude.ai, ChatGPT, the MCP SDKs) can connect without an atom_ key pasted into them.
-- Clients register themselves (RFC 7591) and are public clients: PKCE protects their codes, and no client secret is
-- issued, so none is stored. A grant is an API key: consenting makes a calls-only key with the limits the person
-- chose, and every code and token of the grant names that key (revoking the key ends them all).
-- Every secret (request id, code, token) is stored as its SHA-256 only.
CREATE TABLE mcp_oauth_clients (
  client_id   TEXT PRIMARY KEY,
  metadata    TEXT NOT NULL,
  created_at  INTEGER NOT NULL
) WITHOUT ROWID;

-- An authorization request waiting for the person's consent on the dashboard (/connect).
CREATE TABLE mcp_oauth_requests (
  id_hash         TEXT PRIMARY KEY,
  client_id       TEXT NOT NULL REFERENCES mcp_oauth_clients(client_id) ON DELETE CASCADE,
  redirect_uri    TEXT NOT NULL,
  code_challenge  TEXT NOT NULL,
  state           TEXT,
  resource        TEXT NOT NULL,
  created_at      INTEGER NOT NULL,
  expires_at      INTEGER NOT NULL,
  used_at         INTEGER
) WITHOUT ROWID;
CREATE INDEX mcp_oauth_requests_by_expiry ON mcp_oauth_requests(expires_at);

CREATE TABLE mcp_oauth_codes (
  code_hash       TEXT PRIMARY KEY,
  client_id       TEXT NOT NULL REFERENCES mcp_oauth_clients(client_id) ON DELETE CASCADE,
  api_key_id      TEXT NOT NULL REFERENCES api_keys(id),
  redirect_uri    TEXT NOT NULL,
  code_challenge  TEXT NOT NULL,
  resource        TEXT NOT NULL,
  created_at      INTEGER NOT NULL,
  expires_at      INTEGER NOT NULL,
  used_at         INTEGER
) WITHOUT ROWID;
CREATE INDEX mcp_oauth_codes_by_expiry ON mcp_oauth_codes(expires_at);

-- Access tokens (short-lived) and refresh tokens (rotated: a used one is kept, used_at set, until it expires, so
-- that a second use is recognised as a replay and ends the grant).
CREATE TABLE mcp_oauth_tokens (
  token_hash  TEXT PRIMARY KEY,
  kind        TEXT NOT NULL CHECK (kind IN ('access', 'refresh')),
  client_id   TEXT NOT NULL REFERENCES mcp_oauth_clients(client_id) ON DELETE CASCADE,
  api_key_id  TEXT NOT NULL REFERENCES api_keys(id),
  resource    TEXT NOT NULL,
  created_at  INTEGER NOT NULL,
  expires_at  INTEGER NOT NULL,
  used_at     INTEGER
) WITHOUT ROWID;
CREATE INDEX mcp_oauth_tokens_by_key ON mcp_oauth_tokens(api_key_id);
CREATE INDEX mcp_oauth_tokens_by_expiry ON mcp_oauth_tokens(expires_at);
`,
  },
  {
    version: 30,
    sql: `
-- The prune's "holds nothing" check and the cascade of a client's deletion find its requests, codes and tokens by it.
CREATE INDEX mcp_oauth_requests_by_client ON mcp_oauth_requests(client_id);
CREATE INDEX mcp_oauth_codes_by_client ON mcp_oauth_codes(client_id);
CREATE INDEX mcp_oauth_tokens_by_client ON mcp_oauth_tokens(client_id);
`,
  },
];
