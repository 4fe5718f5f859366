import fs from "node:fs";
import path from "node:path";
import Database from "better-sqlite3";
import { migrate } from "./migrations";

export type Db = Database.Database;

/**
 * Opens (creating if needed) the ledger database with the settings money needs: WAL so
 * readers never block the writer, synchronous=FULL so a committed charge survives a power
 * cut, foreign keys on, and every INTEGER read back as a bigint so no amount ever passes
 * through a float.
 */
export function openDatabase(file: string): Db {
  if (file !== ":memory:") fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
  const db = new Database(file);
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = FULL");
  db.pragma("foreign_keys = ON");
  db.pragma("busy_timeout = 5000");
  // Keep the working set in memory: 64 MiB of page cache, temporary tables in RAM.
  db.pragma("cache_size = -65536");
  db.pragma("temp_store = MEMORY");
  db.defaultSafeIntegers(true);
  migrate(db);
  return db;
}
