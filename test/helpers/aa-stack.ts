import type { Hex } from "viem";
import type { LocalAccount } from "viem/accounts";
import type { AaDeployment } from "../../server/wallets/aa";
import type { GatewayOptions } from "../../server/index";
import { startLocalAccountAbstraction } from "../../server/devstack/aa-local";
import type { Bundler } from "../../server/devstack/bundler";
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
  stop(): Promise<void>;
}

export async function startAaStack(): Promise<AaStack> {
  const node = await startLocalNode();
  let bundler: Bundler | undefined;
  try {
    const deployer = node.walletFor(devAccount(DEV_ACCOUNT_INDEX.deployer));
    const deployment = await deployContracts({
      network: "aa-test",
      publicClient: node.publicClient,
      walletClient: deployer,
      settler: devAccount(DEV_ACCOUNT_INDEX.settler).address,
      voucherSigner: devAccount(DEV_ACCOUNT_INDEX.voucherSigner).address,
    });
    const local = await startLocalAccountAbstraction(node, deployment);
    bundler = local.bundler;
    const { aa, paymasterSigner, paymasterSignerPrivateKey } = local;
    const started = bundler;
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
      async stop() {
        await started.stop();
        await node.stop();
      },
    };
  } catch (error) {
    await bundler?.stop();
    await node.stop();
    throw error;
  }
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
