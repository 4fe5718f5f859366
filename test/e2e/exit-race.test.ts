import { expect } from "chai";
import hre from "hardhat";
import { linkAddress } from "../../server/settlement/addresses";
import { reconcile } from "../../server/settlement/reconcile";
import { assertBalanced } from "../../server/ledger/invariants";
import { type LocalChain, USDC, gatewayChain, startLocalChain } from "../helpers/chain";
import { exitActions } from "../helpers/exits";
import { type TestStack, startStack } from "../helpers/gateway";
import { settlementStores } from "../../server/settlement/store";

/**
 * The unilateral exit racing with calls, through the whole gateway: calls are in flight when
 * the buyer asks the escrow for its money back. The frozen amount is never spent, later calls
 * are refused with a message that says why, the calls already paid settle during the delay,
 * and the escrow pays exactly what the ledger froze.
 */
describe("a unilateral exit racing with calls", function () {
  this.timeout(120_000);
  let chain: LocalChain;
  let snapshot: string;
  let stack: TestStack;

  before(async () => {
    chain = await startLocalChain();
    snapshot = await chain.snapshot();
    const all = await hre.viem.getWalletClients();
    stack = await startStack({
      buyerUsd: "0",
      config: { rateLimitPerMin: 100_000 },
      gateway: { chain: await gatewayChain(chain) },
    });
    await linkAddress(stack.gw.ledger, { accountId: stack.buyerId, address: chain.address("carol") });
    await linkAddress(stack.gw.ledger, { accountId: stack.sellerId, address: all[7].account.address });
  });
  after(async () => {
    await stack.close();
    await chain.revert(snapshot);
  });

  it("never spends the frozen amount, and the escrow pays exactly it", async () => {
    const exits = await exitActions(chain);
    const moneyPath = stack.gw.moneyPath!;
    await stack.addSkill("slowpay", "/gated", { priceMicros: 10_000n });
    await chain.deposit("carol", 2n * USDC);
    await moneyPath.indexer.poll();
    expect(await stack.available()).to.equal(2n * USDC);

    // 40 paid calls, 30 of them still in flight (holding 0.30) when the exit request lands.
    for (let i = 0; i < 10; i++) expect((await stack.post("/v1/call", { skill_id: "echo", input: {} })).status).to.equal(200);
    const inFlight = Array.from({ length: 30 }, () => stack.post("/v1/call", { skill_id: "slowpay", input: {} }));
    // The backend holds them (/gated) until the exit is frozen, so all 30 are in flight however slow the machine.
    while ((stack.backend.hits.get("/gated") ?? 0) < 30) await new Promise((resolve) => setTimeout(resolve, 2));
    expect((await stack.gw.ledger.balance(stack.buyerId)).heldMicros).to.equal(30n * 10_000n);
    await exits.request("carol", 2n * USDC);
    await moneyPath.indexer.poll();

    // Everything available is frozen at once; the calls in flight finish and are paid.
    expect(await stack.available()).to.equal(0n);
    stack.backend.openGate();
    const results = await Promise.all(inFlight);
    expect(results.filter((r) => r.status === 200).length).to.equal(30);
    const refused = await stack.post("/v1/call", { skill_id: "echo", input: {} });
    expect(refused.status).to.equal(402);
    expect(refused.body.error).to.contain("exit from the escrow is pending");
    expect(await stack.available()).to.equal(0n);

    // The paid calls settle during the delay; then the exit pays what was frozen.
    const spent = 10n * 1_000n + 30n * 10_000n;
    expect(await moneyPath.settler!.runOnce()).to.include({ calls: 40 });
    await exits.passExitDelay();
    const walletBefore = await exits.walletUsdc("carol");
    await exits.complete("carol");
    await moneyPath.indexer.poll();
    expect((await exits.walletUsdc("carol")) - walletBefore).to.equal(2n * USDC - spent);
    expect(await chain.escrowBalance(chain.address("carol"))).to.equal(0n);
    expect(await stack.gw.ledger.balance(stack.buyerId)).to.deep.equal({ availableMicros: 0n, heldMicros: 0n });

    const books = await reconcile({
      stores: settlementStores(stack.gw.db),
      publicClient: chain.publicClient,
      escrowAddress: chain.deployment.escrow,
      fromBlock: chain.deployment.deployBlock,
    });
    expect(books.differences).to.deep.equal([]);
    await assertBalanced(stack.gw.db);
  });
});
