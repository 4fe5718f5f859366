-- Whether the operator registered the skill and its backend URL (npm run register-skill, the demo seed), as SQLite
-- version 21 adds it: 1 or 0, as `active` is. Only the operator's skills may reach an origin of
-- SKILL_BACKEND_ALLOWLIST (server/gateway/egress.ts); a seller's listing, or its edit of the backend URL, is 0.
-- Skills stored before this migration are 0 until the operator registers them again.
ALTER TABLE skills ADD COLUMN operator_listed BIGINT NOT NULL DEFAULT 0;
