-- What each key may do, as SQLite version 23 adds it (server/identity/schema.ts says why): its scopes, space-separated
-- from the closed vocabulary of server/identity/scopes.ts; the skills it may call (a JSON array, NULL for every
-- skill); when it stops authenticating (epoch ms, NULL for never). Keys made before scopes existed keep exactly what
-- they could do: calls, usage:read and funds:withdraw; a key made from now on states its own (the least by default).
ALTER TABLE api_keys ADD COLUMN scopes TEXT COLLATE "C" NOT NULL DEFAULT 'calls' CHECK (scopes <> '');
ALTER TABLE api_keys ADD COLUMN allowed_skills TEXT COLLATE "C";
ALTER TABLE api_keys ADD COLUMN expires_at BIGINT;
UPDATE api_keys SET scopes = 'calls usage:read funds:withdraw';
