import fs from "node:fs";
import path from "node:path";
import Database from "better-sqlite3";
import { type Migration, migrate } from "./migrations";

export type Db = Database.Database;

/**
 * Opens (creating if needed) the ledger database with the settings money needs: WAL so
 * readers never block the writer, synchronous=FULL so a committed charge survives a power
 * cut (the gateway's group commit lowers it to NORMAL and syncs the log itself, off the event loop:
 * ./group-commit.ts), foreign keys on, recursive triggers on (so a REPLACE cannot bypass the journal's
 * DELETE triggers), and every INTEGER read back as a bigint so no amount ever passes
 * through a float. Then applies whichever of `migrations` (the gateway's are server/schema.ts's SCHEMA) it has
 * not applied yet.
 */
export function openDatabase(file: string, migrations: readonly Migration[]): Db {
  if (file !== ":memory:") fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
  const db = new Database(file);
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = FULL");
  db.pragma("foreign_keys = ON");
  // An INSERT OR REPLACE deletes the row it replaces, and SQLite fires DELETE triggers for that only
  // with recursive triggers on: without them, the append-only journal (migration 13) could be
  // rewritten by a REPLACE. No trigger of the schema fires another, so nothing else changes.
  db.pragma("recursive_triggers = ON");
  db.pragma("busy_timeout = 5000");
  // Keep the working set in memory: 64 MiB of page cache, temporary tables in RAM.
  db.pragma("cache_size = -65536");
  db.pragma("temp_store = MEMORY");
  db.defaultSafeIntegers(true);
  migrate(db, migrations);
  return db;
}
