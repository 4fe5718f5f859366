import { expect } from "chai";
import { compileContracts } from "../helpers/chain";
import { loadArtifact } from "../../server/devstack/deploy";
import { DEV_ACCOUNT_INDEX, type LocalNode, devAccount, startLocalNode } from "../../server/devstack/local-node";
import { deployDemoChain } from "../../server/devstack/chain-seed";

describe("the local chain of the embedded default", function () {
  this.timeout(90_000);
  let node: LocalNode | undefined;

  before(async () => {
    await compileContracts();
  });
  after(async () => {
    await node?.stop();
  });

  it("runs a real hardhat node on chain id 8453, deploys, and deposits the demo buyer's USDC on-chain", async () => {
    node = await startLocalNode();
    expect(await node.publicClient.getChainId()).to.equal(8453);
    const demo = await deployDemoChain(node, 10_000_000n);
    expect(demo.buyerAddress).to.equal(devAccount(DEV_ACCOUNT_INDEX.demoBuyer).address);

    const escrowAbi = loadArtifact("SkillEscrow").abi;
    const usdcAbi = loadArtifact("TestUSDC").abi;
    const escrowed = await node.publicClient.readContract({
      address: demo.deployment.escrow,
      abi: escrowAbi,
      functionName: "balances",
      args: [demo.buyerAddress],
    });
    expect(escrowed).to.equal(10_000_000n);
    const held = await node.publicClient.readContract({
      address: demo.deployment.usdc,
      abi: usdcAbi,
      functionName: "balanceOf",
      args: [demo.deployment.escrow],
    });
    expect(held).to.equal(10_000_000n);
    const wallet = await node.publicClient.readContract({
      address: demo.deployment.usdc,
      abi: usdcAbi,
      functionName: "balanceOf",
      args: [demo.buyerAddress],
    });
    expect(wallet).to.equal(0n);
  });

  it("stops the node process, so its RPC no longer answers", async () => {
    const running = node!;
    await running.stop();
    node = undefined;
    let failed = false;
    await running.publicClient.getChainId().catch(() => (failed = true));
    expect(failed).to.equal(true);
  });
});
