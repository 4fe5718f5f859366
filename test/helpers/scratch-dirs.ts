// Scratch directories a test file makes as it goes and removes when it ends, so a run leaves nothing in the
// system's temporary directory.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

export interface ScratchDirs {
  /** A new empty directory under the system's temporary directory, named `prefix` and six random characters. */
  make(): string;
  /** Removes every directory `make` returned (and what is in them). */
  removeAll(): void;
}

export function scratchDirs(prefix: string): ScratchDirs {
  const made: string[] = [];
  return {
    make() {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
      made.push(dir);
      return dir;
    },
    removeAll() {
      for (const dir of made.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
