import { type ChildProcess, spawn } from "node:child_process";
import path from "node:path";
import { TS_REGISTER } from "./child-process";

const ROOT = path.join(__dirname, "../..");

/** The last line of `npm start`'s banner: everything is up once it is printed. */
export const READY_LINE = "Press Ctrl-C to stop.";

/**
 * `npm start`'s script (scripts/start-local.ts) as a child process, as npm start runs it (ts-node, transpile only:
 * TS_REGISTER, which caches the output): on free ports (the gateway's and the chain's), a fresh database at `dbPath`
 * with its deployment file beside it, and `env` over this process's environment. Resolves with the child and what it
 * printed, stdout and stderr, up to its banner's last line (later output is left to the caller's own listeners);
 * rejects if it exits first. For the tests of npm start (test/e2e/start-local.test.ts) and `npm run bench:start`.
 */
export function startLocalProcess(
  dbPath: string,
  env: NodeJS.ProcessEnv = {},
  /** Node's own options for the process (a benchmark's --cpu-prof). */
  nodeOptions: readonly string[] = [],
): Promise<{ child: ChildProcess; output: string }> {
  const child = spawn(process.execPath, [...nodeOptions, "-r", TS_REGISTER, path.join(ROOT, "scripts/start-local.ts")], {
    cwd: ROOT,
    env: {
      ...process.env,
      PORT: "0",
      CHAIN_PORT: "0",
      DB_PATH: dbPath,
      DEPLOYMENT_FILE: path.join(path.dirname(dbPath), "deployment.json"),
      CHAIN_RPC_URL: "",
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  return new Promise((resolve, reject) => {
    let output = "";
    let ready = false;
    const read = (chunk: Buffer) => {
      // Until the banner, keep what it prints; afterwards a long run's log is not kept here.
      if (ready) return;
      output += chunk.toString();
      if (!output.includes(READY_LINE)) return;
      ready = true;
      resolve({ child, output });
    };
    child.stdout!.on("data", read);
    child.stderr!.on("data", read);
    child.once("exit", (code) => {
      if (!ready) reject(new Error(`npm start exited with ${code} before it was ready:\n${output}`));
    });
  });
}
