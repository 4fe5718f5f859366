import type { LocalAccount } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { type AaDeployment, deployAccountAbstraction } from "../wallets/aa";
import { type Bundler, startBundler } from "./bundler";
import type { Deployment } from "../chain/deployment";
import { DEV_ACCOUNT_INDEX, type LocalNode, devAccount, devPrivateKey } from "./local-node";

export interface LocalAccountAbstraction {
  aa: AaDeployment;
  bundler: Bundler;
  /** The key the gateway paymaster trusts: fresh for each local chain. */
  paymasterSigner: LocalAccount;
}

/**
 * ERC-4337 on a local `hardhat node`: the deterministic deployer, EntryPoint v0.7 and the
 * SimpleAccount factory at their canonical addresses, the gateway paymaster for this
 * escrow, and the real Alto bundler, run by the node's development accounts. `npm start`
 * and the tests that need embedded wallets both start it this way.
 */
export async function startLocalAccountAbstraction(
  node: LocalNode,
  deployment: Pick<Deployment, "usdc" | "escrow">,
): Promise<LocalAccountAbstraction> {
  const paymasterSigner = privateKeyToAccount(generatePrivateKey());
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
  return { aa, bundler, paymasterSigner };
}
