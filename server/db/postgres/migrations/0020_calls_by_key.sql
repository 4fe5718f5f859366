-- Usage narrowed to one key pages through that key's calls: SQLite version 32 (server/gateway/schema.ts says why).
CREATE INDEX calls_by_key ON calls(api_key_id, account_id, created_at);
