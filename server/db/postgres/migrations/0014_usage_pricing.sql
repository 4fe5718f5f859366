-- How a skill is priced (issue 27), as SQLite version 28 adds it: 'fixed', every call costs price_micros; 'usage', the
-- backend reports what each call came to in a signed X-Skill-Charge header, at most price_micros (its max_price), which
-- is what a call holds.
ALTER TABLE skills ADD COLUMN pricing TEXT COLLATE "C" NOT NULL DEFAULT 'fixed' CHECK (pricing IN ('fixed', 'usage'));
