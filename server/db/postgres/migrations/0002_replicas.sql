-- Several gateway replicas share this database (issue 14; server/db/postgres/replicas.ts).
--
-- A hold names the replica whose call took it (SQLite version 16 adds the same column), so a hold left open by
-- a replica that died is released by the settlement leader, and never one whose replica still lives.
ALTER TABLE holds ADD COLUMN replica_id TEXT COLLATE "C";

-- Each running replica: when it joined, when it last said it was alive (the database's clock, in ms since the
-- epoch, so replicas whose clocks disagree still agree on who is alive), and whether it shares its limits and
-- caches through Redis (a second replica without Redis is refused: its limits would be per replica).
CREATE TABLE gateway_replicas (
  id           TEXT COLLATE "C" PRIMARY KEY,
  started_at   BIGINT NOT NULL,
  heartbeat_at BIGINT NOT NULL,
  redis        BIGINT NOT NULL CHECK (redis IN (0, 1))
);
