import type { ChildProcess } from "node:child_process";
import path from "node:path";
import { TS_REGISTER, spawnGuarded } from "./child-process";

/**
 * `npm run serve` (server/main.ts) as a child process: for the tests of serve itself, and for the replicas of
 * `npm run start:cluster` (scripts/start-cluster.ts) and of the cluster tests. A child dies with its parent
 * (./child-guard.cjs), so a killed test or cluster leaves no replica behind.
 */

const ROOT = path.join(__dirname, "../..");

/**
 * The environment of a `npm run serve` child: only what is given, on top of PATH and HOME, so a setting
 * of the shell that runs the tests cannot leak into it.
 */
function serveEnv(settings: Record<string, string>): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH, HOME: process.env.HOME, ...settings };
}

/**
 * server/main.ts as `npm run serve` runs it (ts-node, transpile only: TS_REGISTER, which caches the output),
 * without npm's own output around it.
 */
function spawnServe(settings: Record<string, string>): ChildProcess {
  return spawnGuarded(path.join(ROOT, "server/main.ts"), [], {
    cwd: ROOT,
    env: { ...serveEnv(settings), NODE_OPTIONS: `--require ${JSON.stringify(TS_REGISTER)}` },
    stdio: ["ignore", "pipe", "pipe"],
  });
}

/** How a run that was expected to end ended. */
export interface ServeExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Runs `npm run serve` until it exits by itself; kills it (and fails) if it is still running after `timeoutMs`. */
export function runServeToExit(settings: Record<string, string>, timeoutMs = 30_000): Promise<ServeExit> {
  const child = spawnServe(settings);
  let stdout = "";
  let stderr = "";
  child.stdout!.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`npm run serve was still running after ${timeoutMs} ms:\n${stdout}${stderr}`));
    }, timeoutMs);
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/** A running `npm run serve`. */
export interface ServeProcess {
  /** The gateway's URL, from its start-up summary. */
  url: string;
  child: ChildProcess;
  /** Everything it printed so far. */
  output(): string;
  /** Sends `signal` and resolves with how it exited; SIGKILLs it after `timeoutMs` and rejects. */
  stop(signal?: NodeJS.Signals, timeoutMs?: number): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Starts `npm run serve` and resolves once it prints the gateway's URL; kills it if that takes over `timeoutMs`. */
export function startServe(settings: Record<string, string>, timeoutMs = 60_000): Promise<ServeProcess> {
  const child = spawnServe(settings);
  let output = "";
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  const stop: ServeProcess["stop"] = async (signal = "SIGTERM", stopTimeoutMs = 20_000) => {
    if (child.exitCode !== null || child.signalCode !== null) return exited;
    child.kill(signal);
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        child.kill("SIGKILL");
        reject(new Error(`npm run serve did not exit within ${stopTimeoutMs} ms of ${signal}:\n${output}`));
      }, stopTimeoutMs);
    });
    try {
      return await Promise.race([exited, late]);
    } finally {
      clearTimeout(timer);
    }
  };
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`npm run serve did not start within ${timeoutMs} ms:\n${output}`));
    }, timeoutMs);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const url = /^Gateway: +(http:\/\/\S+)$/m.exec(output)?.[1];
      if (url) {
        clearTimeout(timer);
        resolve({ url, child, output: () => output, stop });
      }
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()));
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`npm run serve exited (${code ?? signal}) before it started:\n${output}`));
    });
  });
}
