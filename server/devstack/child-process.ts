import { type ChildProcess, type SpawnOptions, spawn } from "node:child_process";
import path from "node:path";

/** The preload that ties a child to its parent and keeps its servers on loopback (./child-guard.cjs). */
export const CHILD_GUARD = path.join(__dirname, "child-guard.cjs");

/**
 * The preload that runs TypeScript in a child: ts-node, transpile only, as `ts-node/register/transpile-only`,
 * with each file's output cached on disk (./ts-register.cjs), so a child does not compile again the files the
 * test process and the children before it compiled.
 */
export const TS_REGISTER = path.join(__dirname, "ts-register.cjs");

/**
 * Spawns a Node.js program (a package's bin script) as a child of this process that exits
 * when this process exits, however it exits (SIGKILL included), and whose servers listen on
 * 127.0.0.1 only. The program runs in this Node.js binary with the guard preloaded.
 */
export function spawnGuarded(script: string, args: readonly string[], options: SpawnOptions): ChildProcess {
  return spawn(process.execPath, ["--require", CHILD_GUARD, script, ...args], options);
}

/** A child process that no longer keeps this process alive: neither it nor its output pipes. */
export function unrefChild(child: ChildProcess): void {
  child.unref();
  for (const pipe of [child.stdout, child.stderr]) (pipe as { unref?: () => void } | null)?.unref?.();
}
