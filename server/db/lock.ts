import fs from "node:fs";
import path from "node:path";

// Internal error, plain on purpose: a start-up refusal for the operator, never a client's answer.
export class DatabaseLockedError extends Error {
  override name = "DatabaseLockedError";
}

/**
 * Makes sure one gateway process at a time owns a ledger file. Startup releases every hold
 * it finds open, which is right after a crash and wrong while another gateway is serving
 * calls from the same file, so a second gateway must refuse to start. The lock is a file
 * beside the database holding the owner's pid; a lock left by a process that no longer
 * exists (a crash, kill -9) is taken over. Scripts that only add keys or skills do not lock.
 */
export function lockDatabase(dbPath: string): () => void {
  if (dbPath === ":memory:") return () => {};
  const lockPath = `${dbPath}.lock`;
  fs.mkdirSync(path.dirname(path.resolve(lockPath)), { recursive: true });
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      fs.writeFileSync(lockPath, String(process.pid), { flag: "wx" });
      return () => {
        try {
          if (fs.readFileSync(lockPath, "utf8") === String(process.pid)) fs.unlinkSync(lockPath);
        } catch {
          // Already gone: nothing to release.
        }
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      const owner = Number(fs.readFileSync(lockPath, "utf8"));
      if (Number.isInteger(owner) && owner > 0 && owner !== process.pid && isAlive(owner)) {
        throw new DatabaseLockedError(`${dbPath} is in use by another gateway (pid ${owner}); stop it first, or set DB_PATH`);
      }
      // A stale lock (its process is gone) or our own from a gateway that was not closed.
      fs.unlinkSync(lockPath);
    }
  }
  throw new DatabaseLockedError(`could not lock ${dbPath}`);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}
