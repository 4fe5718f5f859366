-- The skills' quality roll-up (issue 27 §3), as SQLite version 29 adds it (server/gateway/schema.ts says why): every
-- skill's calls counted per UTC hour, result and latency bucket, with what they captured; only ever added to.
CREATE TABLE skill_quality (
  skill_id        TEXT COLLATE "C" NOT NULL,
  hour            BIGINT NOT NULL,
  result          TEXT COLLATE "C" NOT NULL,
  latency_bucket  BIGINT NOT NULL CHECK (latency_bucket >= 0),
  calls           BIGINT NOT NULL CHECK (calls > 0),
  charged_micros  BIGINT NOT NULL DEFAULT 0 CHECK (charged_micros >= 0),
  PRIMARY KEY (skill_id, hour, result, latency_bucket)
);
CREATE INDEX skill_quality_by_hour ON skill_quality(hour);
