import { expect } from "chai";
import hre from "hardhat";
import type { PublicClient } from "viem";
import { linkAddress } from "../../server/settlement/addresses";
import { loadArtifact } from "../../server/devstack/deploy";
import { DepositIndexer } from "../../server/settlement/indexer";
import { reconcile } from "../../server/settlement/reconcile";
import { VoucherIssuer } from "../../server/settlement/vouchers";
import { Ledger } from "../../server/ledger/ledger";
import { type LocalChain, USDC, startLocalChain } from "../helpers/chain";
import { describeEachEngine } from "../helpers/engines";
import { DEFAULT_VOUCHER_LIMITS } from "../helpers/vouchers";
import { settlementStores } from "../../server/settlement/store";

describeEachEngine("reconcile and vouchers", (engine) => {
  let chain: LocalChain;
  let snapshot: string;
  before(async function () {
    this.timeout(60_000);
    chain = await startLocalChain();
    snapshot = await chain.snapshot();
  });
  after(async () => {
    await chain.revert(snapshot);
  });

  it("counts a voucher redeemed after the block it checks as still in the escrow, so the sweep cannot raise a false alarm", async () => {
    const db = await engine.open();
    const ledger = await Ledger.open(db);
    await ledger.ensureAccount({ id: "alice", kind: "user", name: "Alice" });
    await linkAddress(ledger, { accountId: "alice", address: chain.address("alice") });
    await chain.deposit("alice", 10n * USDC);
    const indexer = new DepositIndexer({
      ledger,
      publicClient: chain.publicClient,
      escrowAddress: chain.deployment.escrow,
      deployBlock: chain.deployment.deployBlock,
      confirmations: 0,
      log: () => {},
    });
    await indexer.poll();
    const all = await hre.viem.getWalletClients();
    const issuer = new VoucherIssuer({
      ledger,
      signer: all[2],
      escrowAddress: chain.deployment.escrow,
      chainId: 8453,
      limits: DEFAULT_VOUCHER_LIMITS,
      deployBlock: chain.deployment.deployBlock,
    });
    const nowSec = Number((await chain.publicClient.getBlock()).timestamp);
    const issued = await issuer.issue("alice", { amountMicros: 4n * USDC, nowSec });
    if (!issued.ok) throw new Error(issued.reason);

    const before = await chain.head();
    const alice = all.find((w) => w.account.address.toLowerCase() === chain.address("alice").toLowerCase())!;
    const tx = await alice.writeContract({
      address: chain.deployment.escrow,
      abi: loadArtifact("SkillEscrow").abi,
      functionName: "withdrawWithVoucher",
      args: [issued.issued.voucher, issued.issued.signature],
      account: alice.account,
      chain: alice.chain,
    });
    await chain.receipt(tx);
    expect(await issuer.sweep(chain.publicClient)).to.deep.equal({ redeemed: 1, returned: 0 });

    // A check that pinned its block before the redemption, as one running beside the sweep would.
    const pinnedBefore = new Proxy(chain.publicClient, {
      get: (target, prop) => (prop === "getBlockNumber" ? async () => before : Reflect.get(target, prop)),
    }) as PublicClient;
    const early = await reconcile({
      stores: settlementStores(db),
      publicClient: pinnedBefore,
      escrowAddress: chain.deployment.escrow,
      fromBlock: chain.deployment.deployBlock,
    });
    expect(early.differences).to.deep.equal([]);
    const now = await reconcile({
      stores: settlementStores(db),
      publicClient: chain.publicClient,
      escrowAddress: chain.deployment.escrow,
      fromBlock: chain.deployment.deployBlock,
    });
    expect(now.differences).to.deep.equal([]);
  });
});
