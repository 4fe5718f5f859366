import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { openDatabase } from "../../server/db/db";
import { SCHEMA } from "../../server/schema";

let template: string | undefined;

/**
 * Writes at `file` a SQLite database at the gateway's current schema, empty: what the gateway's first open makes, but
 * copied from one made once a process. Made by the gateway, a new file runs every migration in a transaction of its own,
 * each ending in an fsync (44 ms of a test's time and 24 ms of CPU, measured); a copy takes 2 ms. The gateway opening it
 * finds every migration applied, as it does on a restart.
 */
export function copyMigratedSqlite(file: string): void {
  if (template === undefined) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sg-sqlite-template-"));
    process.once("exit", () => fs.rmSync(dir, { recursive: true, force: true }));
    const made = path.join(dir, "template.db");
    const db = openDatabase(made, SCHEMA);
    // Everything into the main file: the copy is that file alone.
    db.pragma("wal_checkpoint(TRUNCATE)");
    db.close();
    template = made;
  }
  fs.copyFileSync(template, file);
}
