-- An account's calls and spend per UTC day, key and skill: SQLite version 31 (server/gateway/schema.ts says why). As
-- the balances do (0016), a call's line adds to its day's row later, not in its own transaction: the trigger records a
-- pending delta (an INSERT, which locks nothing another call needs; one hot key's calls would otherwise take turns on its
-- day's row until each charge group commits), the reads add the pending deltas (usage_by_day), and usage_roll_up folds
-- them into the rows in short transactions of their own.
CREATE TABLE usage_days (
  account_id    TEXT COLLATE "C" NOT NULL,
  day           BIGINT NOT NULL,
  api_key_id    TEXT COLLATE "C" NOT NULL,
  skill_id      TEXT COLLATE "C" NOT NULL,
  calls         BIGINT NOT NULL CHECK (calls > 0),
  spend_micros  BIGINT NOT NULL CHECK (spend_micros >= 0),
  PRIMARY KEY (account_id, day, api_key_id, skill_id)
);

-- A call counted but not yet in its day's row: made only by calls_usage_days, deleted only by usage_roll_up in the
-- transaction that adds it to the row.
CREATE TABLE usage_day_deltas (
  call_id       TEXT COLLATE "C" PRIMARY KEY,
  account_id    TEXT COLLATE "C" NOT NULL,
  day           BIGINT NOT NULL,
  api_key_id    TEXT COLLATE "C" NOT NULL,
  skill_id      TEXT COLLATE "C" NOT NULL,
  spend_micros  BIGINT NOT NULL CHECK (spend_micros >= 0)
);
CREATE INDEX usage_day_deltas_by_account ON usage_day_deltas(account_id, day);

-- What the usage reads read, on both engines: the days folded in, and the calls not yet.
CREATE VIEW usage_by_day AS
SELECT account_id, day, api_key_id, skill_id, calls, spend_micros FROM usage_days
UNION ALL
SELECT account_id, day, api_key_id, skill_id, 1::BIGINT, spend_micros FROM usage_day_deltas;

CREATE FUNCTION calls_usage_days() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO usage_day_deltas (call_id, account_id, day, api_key_id, skill_id, spend_micros)
  VALUES (NEW.id, NEW.account_id, NEW.created_at / 86400000, NEW.api_key_id, NEW.skill_id, NEW.charged_micros);
  RETURN NULL;
END;
$$;
-- Made before the backfill below, in the migration's transaction: CREATE TRIGGER locks calls against writes until the
-- commit, so a call an older replica writes meanwhile is either in the backfill or waits and goes through the trigger.
CREATE TRIGGER calls_usage_days AFTER INSERT ON calls
FOR EACH ROW WHEN (NEW.outcome NOT IN ('rate_limited', 'daily_limit_reached'))
EXECUTE FUNCTION calls_usage_days();
CREATE TRIGGER calls_written_once BEFORE UPDATE ON calls
FOR EACH ROW EXECUTE FUNCTION refuse_change('a call''s line is written once');
CREATE TRIGGER calls_kept BEFORE DELETE ON calls
FOR EACH ROW EXECUTE FUNCTION refuse_change('a call''s line cannot be deleted');
CREATE TRIGGER calls_no_truncate BEFORE TRUNCATE ON calls
FOR EACH STATEMENT EXECUTE FUNCTION refuse_change('a call''s line cannot be deleted');
CREATE TRIGGER usage_days_grow BEFORE UPDATE ON usage_days
FOR EACH ROW WHEN (NOT (NEW.account_id = OLD.account_id AND NEW.day = OLD.day AND NEW.api_key_id = OLD.api_key_id
                        AND NEW.skill_id = OLD.skill_id AND NEW.calls > OLD.calls AND NEW.spend_micros >= OLD.spend_micros))
EXECUTE FUNCTION refuse_change('the usage days only grow, by the calls written');
CREATE TRIGGER usage_days_kept BEFORE DELETE ON usage_days
FOR EACH ROW EXECUTE FUNCTION refuse_change('the usage days cannot be deleted');
CREATE TRIGGER usage_days_no_truncate BEFORE TRUNCATE ON usage_days
FOR EACH STATEMENT EXECUTE FUNCTION refuse_change('the usage days cannot be deleted');
INSERT INTO usage_days (account_id, day, api_key_id, skill_id, calls, spend_micros)
SELECT account_id, created_at / 86400000, api_key_id, skill_id, COUNT(*), SUM(charged_micros) FROM calls
WHERE outcome NOT IN ('rate_limited', 'daily_limit_reached')
GROUP BY account_id, created_at / 86400000, api_key_id, skill_id;

-- Folds up to p_limit pending calls (oldest first: call ids are UUIDv7) into their days' rows, in one transaction: the
-- deltas deleted and the rows added to together, so usage_by_day reads the same before and after. p_async = 1 commits
-- without waiting for the WAL flush (a fold lost in a crash leaves its calls pending: the same usage); 0 inside a
-- caller's transaction (the copy from SQLite). One folder at a time (an advisory lock; a second answers 0 at once).
-- Returns how many calls it folded.
CREATE FUNCTION usage_roll_up(p_limit INTEGER, p_async INTEGER) RETURNS BIGINT LANGUAGE plpgsql AS $$
DECLARE
  v_ids TEXT[];
BEGIN
  IF p_async = 1 THEN
    PERFORM set_config('synchronous_commit', 'off', true);
  END IF;
  IF NOT pg_try_advisory_xact_lock(('x' || substr(encode(sha256('skill-gateway:usage-roll-up'::bytea), 'hex'), 1, 16))::bit(64)::BIGINT) THEN
    RETURN 0;
  END IF;
  v_ids := ARRAY(SELECT d.call_id FROM usage_day_deltas d ORDER BY d.call_id LIMIT p_limit);
  IF cardinality(v_ids) = 0 THEN
    RETURN 0;
  END IF;
  WITH taken AS (
    DELETE FROM usage_day_deltas d WHERE d.call_id = ANY (v_ids)
    RETURNING d.account_id, d.day, d.api_key_id, d.skill_id, d.spend_micros
  )
  INSERT INTO usage_days AS u (account_id, day, api_key_id, skill_id, calls, spend_micros)
  SELECT t.account_id, t.day, t.api_key_id, t.skill_id, COUNT(*), SUM(t.spend_micros)::BIGINT FROM taken t
  GROUP BY t.account_id, t.day, t.api_key_id, t.skill_id
  ON CONFLICT (account_id, day, api_key_id, skill_id) DO UPDATE SET
    calls = u.calls + EXCLUDED.calls, spend_micros = u.spend_micros + EXCLUDED.spend_micros;
  RETURN cardinality(v_ids);
END;
$$;
