import type { ChildProcess } from "node:child_process";
import net from "node:net";
import path from "node:path";
import { spawnGuarded, unrefChild } from "./child-process";
import {
  type Account,
  type Chain,
  type Hex,
  type HttpTransport,
  type PublicClient,
  type WalletClient,
  createPublicClient,
  createWalletClient,
  defineChain,
  http,
} from "viem";
import { mnemonicToAccount } from "viem/accounts";

/** The well-known development mnemonic `hardhat node` funds its accounts from. Local chain only. */
export const HARDHAT_MNEMONIC = "test test test test test test test test test test test junk";
/** Base's chain id: the local chain runs with it so the same code runs against Base. */
export const LOCAL_CHAIN_ID = 8453;

/** The roles the embedded default gives the node's funded development accounts. */
export const DEV_ACCOUNT_INDEX = {
  deployer: 0,
  settler: 1,
  voucherSigner: 2,
  demoBuyer: 3,
  demoSeller: 4,
  bundlerExecutor: 10,
  bundlerUtility: 11,
  /** Settles x402 payments (SETTLER_ROLE); a cluster's replica n uses x402Settler + n - 1 (X402_SETTLER_KEYS of them). */
  x402Settler: 12,
} as const;

/** How many development accounts from DEV_ACCOUNT_INDEX.x402Settler on the demo chain gives SETTLER_ROLE for x402. */
export const X402_SETTLER_KEYS = 4;

export function devAccount(index: number): Account {
  return mnemonicToAccount(HARDHAT_MNEMONIC, { addressIndex: index });
}

/** A development account's private key (the bundler takes keys, not accounts). Local chain only. */
export function devPrivateKey(index: number): Hex {
  const hd = mnemonicToAccount(HARDHAT_MNEMONIC, { addressIndex: index }).getHdKey();
  return `0x${Buffer.from(hd.privateKey!).toString("hex")}`;
}

export function localChain(rpcUrl: string, chainId = LOCAL_CHAIN_ID): Chain {
  return defineChain({
    id: chainId,
    name: "Local L2",
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
  });
}

export interface LocalNode {
  rpcUrl: string;
  chain: Chain;
  publicClient: PublicClient<HttpTransport, Chain>;
  walletFor(account: Account): WalletClient<HttpTransport, Chain, Account>;
  /** Stops the node process (and waits for it to exit). */
  stop(): Promise<void>;
  /** Lets this process exit while the node runs (the node then goes with it: ./child-guard.cjs). */
  unref(): void;
}

/** A TCP port free on 127.0.0.1 right now (for a child process that needs a port number up front). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** How many free ports a server is tried on before its start fails, when no port was asked for. */
const PORT_ATTEMPTS = 5;

/** A server could not bind its port: someone took it between freePort() and the server's bind. */
export class PortTakenError extends Error {}

/**
 * Starts a server of this machine's development stack on `port`, or, when none is asked for, on a free one
 * (`choosePort`, freePort by default): a free port can be taken by another process before a server that takes seconds
 * to start binds it, so while `start` throws PortTakenError another is tried, PORT_ATTEMPTS at most.
 */
export async function onFreePort<T>(
  port: number | undefined,
  choosePort: (() => Promise<number>) | undefined,
  start: (port: number) => Promise<T>,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await start(port || (await (choosePort ?? freePort)()));
    } catch (error) {
      if (!(error instanceof PortTakenError) || port || attempt >= PORT_ATTEMPTS) throw error;
    }
  }
}

/**
 * Starts a real `hardhat node` (the binary from node_modules/.bin, chain id 8453) as a
 * child process on `port` (a free one when 0) and resolves once it answers JSON-RPC. The
 * child is the node itself, not an npx wrapper, so stopping it stops the chain. A free port
 * found here can be taken by another process before the node (seconds to start) binds it:
 * another one is tried then.
 */
export async function startLocalNode(
  options: {
    port?: number;
    readyTimeoutMs?: number;
    /** Blocks mined within one second share its timestamp (hardhat.config.ts, SAME_SECOND_BLOCKS). */
    sameSecondBlocks?: boolean;
    /** How a port is found when none is given (a test's, to hand out a taken one): freePort by default. */
    choosePort?: () => Promise<number>;
  } = {},
): Promise<LocalNode> {
  return onFreePort(options.port, options.choosePort, (port) => startNodeOn(port, options));
}

async function startNodeOn(port: number, options: { readyTimeoutMs?: number; sameSecondBlocks?: boolean }): Promise<LocalNode> {
  const root = path.resolve(__dirname, "../..");
  // Guarded: it dies with this process, even one killed with SIGKILL (./child-process.ts).
  const child: ChildProcess = spawnGuarded(
    path.join(root, "node_modules/.bin/hardhat"),
    ["node", "--hostname", "127.0.0.1", "--port", String(port)],
    {
      cwd: root,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, FORK_URL: "", SAME_SECOND_BLOCKS: options.sameSecondBlocks ? "1" : "" },
    },
  );
  let output = "";
  // What the node prints once it listens (hardhat's builtin-tasks/node): until then an answer on the port may be
  // another process's, one that took the port first.
  let listening = false;
  const started = `JSON-RPC server at http://127.0.0.1:${port}/`;
  const keep = (c: Buffer) => {
    output = (output + c.toString()).slice(-4_000);
    listening ||= output.includes(started);
  };
  child.stdout!.on("data", keep);
  child.stderr!.on("data", keep);
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));

  const rpcUrl = `http://127.0.0.1:${port}`;
  const chain = localChain(rpcUrl);
  const publicClient = createPublicClient({ chain, transport: http(rpcUrl, { retryCount: 0 }) });
  const stop = async () => {
    // An unref'd node is waited for all the same: this process stays until it has gone.
    child.ref();
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
    await exited;
  };

  const deadline = Date.now() + (options.readyTimeoutMs ?? 60_000);
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      const message = `hardhat node exited with ${child.exitCode ?? child.signalCode}:\n${output}`;
      throw output.includes("EADDRINUSE") ? new PortTakenError(message) : new Error(message);
    }
    try {
      if (!listening) throw new Error("not listening yet");
      const id = await publicClient.getChainId();
      if (id !== LOCAL_CHAIN_ID) {
        await stop();
        throw new Error(`the local node answered chain id ${id}, expected ${LOCAL_CHAIN_ID}`);
      }
      break;
    } catch (error) {
      if (error instanceof Error && error.message.startsWith("the local node")) throw error;
      if (Date.now() > deadline) {
        await stop();
        throw new Error(`hardhat node did not answer on ${rpcUrl} in time:\n${output}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }

  return {
    rpcUrl,
    chain,
    publicClient,
    walletFor: (account) => createWalletClient({ account, chain, transport: http(rpcUrl, { retryCount: 0 }) }),
    stop,
    unref: () => unrefChild(child),
  };
}
