import type { Address, Hash } from "viem";
import { skillEscrowAbi, testUsdcAbi } from "../chain/abi";
import { deployContracts } from "./deploy";
import type { Deployment } from "../chain/deployment";
import { DEV_ACCOUNT_INDEX, type LocalNode, X402_SETTLER_KEYS, devAccount } from "./local-node";

export interface DemoChain {
  deployment: Deployment;
  buyerAddress: Address;
  sellerAddress: Address;
  depositTx: Hash;
}

/**
 * The embedded default's chain: deploys TestUSDC and SkillEscrow on the local node (the
 * settler and voucher-signer roles to the node's development accounts), mints test USDC to
 * the demo buyer's wallet and deposits it into the escrow from that wallet, on-chain. The
 * gateway's ledger learns of the deposit the way it learns of any: from the escrow's event.
 */
export async function deployDemoChain(node: LocalNode, depositMicros: bigint): Promise<DemoChain> {
  const deployer = devAccount(DEV_ACCOUNT_INDEX.deployer);
  const buyer = devAccount(DEV_ACCOUNT_INDEX.demoBuyer);
  const seller = devAccount(DEV_ACCOUNT_INDEX.demoSeller);
  const deployment = await deployContracts({
    network: "localhost",
    publicClient: node.publicClient,
    walletClient: node.walletFor(deployer),
    settler: devAccount(DEV_ACCOUNT_INDEX.settler).address,
    voucherSigner: devAccount(DEV_ACCOUNT_INDEX.voucherSigner).address,
    x402Settlers: Array.from({ length: X402_SETTLER_KEYS }, (_, i) => devAccount(DEV_ACCOUNT_INDEX.x402Settler + i).address),
    mint: [{ to: buyer.address, amountMicros: depositMicros }],
  });

  const wallet = node.walletFor(buyer);
  const approve = await wallet.writeContract({
    address: deployment.usdc,
    abi: testUsdcAbi,
    functionName: "approve",
    args: [deployment.escrow, depositMicros],
  });
  await node.publicClient.waitForTransactionReceipt({ hash: approve });
  const depositTx = await wallet.writeContract({
    address: deployment.escrow,
    abi: skillEscrowAbi,
    functionName: "deposit",
    args: [depositMicros],
  });
  const receipt = await node.publicClient.waitForTransactionReceipt({ hash: depositTx });
  if (receipt.status !== "success") throw new Error(`the demo deposit reverted (${depositTx})`);
  return { deployment, buyerAddress: buyer.address, sellerAddress: seller.address, depositTx };
}
