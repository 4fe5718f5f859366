-- The gateway as an OAuth 2.1 authorization server for its hosted MCP endpoint, as SQLite version 25 adds it
-- (server/identity/schema.ts says why): registered clients, authorization requests waiting for consent, codes and
-- tokens, every secret stored as its SHA-256 only; a grant is an API key (api_key_id).
CREATE TABLE mcp_oauth_clients (
  client_id   TEXT COLLATE "C" PRIMARY KEY,
  metadata    TEXT COLLATE "C" NOT NULL,
  created_at  BIGINT NOT NULL
);

CREATE TABLE mcp_oauth_requests (
  id_hash         TEXT COLLATE "C" PRIMARY KEY,
  client_id       TEXT COLLATE "C" NOT NULL REFERENCES mcp_oauth_clients(client_id) ON DELETE CASCADE,
  redirect_uri    TEXT COLLATE "C" NOT NULL,
  code_challenge  TEXT COLLATE "C" NOT NULL,
  state           TEXT COLLATE "C",
  resource        TEXT COLLATE "C" NOT NULL,
  created_at      BIGINT NOT NULL,
  expires_at      BIGINT NOT NULL,
  used_at         BIGINT
);
CREATE INDEX mcp_oauth_requests_by_expiry ON mcp_oauth_requests(expires_at);

CREATE TABLE mcp_oauth_codes (
  code_hash       TEXT COLLATE "C" PRIMARY KEY,
  client_id       TEXT COLLATE "C" NOT NULL REFERENCES mcp_oauth_clients(client_id) ON DELETE CASCADE,
  api_key_id      TEXT COLLATE "C" NOT NULL REFERENCES api_keys(id),
  redirect_uri    TEXT COLLATE "C" NOT NULL,
  code_challenge  TEXT COLLATE "C" NOT NULL,
  resource        TEXT COLLATE "C" NOT NULL,
  created_at      BIGINT NOT NULL,
  expires_at      BIGINT NOT NULL,
  used_at         BIGINT
);
CREATE INDEX mcp_oauth_codes_by_expiry ON mcp_oauth_codes(expires_at);

CREATE TABLE mcp_oauth_tokens (
  token_hash  TEXT COLLATE "C" PRIMARY KEY,
  kind        TEXT COLLATE "C" NOT NULL CHECK (kind IN ('access', 'refresh')),
  client_id   TEXT COLLATE "C" NOT NULL REFERENCES mcp_oauth_clients(client_id) ON DELETE CASCADE,
  api_key_id  TEXT COLLATE "C" NOT NULL REFERENCES api_keys(id),
  resource    TEXT COLLATE "C" NOT NULL,
  created_at  BIGINT NOT NULL,
  expires_at  BIGINT NOT NULL,
  used_at     BIGINT
);
CREATE INDEX mcp_oauth_tokens_by_key ON mcp_oauth_tokens(api_key_id);
CREATE INDEX mcp_oauth_tokens_by_expiry ON mcp_oauth_tokens(expires_at);
