-- A key's metadata, as SQLite version 24 adds it (server/identity/schema.ts says why): a JSON object of at most 20
-- string entries its maker attaches to say what the key is for, checked before it is written
-- (server/identity/key-metadata.ts); NULL for none. Keys made before it have none.
ALTER TABLE api_keys ADD COLUMN metadata TEXT COLLATE "C";
