-- A seller's display name (issue 16; server/identity/display-name.ts), as SQLite version 19 adds it: what the
-- marketplace shows as a skill's seller, set by the account itself; NULL until set. Checked in code: 1 to 60
-- characters, trimmed, no control characters.
ALTER TABLE accounts ADD COLUMN display_name TEXT COLLATE "C";
