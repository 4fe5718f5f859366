import { expect } from "chai";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { compileContracts } from "../helpers/chain";
import { loadArtifact } from "../../server/devstack/deploy";
import { DEV_ACCOUNT_INDEX, type LocalNode, devAccount, freePort, startLocalNode } from "../../server/devstack/local-node";
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

  it("starts on another port when the free one it found is taken first, never taking the taker for the node", async () => {
    // The port's taker answers JSON-RPC as a node of chain 8453 would: only the node's own word that it listens counts.
    const taker = http.createServer((req, res) => {
      let body = "";
      req.on("data", (c: Buffer) => (body += c.toString()));
      req.on("end", () => {
        const { id } = JSON.parse(body) as { id: number };
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", id, result: "0x2105" }));
      });
    });
    await new Promise<void>((resolve) => taker.listen(0, "127.0.0.1", resolve));
    const taken = (taker.address() as AddressInfo).port;
    const offered: number[] = [];
    try {
      node = await startLocalNode({
        choosePort: async () => {
          offered.push(offered.length === 0 ? taken : await freePort());
          return offered[offered.length - 1];
        },
      });
      expect(offered).to.have.length(2);
      expect(node.rpcUrl).to.equal(`http://127.0.0.1:${offered[1]}`);
      // The node's own chain: it has the development accounts' ETH, which the taker knows nothing of.
      expect((await node.publicClient.getBalance({ address: devAccount(DEV_ACCOUNT_INDEX.deployer).address })) > 0n).to.equal(true);
    } finally {
      taker.close();
      await node?.stop();
      node = undefined;
    }
  });
});
