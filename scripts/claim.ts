/**
 * `npm run claim`: a seller (or the platform treasury) withdraws its settled earnings from
 * the escrow, from its own wallet, until the dashboard does it.
 *
 *   SELLER_PRIVATE_KEY=0x… npm run claim -- [--to 0xRecipient]
 *
 * Without SELLER_PRIVATE_KEY it uses the embedded default's demo seller (a development
 * account of the local chain). The chain and contracts come from CHAIN_RPC_URL (or the local
 * chain on CHAIN_PORT) and DEPLOYMENT_FILE, as for the gateway.
 */
import path from "node:path";
import { type Address, type Hex, createPublicClient, createWalletClient, formatUnits, getAddress, http } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { skillEscrowAbi } from "../server/chain/abi";
import { readDeployment, verifyDeployment } from "../server/chain/deployment";
import { DEV_ACCOUNT_INDEX, devAccount, localChain } from "../server/devstack/local-node";
import { loadConfig } from "../server/config";

const ROOT = path.resolve(__dirname, "..");

async function main(): Promise<void> {
  const config = loadConfig();
  const rpcUrl = config.chainRpcUrl || `http://127.0.0.1:${config.chainPort}`;
  const deployment = readDeployment(path.resolve(ROOT, config.deploymentFile));
  const chain = localChain(rpcUrl, deployment.chainId);
  const publicClient = createPublicClient({ chain, transport: http(rpcUrl) });
  const verified = await verifyDeployment(publicClient, deployment);
  if (!verified.ok) throw new Error(`${config.deploymentFile} does not match the chain at ${rpcUrl}: ${verified.reason}`);

  const key = process.env.SELLER_PRIVATE_KEY as Hex | undefined;
  const account = key ? privateKeyToAccount(key) : devAccount(DEV_ACCOUNT_INDEX.demoSeller);
  const toIndex = process.argv.indexOf("--to");
  const recipient: Address = toIndex >= 0 ? getAddress(process.argv[toIndex + 1]) : account.address;
  const abi = skillEscrowAbi;

  const claimable = await publicClient.readContract({
    address: deployment.escrow,
    abi,
    functionName: "earnings",
    args: [account.address],
  });
  console.log(`${account.address}${key ? "" : " (the demo seller)"}: ${formatUnits(claimable, 6)} USDC settled and claimable`);
  if (claimable === 0n) {
    console.log("Nothing to claim yet: earnings reach the escrow when the settler posts the next batch.");
    return;
  }
  const wallet = createWalletClient({ account, chain, transport: http(rpcUrl) });
  const hash = await wallet.writeContract({ address: deployment.escrow, abi, functionName: "claimTo", args: [recipient] });
  const receipt = await publicClient.waitForTransactionReceipt({ hash });
  if (receipt.status !== "success") throw new Error(`claim reverted (${hash})`);
  console.log(`Claimed ${formatUnits(claimable, 6)} USDC to ${recipient} in ${hash}`);
}

main().catch((error) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
