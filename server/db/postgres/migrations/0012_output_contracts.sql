-- A skill's output contract (issue 27), as SQLite version 26 adds it: the JSON Schema its 2xx answers promise to
-- match, as the JSON text it was listed with. An answer that breaks it is a 502 skill_bad_output, not charged.
ALTER TABLE skills ADD COLUMN output_schema TEXT COLLATE "C";

-- The calls whose answer broke it, with the first problem found for the skill's seller: the place in the seller's own
-- schema and the keyword that failed, never anything of the answer (the buyer's data). Written in the transaction
-- that records the call.
CREATE TABLE call_output_failures (
  call_id     TEXT COLLATE "C" PRIMARY KEY,
  skill_id    TEXT COLLATE "C" NOT NULL,
  endpoint    TEXT COLLATE "C" NOT NULL,
  problem     TEXT COLLATE "C" NOT NULL,
  created_at  BIGINT NOT NULL
);
CREATE INDEX call_output_failures_by_skill ON call_output_failures(skill_id, created_at);
