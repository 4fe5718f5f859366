import { type ChildProcess, spawn } from "node:child_process";
import path from "node:path";
import { TS_REGISTER } from "../../server/devstack/child-process";
import type { CrashChildOptions, CrashChildReady } from "./crash-child";

/** A running ./crash-child.ts: where it listens, its buyer's key, what its startup recovered. */
export interface CrashChild extends CrashChildReady {
  child: ChildProcess;
  /** Kills the process with SIGKILL (no chance to flush, close or answer) and resolves once it is gone. */
  kill(): Promise<void>;
  /** Asks the process to close cleanly (SIGTERM) and resolves once it is gone. */
  stop(): Promise<void>;
}

/** Starts ./crash-child.ts on `options` and resolves once it serves (its ready line printed). */
export function startCrashChild(options: CrashChildOptions): Promise<CrashChild> {
  const child = spawn(process.execPath, ["-r", TS_REGISTER, path.join(__dirname, "crash-child.ts"), JSON.stringify(options)], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  const gone = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const end = async (signal: NodeJS.Signals) => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    await gone;
  };
  return new Promise((resolve, reject) => {
    let out = "";
    const onExit = (code: number | null, signal: string | null) =>
      reject(new Error(`crash child exited before it served (code ${code}, signal ${signal})`));
    child.once("exit", onExit);
    child.stdout!.on("data", (chunk: Buffer) => {
      if (out.includes("\n")) return;
      out += chunk.toString();
      if (!out.includes("\n")) return;
      child.off("exit", onExit);
      const ready = JSON.parse(out.split("\n")[0]) as CrashChildReady;
      resolve({ ...ready, child, kill: () => end("SIGKILL"), stop: () => end("SIGTERM") });
    });
  });
}
