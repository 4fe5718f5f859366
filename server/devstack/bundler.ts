/**
 * The real ERC-4337 bundler, Pimlico's Alto (`@pimlico/alto`), run as a child process against a chain's HTTP
 * RPC. Alto cannot use Hardhat's in-process network, so the chain is a `hardhat node` (server/devstack/local-node.ts)
 * or a real RPC. What it needs, learned the hard way (docs/design.md §9):
 * - `--safe-mode false`: Hardhat rejects the JS tracer the ERC-7562 checks use;
 * - the deterministic deployer on chain before it starts (it deploys its simulation contract through it);
 * - executor and utility keys holding ETH: with an empty or wrong key, bundles retry forever and nothing says so,
 *   so `startBundler` checks the balances first.
 * The binary is started from node_modules/.bin, not through npx, so the child is the process to stop.
 */
import type { ChildProcess } from "node:child_process";
import { spawnGuarded, unrefChild } from "./child-process";
import { PortTakenError, onFreePort } from "./local-node";
import path from "node:path";
import { createPublicClient, http, type Address, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { ENTRY_POINT_V07 } from "../wallets/aa";
import { DETERMINISTIC_DEPLOYER } from "./aa-deploy";

// Internal error, plain on purpose: the local development stack's, never a client's answer.
export class BundlerError extends Error {
  override name = "BundlerError";
}

export type StartBundlerParameters = {
  /** The chain's HTTP JSON-RPC. */
  rpcUrl: string;
  /** Keys that send the bundles (0x + 64 hex). Each must hold ETH. Never logged. */
  executorPrivateKeys: readonly Hex[];
  /** Key of Alto's utility wallet. Must hold ETH. Never logged. */
  utilityPrivateKey: Hex;
  entryPoint?: Address;
  /** 0 (default) picks a free port. */
  port?: number;
  /** How a port is found when none is given (a test's, to hand out a taken one): freePort by default. */
  choosePort?: () => Promise<number>;
  readyTimeoutMs?: number;
  /** Alto's log level; `warn` by default. */
  logLevel?: "trace" | "debug" | "info" | "warn" | "error" | "fatal";
  /** Receives Alto's output lines (its last 8 kB are also kept for error messages). */
  onOutput?: (line: string) => void;
};

export interface Bundler {
  /** The bundler's JSON-RPC endpoint (a viem bundler client's transport URL). */
  url: string;
  pid: number;
  /** Alto's recent output, for diagnostics. */
  output(): string;
  /** Stops Alto and waits for it to exit. Safe to call twice. */
  stop(): Promise<void>;
  /** Lets this process exit while Alto runs (Alto then goes with it: ./child-guard.cjs). */
  unref(): void;
}

/** One JSON-RPC request to the bundler at `url` (2 s at most); its result, or an error carrying its message. */
export async function rpc(url: string, method: string, params: unknown[] = []): Promise<unknown> {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
    signal: AbortSignal.timeout(2_000),
  });
  const body = (await response.json()) as { result?: unknown; error?: { message?: string } };
  if (body.error) throw new Error(body.error.message ?? JSON.stringify(body.error));
  return body.result;
}

/**
 * Starts Alto against `rpcUrl` and resolves once it answers `eth_supportedEntryPoints` with the EntryPoint.
 * Refuses to start (BundlerError) when the chain lacks the deterministic deployer or the EntryPoint, or a key
 * holds no ETH.
 */
export async function startBundler(parameters: StartBundlerParameters): Promise<Bundler> {
  const entryPoint = parameters.entryPoint ?? ENTRY_POINT_V07;
  if (parameters.executorPrivateKeys.length === 0) throw new BundlerError("the bundler needs at least one executor key");
  const client = createPublicClient({ transport: http(parameters.rpcUrl, { retryCount: 0 }) });
  for (const [what, address] of [
    ["deterministic deployer", DETERMINISTIC_DEPLOYER],
    ["EntryPoint", entryPoint],
  ] as const) {
    const code = await client.getCode({ address });
    if (!code || code === "0x") throw new BundlerError(`no ${what} at ${address} on ${parameters.rpcUrl}; deploy it first`);
  }
  const keys = [...parameters.executorPrivateKeys, parameters.utilityPrivateKey];
  for (const [i, key] of keys.entries()) {
    if (!/^0x[0-9a-fA-F]{64}$/.test(key)) throw new BundlerError(`bundler key #${i} is not 0x followed by 64 hex digits`);
    const { address } = privateKeyToAccount(key);
    const role = i < parameters.executorPrivateKeys.length ? "executor" : "utility";
    if ((await client.getBalance({ address })) === 0n) throw new BundlerError(`the bundler's ${role} account ${address} holds no ETH`);
  }

  // A free port found here can be taken by another process before Alto binds it: another one is tried then.
  return onFreePort(parameters.port, parameters.choosePort, (port) => startAltoOn(port, entryPoint, parameters));
}

/** What the child guard writes once a server of Alto's listens (SKILL_GATEWAY_ANNOUNCE_LISTEN, ./child-guard.cjs). */
const LISTENING = "child-guard: listening on ";

async function startAltoOn(port: number, entryPoint: Address, parameters: StartBundlerParameters): Promise<Bundler> {
  const root = path.resolve(__dirname, "../..");
  const args = [
    "--entrypoints",
    entryPoint,
    "--rpc-url",
    parameters.rpcUrl,
    "--safe-mode",
    "false",
    "--port",
    String(port),
    "--log-level",
    parameters.logLevel ?? "warn",
    "--utility-wallet-monitor",
    "false",
    "--refilling-wallets",
    "false",
  ];
  // The keys reach Alto through its ALTO_* environment variables (yargs `.env("ALTO")`), not the command
  // line, so no process listing shows them; other ALTO_* settings of this process are not passed on.
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("ALTO_")));
  // Guarded: it dies with this process, even one killed with SIGKILL, and listens on 127.0.0.1
  // although Alto itself binds 0.0.0.0 (./child-process.ts).
  const child: ChildProcess = spawnGuarded(path.join(root, "node_modules/.bin/alto"), args, {
    cwd: root,
    stdio: ["ignore", "pipe", "pipe"],
    env: {
      ...env,
      // The guard says when Alto listens (./child-guard.cjs): until then an answer on the port may be another process's.
      SKILL_GATEWAY_ANNOUNCE_LISTEN: "1",
      ALTO_EXECUTOR_PRIVATE_KEYS: parameters.executorPrivateKeys.join(","),
      ALTO_UTILITY_PRIVATE_KEY: parameters.utilityPrivateKey,
    },
  });
  let output = "";
  let listening = false;
  const announced = `${LISTENING}127.0.0.1:${port}\n`;
  const onData = (chunk: Buffer) => {
    const text = chunk.toString();
    output = (output + text).slice(-8_000);
    listening ||= output.includes(announced);
    if (parameters.onOutput) for (const line of text.split("\n")) if (line.trim() && !line.startsWith(LISTENING)) parameters.onOutput(line);
  };
  child.stdout!.on("data", onData);
  child.stderr!.on("data", onData);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const stop = async () => {
    // An unref'd Alto is waited for all the same: this process stays until it has gone.
    child.ref();
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
    await exited;
    clearTimeout(timer);
  };

  const url = `http://127.0.0.1:${port}/rpc`;
  const deadline = Date.now() + (parameters.readyTimeoutMs ?? 30_000);
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      const message = `alto exited with ${child.exitCode ?? child.signalCode} before answering:\n${output}`;
      throw output.includes("EADDRINUSE") ? new PortTakenError(message) : new BundlerError(message);
    }
    try {
      if (!listening) throw new Error("not listening yet");
      const supported = (await rpc(url, "eth_supportedEntryPoints")) as string[];
      if (!supported.some((address) => address.toLowerCase() === entryPoint.toLowerCase())) {
        await stop();
        throw new BundlerError(`alto answered without the EntryPoint ${entryPoint}: ${supported.join(", ")}`);
      }
      break;
    } catch (error) {
      if (error instanceof BundlerError) throw error;
      if (Date.now() > deadline) {
        await stop();
        throw new BundlerError(`alto did not answer on ${url} in time:\n${output}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
  return { url, pid: child.pid!, output: () => output, stop, unref: () => unrefChild(child) };
}
