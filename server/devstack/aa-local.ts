/**
 * The ERC-4337 stack of a local chain, for `npm start` and the tests that need embedded wallets: the contracts
 * (./aa-deploy.ts) and the real Alto bundler (./bundler.ts), run by the node's development accounts.
 */
import type { Hex, LocalAccount } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import type { AaDeployment } from "../wallets/aa";
import { deployAccountAbstraction } from "./aa-deploy";
import { type Bundler, startBundler } from "./bundler";
import type { Deployment } from "../chain/deployment";
import { DEV_ACCOUNT_INDEX, type LocalNode, devAccount, devPrivateKey } from "./local-node";

export interface LocalAccountAbstraction {
  aa: AaDeployment;
  bundler: Bundler;
  /** The key the gateway paymaster trusts: fresh for each local chain. */
  paymasterSigner: LocalAccount;
  /** That key, for a gateway started as a process of its own (PAYMASTER_SIGNER_PRIVATE_KEY). Local chain only. */
  paymasterSignerPrivateKey: Hex;
}

/**
 * ERC-4337 on a local `hardhat node`: deployAccountAbstraction with the node's development deployer (and
 * `hardhat_setCode` for the deterministic deployer), then the real Alto bundler, run by the node's development
 * accounts. The paymaster's signing key is fresh for each local chain.
 */
export async function startLocalAccountAbstraction(
  node: LocalNode,
  deployment: Pick<Deployment, "usdc" | "escrow">,
): Promise<LocalAccountAbstraction> {
  const deployed = await deployLocalAccountAbstraction(node, deployment);
  return { ...deployed, bundler: await startLocalBundler(node) };
}

/**
 * The contracts alone: EntryPoint v0.7 and the account factory at their canonical addresses (kept when already there),
 * and a GatewayPaymaster of its own for `deployment`'s escrow, trusting a fresh signing key. Deployed again on a chain
 * that has them, it gives a new paymaster beside the same EntryPoint, which the same bundler serves.
 */
export async function deployLocalAccountAbstraction(
  node: LocalNode,
  deployment: Pick<Deployment, "usdc" | "escrow">,
): Promise<Omit<LocalAccountAbstraction, "bundler">> {
  const paymasterSignerPrivateKey = generatePrivateKey();
  const paymasterSigner = privateKeyToAccount(paymasterSignerPrivateKey);
  const aa = await deployAccountAbstraction({
    publicClient: node.publicClient,
    walletClient: node.walletFor(devAccount(DEV_ACCOUNT_INDEX.deployer)),
    setCode: async (address, code) => {
      await node.publicClient.request({ method: "hardhat_setCode" as never, params: [address, code] as never });
    },
    usdc: deployment.usdc,
    escrow: deployment.escrow,
    paymasterSigner: paymasterSigner.address,
  });
  return { aa, paymasterSigner, paymasterSignerPrivateKey };
}

/** The real Alto bundler for the node's EntryPoint v0.7, run by the node's development accounts. */
export function startLocalBundler(node: LocalNode): Promise<Bundler> {
  return startBundler({
    rpcUrl: node.rpcUrl,
    executorPrivateKeys: [devPrivateKey(DEV_ACCOUNT_INDEX.bundlerExecutor)],
    utilityPrivateKey: devPrivateKey(DEV_ACCOUNT_INDEX.bundlerUtility),
  });
}
