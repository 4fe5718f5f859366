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
  const bundler = await startBundler({
    rpcUrl: node.rpcUrl,
    executorPrivateKeys: [devPrivateKey(DEV_ACCOUNT_INDEX.bundlerExecutor)],
    utilityPrivateKey: devPrivateKey(DEV_ACCOUNT_INDEX.bundlerUtility),
  });
  return { aa, bundler, paymasterSigner, paymasterSignerPrivateKey };
}
