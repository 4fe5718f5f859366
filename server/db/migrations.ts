import type Database from "better-sqlite3";

/**
 * A module's part of one schema version: the SQL its tables need at that version. Each module keeps its steps
 * beside its code (server/<module>/schema.ts); server/schema.ts gathers them into the ordered list of migrations
 * this file applies. A step is never edited once it has shipped; a change is a step of a new version.
 */
export interface SchemaStep {
  /** The global schema version this step belongs to: it runs in that version's transaction. */
  version: number;
  /** The schema change, run as one script inside the migration's transaction. */
  sql: string;
  /**
   * Set when the step rebuilds a table that other tables reference (SQLite changes a CHECK only by
   * copying the table): foreign keys are switched off around its transaction, as SQLite's documented
   * procedure for such changes asks, and `PRAGMA foreign_key_check` must come back empty before it commits.
   */
  rebuildsTables?: boolean;
  /** Runs before `sql`, in the same transaction: a check that refuses, with a clear message, data `sql` cannot convert. */
  before?: (db: Database.Database) => void;
}

/** One schema version, applied in one transaction and recorded in schema_migrations under its version and name. */
export interface Migration extends SchemaStep {
  name: string;
}

/**
 * Applies every migration of `migrations` (in ascending version order) the database has not seen yet, each in
 * its own transaction; returns how many it applied.
 */
export function migrate(db: Database.Database, migrations: readonly Migration[]): number {
  for (let i = 1; i < migrations.length; i++) {
    if (migrations[i].version <= migrations[i - 1].version)
      throw new Error(`migrations out of order: version ${migrations[i].version} after ${migrations[i - 1].version}`);
  }
  db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`);
  const applied = new Set(
    db
      .prepare("SELECT version FROM schema_migrations")
      .all()
      .map((r) => Number((r as { version: bigint }).version)),
  );
  let count = 0;
  for (const m of migrations) {
    if (applied.has(m.version)) continue;
    // PRAGMA foreign_keys is a no-op inside a transaction, so it is switched here, around it.
    const foreignKeys = db.pragma("foreign_keys", { simple: true });
    if (m.rebuildsTables) db.pragma("foreign_keys = OFF");
    try {
      db.transaction(() => {
        m.before?.(db);
        db.exec(m.sql);
        if (m.rebuildsTables) {
          const broken = db.pragma("foreign_key_check") as unknown[];
          if (broken.length > 0)
            throw new Error(
              `migration ${m.version} broke ${broken.length} foreign key(s): ${JSON.stringify(broken[0], (_k, x) => (typeof x === "bigint" ? x.toString() : x))}`,
            );
        }
        db.prepare("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)").run(m.version, m.name, Date.now());
      })();
    } finally {
      if (m.rebuildsTables) db.pragma(`foreign_keys = ${foreignKeys ? "ON" : "OFF"}`);
    }
    count++;
  }
  return count;
}
