import type { Hex } from "viem";
import type { LocalAccount } from "viem/accounts";
import type { AaDeployment } from "../../server/wallets/aa";
import type { GatewayOptions } from "../../server/index";
import { deployLocalAccountAbstraction, startLocalBundler } from "../../server/devstack/aa-local";
import { type Bundler, rpc } from "../../server/devstack/bundler";
import { deployContracts, type Deployment } from "../../server/devstack/deploy";
import { DEV_ACCOUNT_INDEX, devAccount, devPrivateKey, startLocalNode, type LocalNode } from "../../server/devstack/local-node";

/** Development accounts (of `hardhat node`'s 20 funded ones) the bundler uses; the gateway's roles use 0–4. */
export const EXECUTOR_INDEX = DEV_ACCOUNT_INDEX.bundlerExecutor;
export const UTILITY_INDEX = DEV_ACCOUNT_INDEX.bundlerUtility;

export { devPrivateKey };

/**
 * A `hardhat node` with the escrow and test USDC (the server's own deployContracts), the ERC-4337 contracts and
 * the gateway paymaster (server/wallets/aa.ts), and the real Alto bundler in front of it.
 */
export interface AaStack {
  node: LocalNode;
  deployment: Deployment;
  aa: AaDeployment;
  bundler: Bundler;
  /** The gateway key the paymaster trusts. */
  paymasterSigner: LocalAccount;
  /** That key, for a gateway started as a process of its own. */
  paymasterSignerPrivateKey: Hex;
  /** Mints test USDC (the deployer owns the TestUSDC). */
  mint(to: Hex, amountMicros: bigint): Promise<void>;
  /** Ends this file's use of the stack: the node and the bundler are the process's (sharedNode). */
  stop(): Promise<void>;
}

/**
 * The chain node and the bundler of this test process, shared by the files it runs one after another (a mocha
 * worker runs many): each takes seconds of CPU to start (about 2 s and 2.5 s here, on cores the rest of the suite
 * needs), where a file's own contracts take a fifth of a second. Each file deploys its own escrow, test USDC and
 * paymaster on it (startAaStack), so no file sees another's balances, deposits or sponsorships; the chain's accounts
 * and blocks go on from the file before. They let the process exit, and go with it (server/devstack/child-guard.cjs).
 */
let shared: Promise<LocalNode> | undefined;
/** Started once the first stack's contracts are on the node (Alto refuses a chain without the EntryPoint). */
let sharedBundler: Promise<Bundler> | undefined;

async function sharedNode(): Promise<LocalNode> {
  if (shared) {
    const running = await shared.catch(() => undefined);
    const bundler = await sharedBundler?.catch(() => undefined);
    // A node or bundler that died (or a start that failed) is started again rather than handed on.
    if (running && (await answers(running, bundler))) return running;
    await bundler?.stop();
    await running?.stop();
    shared = sharedBundler = undefined;
  }
  shared = startLocalNode().then((node) => {
    node.unref();
    return node;
  });
  return shared;
}

function bundlerOf(node: LocalNode): Promise<Bundler> {
  if (!sharedBundler) {
    const starting = startLocalBundler(node).then((bundler) => {
      bundler.unref();
      return bundler;
    });
    // A start that failed is tried again by the next stack, not handed on.
    starting.catch(() => {
      if (sharedBundler === starting) sharedBundler = undefined;
    });
    sharedBundler = starting;
  }
  return sharedBundler;
}

/** Whether the node, and the bundler if one runs, still answer JSON-RPC. */
async function answers(node: LocalNode, bundler: Bundler | undefined): Promise<boolean> {
  try {
    await node.publicClient.getChainId();
    if (bundler) await rpc(bundler.url, "eth_chainId");
    return true;
  } catch {
    return false;
  }
}

/** The stacks deploying now: one at a time, as their transactions come from the one deployer account. */
let deploying: Promise<unknown> = Promise.resolve();

/** A stack on this process's shared node and bundler, with contracts of its own. */
export function startAaStack(): Promise<AaStack> {
  const started = deploying.then(deployAaStack, deployAaStack);
  deploying = started.catch(() => undefined);
  return started;
}

async function deployAaStack(): Promise<AaStack> {
  const node = await sharedNode();
  const deployer = node.walletFor(devAccount(DEV_ACCOUNT_INDEX.deployer));
  const deployment = await deployContracts({
    network: "aa-test",
    publicClient: node.publicClient,
    walletClient: deployer,
    settler: devAccount(DEV_ACCOUNT_INDEX.settler).address,
    voucherSigner: devAccount(DEV_ACCOUNT_INDEX.voucherSigner).address,
  });
  const { aa, paymasterSigner, paymasterSignerPrivateKey } = await deployLocalAccountAbstraction(node, deployment);
  const bundler = await bundlerOf(node);
  return {
    node,
    deployment,
    aa,
    bundler,
    paymasterSigner,
    paymasterSignerPrivateKey,
    async mint(to, amountMicros) {
      const hash = await deployer.writeContract({
        address: deployment.usdc,
        abi: [
          {
            type: "function",
            name: "mint",
            stateMutability: "nonpayable",
            inputs: [{ type: "address" }, { type: "uint256" }],
            outputs: [],
          },
        ],
        functionName: "mint",
        args: [to, amountMicros],
      });
      await node.publicClient.waitForTransactionReceipt({ hash });
    },
    // The node and the bundler stay for the process's next file.
    async stop() {},
  };
}

/** Gateway options for a stack: its chain for the money path, and embedded wallets on its bundler. */
export function gatewayOptionsFor(stack: AaStack): GatewayOptions {
  return {
    chain: {
      publicClient: stack.node.publicClient,
      escrowAddress: stack.deployment.escrow,
      chainId: 8453,
      deployBlock: stack.deployment.deployBlock,
    },
    wallets: {
      chain: { client: stack.node.publicClient, aa: stack.aa, bundlerUrl: stack.bundler.url },
      aa: stack.aa,
      usdc: stack.deployment.usdc,
      escrow: stack.deployment.escrow,
      paymasterSigner: stack.paymasterSigner,
      encryptionKey: `0x${"42".repeat(32)}`,
      minimumMicros: 1_000_000n,
    },
  };
}
