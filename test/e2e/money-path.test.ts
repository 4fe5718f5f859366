import { expect } from "chai";
import hre from "hardhat";
import type { Address, Hash } from "viem";
import { linkAddress } from "../../server/settlement/addresses";
import { loadArtifact } from "../../server/devstack/deploy";
import { reconcile } from "../../server/settlement/reconcile";
import { assertBalanced } from "../../server/ledger/invariants";
import { type LocalChain, USDC, gatewayChain, startLocalChain } from "../helpers/chain";
import { describeEachEngine, freshPostgresDatabase } from "../helpers/engines";
import { type TestStack, startStack } from "../helpers/gateway";
import { settlementStores } from "../../server/settlement/store";

const escrowAbi = loadArtifact("SkillEscrow").abi;
const usdcAbi = loadArtifact("TestUSDC").abi;

/**
 * The money's whole journey on a real chain (Hardhat's in-process network): a deposit
 * on-chain, 1,000 paid calls at mixed prices (some failing), settlement, the seller's and
 * the platform's claims, and the buyer's voucher for the rest, every balance exact.
 */
describeEachEngine("the money path, end to end", (engine) => {
  let chain: LocalChain;
  let snapshot: string;
  let stack: TestStack;
  let buyer: Address;
  let seller: Address;
  let treasury: Address;

  const wallets = () => hre.viem.getWalletClients();
  const walletOf = async (address: Address) => (await wallets()).find((w) => w.account.address.toLowerCase() === address.toLowerCase())!;
  const usdcOf = (address: Address) =>
    chain.publicClient.readContract({
      address: chain.deployment.usdc,
      abi: usdcAbi,
      functionName: "balanceOf",
      args: [address],
    }) as Promise<bigint>;
  const send = async (from: Address, functionName: string, args: readonly unknown[]): Promise<Hash> => {
    const w = await walletOf(from);
    const hash = await w.writeContract({
      address: chain.deployment.escrow,
      abi: escrowAbi,
      functionName,
      args,
      account: w.account,
      chain: w.chain,
    } as never);
    expect((await chain.receipt(hash)).status).to.equal("success");
    return hash;
  };

  before(async function () {
    this.timeout(120_000);
    chain = await startLocalChain();
    snapshot = await chain.snapshot();
    const all = await wallets();
    treasury = all[0].account.address;
    seller = all[6].account.address;
    buyer = chain.address("alice");
    stack = await startStack({
      engine: engine.name,
      buyerUsd: "0",
      config: { rateLimitPerMin: 100_000, settleMaxCalls: 1_000 },
      gateway: { chain: await gatewayChain(chain) },
    });
    expect((await linkAddress(stack.gw.ledger, { accountId: stack.buyerId, address: buyer })).ok).to.equal(true);
    expect((await linkAddress(stack.gw.ledger, { accountId: stack.sellerId, address: seller })).ok).to.equal(true);
  });
  after(async () => {
    await stack?.close();
    if (snapshot) await chain.revert(snapshot);
  });

  it("deposits, bills 1,000 calls, settles, pays the seller 90% and the platform 10%, and returns the rest by voucher", async function () {
    this.timeout(120_000);
    const moneyPath = stack.gw.moneyPath!;
    const buyerWalletBefore = await usdcOf(buyer);

    // 1. The buyer deposits 10 USDC on-chain; the indexer credits it.
    await chain.deposit("alice", 10n * USDC);
    await moneyPath.indexer.poll();
    expect(await stack.available()).to.equal(10n * USDC);

    // 2. 1,000 calls at mixed prices, a tenth of them to a failing backend.
    const prices = { cheap: 1_000n, odd: 3_700n, dear: 10_000n, flaky: 5_000n };
    await stack.addSkill("cheap", "/echo", { priceMicros: prices.cheap });
    await stack.addSkill("odd", "/echo", { priceMicros: prices.odd });
    await stack.addSkill("dear", "/echo", { priceMicros: prices.dear });
    await stack.addSkill("flaky", "/fail", { priceMicros: prices.flaky });
    const plan = Array.from(
      { length: 1_000 },
      (_, i) => (["cheap", "cheap", "cheap", "cheap", "odd", "odd", "odd", "dear", "dear", "flaky"] as const)[(i * 7) % 10],
    );
    let spent = 0n;
    let fees = 0n;
    for (let i = 0; i < plan.length; i += 50) {
      const results = await Promise.all(plan.slice(i, i + 50).map((slug) => stack.post("/v1/call", { skill_id: slug, input: {} })));
      results.forEach((res, j) => {
        const slug = plan[i + j];
        if (slug === "flaky") return expect(res.status).to.equal(502);
        expect(res.status).to.equal(200);
        spent += prices[slug];
        fees += prices[slug] / 10n;
      });
    }
    expect(await stack.available()).to.equal(10n * USDC - spent);

    // 3. Settlement: one batch of the 900 paid calls.
    const run = await moneyPath.settler!.runOnce();
    expect(run).to.include({ batch: 1, calls: 900 });
    expect(await moneyPath.settler!.runOnce()).to.include({ calls: 0 });
    expect(await chain.escrowBalance(buyer)).to.equal(10n * USDC - spent);

    // A paid call's receipt proves it is in the batch, checked by the escrow itself.
    // The newest paid call (the newest call of all may be a failed one: 50 run at once, in any order).
    const usage = await stack.get("/v1/usage?limit=50");
    const callId = usage.body.data.calls.find((c: { status: string }) => c.status === "success").id;
    const receipt = await stack.get(`/v1/calls/${callId}/receipt`);
    expect(receipt.status).to.equal(200);
    expect(receipt.body.data).to.include({ status: "settled", batch_number: 1 });
    const r = receipt.body.data.receipt;
    const verified = await chain.publicClient.readContract({
      address: chain.deployment.escrow,
      abi: escrowAbi,
      functionName: "verifyReceipt",
      args: [1n, r.call_id, r.account, r.seller, BigInt(r.amount), BigInt(r.platform_fee), receipt.body.data.proof],
    });
    expect(verified).to.equal(true);

    // 4. The seller sees its earnings settled, then claims exactly 90% on-chain; the platform 10%.
    const sellerKey = (await stack.gw.keys.create(stack.sellerId, { scopes: ["usage:read"] })).key;
    const before = await stack.get("/v1/earnings", sellerKey);
    expect(before.body.data).to.include({ pending: 0, claimed: 0 });
    expect(before.body.data.settled).to.equal(Number(spent - fees) / 1e6);
    const sellerWalletBefore = await usdcOf(seller);
    const treasuryWalletBefore = await usdcOf(treasury);
    await send(seller, "claim", []);
    await send(treasury, "claim", []);
    expect((await usdcOf(seller)) - sellerWalletBefore).to.equal(spent - fees);
    expect((await usdcOf(treasury)) - treasuryWalletBefore).to.equal(fees);
    const after = await stack.get("/v1/earnings", sellerKey);
    expect(after.body.data).to.include({ claimable: 0 });
    expect(after.body.data.claimed).to.equal(Number(spent - fees) / 1e6);

    // 5. The buyer takes the rest back with a voucher.
    const withdrawal = await stack.post("/v1/withdrawals", {});
    expect(withdrawal.status).to.equal(200);
    const v = withdrawal.body.data.voucher;
    expect(BigInt(v.amount)).to.equal(10n * USDC - spent);
    await send(buyer, "withdrawWithVoucher", [
      { account: v.account, amount: BigInt(v.amount), nonce: BigInt(v.nonce), deadline: BigInt(v.deadline) },
      withdrawal.body.data.signature,
    ]);

    // Every unit accounted for: the buyer's wallet is down exactly what it spent, the
    // escrow holds nothing, and the books agree with the chain.
    expect(buyerWalletBefore - (await usdcOf(buyer))).to.equal(spent);
    expect(await usdcOf(chain.deployment.escrow)).to.equal(0n);
    expect(await stack.gw.ledger.balance(stack.buyerId)).to.deep.equal({ availableMicros: 0n, heldMicros: 0n });
    await stack.gw.moneyPath!.vouchers!.sweep(chain.publicClient);
    const books = await reconcile({
      stores: settlementStores(stack.gw.db),
      publicClient: chain.publicClient,
      escrowAddress: chain.deployment.escrow,
      fromBlock: chain.deployment.deployBlock,
    });
    expect(books.differences).to.deep.equal([]);
    expect(books.ok).to.equal(true);
    await assertBalanced(stack.gw.db);
  });
});

describeEachEngine("the money path across a gateway restart mid-stream (a killed one is test/e2e/crash.test.ts)", (engine) => {
  it("answers the calls in flight, credits nothing twice, settles the rest once, and the books agree", async function () {
    this.timeout(120_000);
    const fs = await import("node:fs");
    const os = await import("node:os");
    const path = await import("node:path");
    const { loadConfig } = await import("../../server/config");
    const { startGateway } = await import("../../server/index");
    const { startTestBackend } = await import("../helpers/backend");

    const chain = await startLocalChain();
    const snapshot = await chain.snapshot();
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "skill-gw-restart-"));
    const backend = await startTestBackend();
    const all = await hre.viem.getWalletClients();
    const buyer = chain.address("bob");
    const config = loadConfig(
      {},
      {
        port: 0,
        dbPath: path.join(dir, "gateway.db"),
        databaseUrl: engine.name === "postgres" ? await freshPostgresDatabase() : "",
        rateLimitPerMin: 100_000,
        skillBackendAllowlist: [backend.url],
        logLevel: "silent",
      },
    );
    const connection = await gatewayChain(chain);
    const call = (url: string, key: string) =>
      fetch(`${url}/v1/call`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ skill_id: "echo", input: {} }),
      })
        .then((r) => r.status)
        .catch(() => 0);

    try {
      const first = await startGateway(config, { log: () => {}, chain: connection });
      await first.ledger.ensureAccount({ id: "seller", kind: "seller", name: "Seller" });
      await first.ledger.ensureAccount({ id: "bob", kind: "user", name: "Bob" });
      await linkAddress(first.ledger, { accountId: "bob", address: buyer });
      await linkAddress(first.ledger, { accountId: "seller", address: all[6].account.address });
      await first.skills.upsert({
        slug: "echo",
        name: "echo",
        priceMicros: 7_000n,
        sellerAccountId: "seller",
        backendUrl: `${backend.url}/echo`,
        timeoutMs: 2_000,
      });
      const { key } = await first.keys.create("bob");
      await chain.deposit("bob", 5n * USDC);
      await first.moneyPath!.indexer.poll();

      const settledFirst = await Promise.all(Array.from({ length: 100 }, () => call(first.url, key)));
      expect(settledFirst.every((s) => s === 200)).to.equal(true);
      expect(await first.moneyPath!.settler!.runOnce()).to.include({ batch: 1, calls: 100 });

      // A stream of calls to a slower backend, and the gateway goes away while they are in flight.
      await first.skills.upsert({
        slug: "echo",
        name: "echo",
        priceMicros: 7_000n,
        sellerAccountId: "seller",
        backendUrl: `${backend.url}/slow`,
        timeoutMs: 2_000,
      });
      const inFlight = Array.from({ length: 60 }, () => call(first.url, key));
      await backend.nextRequest("/slow");
      await first.close();
      const statuses = await Promise.all(inFlight);
      const answered = statuses.filter((s) => s === 200).length;
      // A restart drains: every call in flight when it began was answered, not cut off.
      expect(answered).to.equal(60);

      const second = await startGateway(config, { log: () => {}, chain: connection });
      try {
        // The deposit is not credited again, and whatever was in flight is either a
        // capture the first gateway made durable or a hold the restart released.
        expect((await second.moneyPath!.indexer.poll()).credited).to.equal(0);
        const holds = await second.db.all<{ status: string; n: bigint }>("SELECT status, COUNT(*) AS n FROM holds GROUP BY status");
        expect(
          holds.find((h) => h.status === "open"),
          "an open hold survived the restart",
        ).to.equal(undefined);
        const captured = Number(await second.db.value<bigint>("SELECT COUNT(*) FROM holds WHERE status = 'captured'"));
        expect(captured).to.be.at.least(100 + answered);
        expect((await second.ledger.balance("bob")).heldMicros).to.equal(0n);
        expect((await second.ledger.balance("bob")).availableMicros).to.equal(5n * USDC - BigInt(captured) * 7_000n);

        await second.skills.upsert({
          slug: "echo",
          name: "echo",
          priceMicros: 7_000n,
          sellerAccountId: "seller",
          backendUrl: `${backend.url}/echo`,
          timeoutMs: 2_000,
        });
        const more = await Promise.all(Array.from({ length: 20 }, async () => call(second.url, (await second.keys.create("bob")).key)));
        expect(more.every((s) => s === 200)).to.equal(true);
        const run = await second.moneyPath!.settler!.runOnce();
        expect(run).to.include({ batch: 2, calls: captured - 100 + 20 });
        expect(await second.moneyPath!.settler!.runOnce()).to.include({ calls: 0 });

        expect(await chain.escrowBalance(buyer)).to.equal((await second.ledger.balance("bob")).availableMicros);
        const books = await reconcile({
          stores: settlementStores(second.db),
          publicClient: chain.publicClient,
          escrowAddress: chain.deployment.escrow,
          fromBlock: chain.deployment.deployBlock,
        });
        expect(books.differences).to.deep.equal([]);
        await assertBalanced(second.db);
      } finally {
        await second.close();
      }
    } finally {
      await backend.close();
      fs.rmSync(dir, { recursive: true, force: true });
      await chain.revert(snapshot);
    }
  });
});
