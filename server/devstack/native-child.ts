import type { ChildProcess, SpawnOptions } from "node:child_process";
import { accessSync, constants, statSync } from "node:fs";
import path from "node:path";
import { spawnGuarded } from "./child-process";

/** The Node.js process that stands between this one and a native program (./native-guard.cjs). */
const NATIVE_GUARD = path.join(__dirname, "native-guard.cjs");

/**
 * Spawns a native program (a server binary: redis-server, postgres) so that it exits when this
 * process exits, however it exits (SIGKILL included). A binary cannot preload ./child-guard.cjs
 * as a Node.js program does (./child-process.ts), so it runs under a small guarded Node.js
 * process that kills it on the way out, passes SIGTERM, SIGINT and SIGHUP on, and exits with
 * its exit code. Killing the returned child (SIGTERM) therefore stops the program.
 */
export function spawnNativeGuarded(binary: string, args: readonly string[], options: SpawnOptions): ChildProcess {
  return spawnGuarded(NATIVE_GUARD, [binary, ...args], options);
}

/** The absolute path of the program `name` on the PATH, or undefined when it is not installed. */
export function findBinary(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? "").split(path.delimiter)) {
    if (!path.isAbsolute(dir)) continue;
    const candidate = path.join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      if (statSync(candidate).isFile()) return candidate;
    } catch {
      // Not here: try the next directory.
    }
  }
  return undefined;
}
