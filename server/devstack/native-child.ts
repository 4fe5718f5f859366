import type { ChildProcess, SpawnOptions } from "node:child_process";
import { spawnSync } from "node:child_process";
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

/** The absolute path of `name` on the PATH, or undefined when it is not installed. */
export function findBinary(name: string): string | undefined {
  const found = spawnSync("sh", ["-c", 'command -v -- "$1"', "sh", name], { encoding: "utf8" });
  const binary = found.status === 0 ? found.stdout.trim() : "";
  return binary.startsWith("/") ? binary : undefined;
}
