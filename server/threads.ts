/**
 * Worker threads that run the gateway's own TypeScript. The gateway runs from its sources (ts-node, transpiling
 * only), and a thread started on a `.ts` file through ts-node loads TypeScript's compiler and transpiles its modules
 * again: about a second before it can work. Instead the thread's entry and what it imports are bundled once per
 * process with esbuild (already a dependency), in about 150 ms, and each thread evaluates that one script: about
 * 100 ms to start. The bundle is built from the files on disk when first asked for, so a thread runs the same code as
 * the process that starts it; packages stay outside it and are loaded by the thread as the process loads them.
 *
 * Imports nothing of server/ (any layer may use it).
 */
import { Worker, type WorkerOptions } from "node:worker_threads";

const bundles = new Map<string, Promise<string>>();

/** The script a thread evaluates for the TypeScript file `entry` (an absolute path), built once per process. */
export function threadScript(entry: string): Promise<string> {
  let script = bundles.get(entry);
  if (!script) {
    script = bundle(entry);
    // A failed build is not kept: the next thread tries again (and reports its own failure).
    script.catch(() => bundles.delete(entry));
    bundles.set(entry, script);
  }
  return script;
}

/** Starts a thread running the TypeScript file `entry` (an absolute path) with `options` (not `eval`). */
export async function startThread(entry: string, options: Omit<WorkerOptions, "eval"> = {}): Promise<Worker> {
  return new Worker(await threadScript(entry), { ...options, eval: true });
}

async function bundle(entry: string): Promise<string> {
  // Loaded when a thread is first wanted: most processes (the CLI, scripts) never start one.
  const esbuild = await import("esbuild");
  const result = await esbuild.build({
    entryPoints: [entry],
    bundle: true,
    platform: "node",
    format: "cjs",
    target: `node${process.versions.node.split(".")[0]}`,
    // Packages (better-sqlite3's native module among them) are required at run time, not copied in.
    packages: "external",
    write: false,
    logLevel: "silent",
  });
  const code = result.outputFiles[0]!.text;
  // An evaluated script's `require` resolves from the process's working directory; the bundle's requires must
  // resolve from where its entry is, as they would in the file itself.
  const requireFrom = `require("node:module").createRequire(${JSON.stringify(entry)})`;
  // Named after its entry in stack traces (instead of "[worker eval]").
  return `"use strict";\n(function (require) {\n${code}\n})(${requireFrom});\n//# sourceURL=${entry}.bundle.js\n`;
}
