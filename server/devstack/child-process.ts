import { type ChildProcess, type SpawnOptions, spawn } from "node:child_process";
import path from "node:path";

/** The preload that ties a child to its parent and keeps its servers on loopback (./child-guard.cjs). */
export const CHILD_GUARD = path.join(__dirname, "child-guard.cjs");

/**
 * Spawns a Node.js program (a package's bin script) as a child of this process that exits
 * when this process exits, however it exits (SIGKILL included), and whose servers listen on
 * 127.0.0.1 only. The program runs in this Node.js binary with the guard preloaded.
 */
export function spawnGuarded(script: string, args: readonly string[], options: SpawnOptions): ChildProcess {
  return spawn(process.execPath, ["--require", CHILD_GUARD, script, ...args], options);
}
