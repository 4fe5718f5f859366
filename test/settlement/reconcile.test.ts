import { expect } from "chai";
import hre from "hardhat";
import { getAddress } from "viem";
import { skillEscrowAbi } from "../../server/chain/abi";
import { ReconcileMemory, reconcile, type ReconcileParameters, type ReconcileReturnType } from "../../server/settlement/reconcile";
import { BatchesStore } from "../../server/settlement/batches-store";
import type { Settler } from "../../server/settlement/settler";
import { SettlementHaltedError } from "../../server/settlement/settlement-errors";
import { USDC, compileContracts } from "../helpers/chain";
import { batchFromReceipts, buildReceipt } from "../contracts/helpers/batch";
import { SettlementFixture, faultyWallet, sellerId, startSettlementChain, userId, type SettlementChain } from "../helpers/settlement";
import { settlementStores } from "../../server/settlement/store";

describe("server/settlement/reconcile: reconcile", function () {
  let chain: SettlementChain;
  let untouched: string;
  let clean: string;
  let fx: SettlementFixture;

  const check = () =>
    reconcile({
      stores: settlementStores(fx.db),
      publicClient: chain.publicClient,
      escrowAddress: chain.deployment.escrow,
      fromBlock: chain.deployment.deployBlock,
    });
  const codes = (result: ReconcileReturnType) => result.differences.map((d) => d.code).sort();

  /** Runs `tamper` with the schema's refusal to change a batched hold lifted (its trigger dropped from the file). */
  async function withoutFinalHolds(fx: SettlementFixture, tamper: () => Promise<unknown>): Promise<void> {
    await fx.db.run("DROP TRIGGER holds_batched_final");
    await tamper();
  }

  /** Moves a pair's settled credits by one, past the schema's refusal (its trigger dropped from the file). */
  async function driftTotals(fx: SettlementFixture, accountId: string): Promise<void> {
    await fx.db.run("DROP TRIGGER settled_pair_totals_grow");
    expect(await fx.db.run("UPDATE settled_pair_totals SET credits = credits + 1 WHERE account_id = ?", [accountId])).to.be.greaterThan(0);
  }
  const alice = () => getAddress(chain.address("alice"));
  const acme = () => chain.sellerAddress("acme");

  /** Alice and Bob deposit, pay Acme and Globex, and one batch settles. */
  async function settledWorld(): Promise<Settler> {
    await fx.addUser("alice", 5n * USDC);
    await fx.addUser("bob", 3n * USDC);
    await fx.addSeller("acme");
    await fx.addSeller("globex");
    await fx.pay("alice", "acme", 1_234_567n);
    await fx.pay("bob", "acme", 10n);
    await fx.pay("bob", "globex", 500_000n);
    const settler = fx.settler();
    expect(await settler.runOnce()).to.deep.include({ batch: 1, calls: 3 });
    return settler;
  }

  before(async function () {
    this.timeout(60_000);
    await compileContracts();
    untouched = (await hre.network.provider.request({ method: "evm_snapshot", params: [] })) as string;
    chain = await startSettlementChain();
    clean = await chain.snapshot();
  });

  after(async () => {
    await hre.network.provider.request({ method: "evm_revert", params: [untouched] });
  });

  beforeEach(async () => {
    fx = await SettlementFixture.open(chain);
  });

  afterEach(async () => {
    await fx.close();
    await chain.revert(clean);
    clean = await chain.snapshot();
  });

  it("is clean after settlement, with what sellers and the treasury claimed counted", async () => {
    await settledWorld();
    await chain.claim(chain.sellerWallet("acme"));
    await chain.claim(chain.treasuryWallet);
    expect(await chain.earnings(acme())).to.equal(0n);

    const result = await check();

    expect(result.differences).to.deep.equal([]);
    expect(result).to.deep.include({ ok: true, lastBatchNumber: 1, batchesChecked: 1 });
    // alice, bob, acme, globex and the treasury.
    expect(result.addressesChecked).to.equal(5);
  });

  it("compares against settled batches only: paid calls not yet settled are no difference", async () => {
    await settledWorld();
    await fx.pay("alice", "globex", 700_000n);
    expect((await check()).differences).to.deep.equal([]);
  });

  it("counts a deposit the indexer has not reached yet as on-chain, and a deposit no indexer recorded as a difference", async () => {
    await settledWorld();
    await chain.deposit("alice", 2n * USDC); // mined, not yet indexed
    expect((await check()).differences).to.deep.equal([]);

    // Without an indexer progress row nothing says the deposit is merely not indexed yet: the ledger lacks it.
    await fx.db.run("DELETE FROM indexer_state");
    const result = await check();
    expect(codes(result)).to.deep.equal(["escrow_balance_mismatch"]);
    expect(result.differences[0]).to.deep.include({
      address: alice(),
      chainMicros: 7n * USDC - 1_234_567n,
      ledgerMicros: 5n * USDC - 1_234_567n,
    });
  });

  describe("reports the books apart", () => {
    const tampers: { name: string; tamper: (fx: SettlementFixture, chain: SettlementChain) => Promise<void> | void; expected: string[] }[] =
      [
        {
          name: "a deposit entry with no money in the escrow behind it",
          tamper: (fx) => fx.ledger.credit(userId("alice"), 1n, "deposit", "made up"),
          expected: ["escrow_balance_mismatch"],
        },
        {
          name: "a settled call's fee moved to its seller (past the schema's refusal, as a hand in the file could)",
          tamper: async (fx) => {
            await withoutFinalHolds(fx, () =>
              fx.db.run("UPDATE holds SET seller_amount = seller_amount + 1, fee_amount = fee_amount - 1 WHERE account_id = ?", [
                userId("alice"),
              ]),
            );
          },
          // The batch's fees, the settled totals of alice and acme, acme's earnings.
          expected: ["batch_mismatch", "batch_mismatch", "earnings_mismatch"],
        },
        {
          name: "a settled call's price raised (past the schema's refusal)",
          tamper: async (fx) => {
            await withoutFinalHolds(fx, () =>
              fx.db.run("UPDATE holds SET amount = amount + 10, seller_amount = seller_amount + 10 WHERE account_id = ?", [
                userId("alice"),
              ]),
            );
          },
          expected: ["batch_mismatch", "batch_mismatch", "earnings_mismatch", "escrow_balance_mismatch"],
        },
        {
          name: "the settled totals of a payer and a seller changed",
          tamper: (fx) => driftTotals(fx, userId("alice")),
          expected: ["batch_mismatch"],
        },
        {
          name: "a batch marked settled that the chain never received",
          tamper: async (fx) => {
            await fx.db.run(
              `INSERT INTO settlement_batches (number, status, receipts_root, call_count, total_debits, platform_fee, recorded_at_block, created_at, settled_at)
               VALUES (2, 'settled', ?, 1, 1, 0, 0, 0, 0)`,
              [`0x${"ab".repeat(32)}`],
            );
          },
          expected: ["batch_not_on_chain"],
        },
        {
          name: "a batch on the chain that the ledger never recorded",
          tamper: async (_fx, chain) => {
            const { batch } = batchFromReceipts(2n, [buildReceipt(0, chain.address("alice"), chain.sellerAddress("acme"), 1_000n)]);
            const hash = await chain.settlerWallet.writeContract({
              address: chain.deployment.escrow,
              abi: skillEscrowAbi,
              functionName: "settle",
              args: [batch],
              account: chain.settlerWallet.account,
              chain: chain.settlerWallet.chain,
            });
            expect((await chain.receipt(hash)).status).to.equal("success");
          },
          expected: ["batch_not_in_ledger", "earnings_mismatch", "earnings_mismatch", "escrow_balance_mismatch"],
        },
      ];
    for (const { name, tamper, expected } of tampers) {
      it(`when ${name}`, async () => {
        await settledWorld();
        await tamper(fx, chain);
        const result = await check();
        expect(result.ok).to.equal(false);
        expect(codes(result)).to.deep.equal(expected);
      });
    }

    it("with the amounts and accounts a person needs to act", async () => {
      await settledWorld();
      await fx.ledger.credit(userId("alice"), 1n, "deposit", "made up");
      const [difference] = (await check()).differences;
      expect(difference).to.deep.include({
        code: "escrow_balance_mismatch",
        address: alice(),
        accountIds: [userId("alice")],
        ledgerMicros: 5n * USDC - 1_234_567n + 1n,
        chainMicros: 5n * USDC - 1_234_567n,
      });
      expect(difference.detail).to.include(
        `the escrow holds ${5n * USDC - 1_234_567n}, the ledger's settled view says ${5n * USDC - 1_234_567n + 1n}`,
      );
    });
  });

  describe("with a memory of what it checked (the settler's, after each batch)", () => {
    /** The reconcile store, counting which batches' calls are summed and whether every settled call is read. */
    function counted() {
      const shared = settlementStores(fx.db);
      /** batchSums's batches, and the passes over every settled call (settledPerAccount, settledPairSums). */
      const seen = { batchSums: [] as number[], everyCall: 0 };
      // Its own object over the shared store (which the settlers and check() use too).
      const books = Object.create(shared.reconcile) as typeof shared.reconcile;
      const stores = { ...shared, reconcile: books };
      const batchSums = shared.reconcile.batchSums.bind(shared.reconcile);
      const settledPerAccount = shared.reconcile.settledPerAccount.bind(shared.reconcile);
      const settledPairSums = shared.reconcile.settledPairSums.bind(shared.reconcile);
      books.settledPairSums = (sql) => {
        seen.everyCall++;
        return settledPairSums(sql);
      };
      books.batchSums = (number, sql) => {
        seen.batchSums.push(Number(number));
        return batchSums(number, sql);
      };
      books.settledPerAccount = (last, sql) => {
        seen.everyCall++;
        return settledPerAccount(last, sql);
      };
      return { stores, seen };
    }
    /** The chain's client, noting the first block of each read of settled batches and claims. */
    function loggedReads() {
      const from: bigint[] = [];
      const client = {
        ...chain.publicClient,
        getLogs: ((args: { fromBlock: bigint; events?: { name: string }[] }) => {
          // Not the reads of deposits above the indexer's progress, nor of x402 settlements (from the deploy block).
          if (args.events?.some((e) => e.name === "BatchSettled")) from.push(args.fromBlock);
          return chain.publicClient.getLogs(args as never);
        }) as typeof chain.publicClient.getLogs,
      };
      return { client, from };
    }
    /** The settled world (and `emptyBlocks` mined after it), and a memory of its first clean pass. */
    async function rememberedWorld(emptyBlocks = 0) {
      await settledWorld();
      if (emptyBlocks > 0) await chain.mine(emptyBlocks);
      const memory = new ReconcileMemory();
      const { stores } = counted();
      memory.remember(await cleanPass(stores, memory));
      return { memory, stores };
    }
    /** A pass with the memory that must find nothing: what it checked. */
    async function cleanPass(stores: ReturnType<typeof settlementStores>, memory: ReconcileMemory) {
      const result = await checkWith(stores, memory);
      expect(result.differences).to.deep.equal([]);
      return result.checked;
    }
    const checkWith = (
      stores: ReturnType<typeof settlementStores>,
      memory: ReconcileMemory,
      options: Pick<ReconcileParameters, "publicClient" | "logChunkBlocks"> = { publicClient: chain.publicClient },
    ) =>
      reconcile({
        stores,
        escrowAddress: chain.deployment.escrow,
        fromBlock: chain.deployment.deployBlock,
        memory,
        ...options,
      });

    it("checks everything first, then only the batches new since, and finds what a full pass finds", async () => {
      await settledWorld();
      const memory = new ReconcileMemory();
      const { stores, seen } = counted();

      const first = await checkWith(stores, memory);
      expect(first.ok).to.equal(true);
      expect(first.checked).to.deep.include({ batches: [1], totals: true });
      memory.remember(first.checked);
      expect(seen).to.deep.equal({ batchSums: [1], everyCall: 2 });

      for (const n of [2, 3]) {
        await fx.pay("alice", "globex", 1_000n * BigInt(n));
        await fx.pay("bob", "acme", 7n);
        expect(await fx.settler().runOnce()).to.deep.include({ batch: n, calls: 2 });
        const next = await checkWith(stores, memory);
        expect(next.ok).to.equal(true);
        expect(next.checked).to.deep.include({ batches: [n], totals: false });
        memory.remember(next.checked);
        // The full pass a reconcile without a memory makes agrees with it.
        const full = await check();
        expect(full.differences).to.deep.equal([]);
        expect(next.addressesChecked).to.equal(full.addressesChecked);
        expect(next.batchesChecked).to.equal(full.batchesChecked);
      }
      expect(seen).to.deep.equal({ batchSums: [1, 2, 3], everyCall: 2 });
    });

    it("reads the escrow's events once: after the first pass, the blocks new since and a margin below the head", async () => {
      await settledWorld();
      const memory = new ReconcileMemory();
      const { client, from } = loggedReads();
      const pass = async () => {
        const result = await checkWith(settlementStores(fx.db), memory, { publicClient: client, logChunkBlocks: 50n });
        expect(result.differences).to.deep.equal([]);
        memory.remember(result.checked);
        return (await chain.publicClient.getBlockNumber({ cacheTime: 0 })) as bigint;
      };

      // A claim, then 200 empty blocks: the claim is read once and counted once ever after.
      await chain.claim(chain.sellerWallet("acme"));
      await chain.mine(200);
      let head = await pass();
      expect(from[0]).to.equal(chain.deployment.deployBlock);
      from.length = 0;
      await chain.mine(10);
      await fx.pay("alice", "globex", 5_000n);
      expect(await fx.settler().runOnce()).to.deep.include({ batch: 2 });
      await chain.claim(chain.sellerWallet("globex"));
      const before = head;
      head = await pass();
      // Only what the memory had not kept: from the margin below the last head on.
      expect(from[0]).to.equal(before - 64n + 1n);
      expect(from.every((block) => block > before - 64n)).to.equal(true);
      from.length = 0;
      await chain.mine(100);
      await pass();
      expect(from[0]).to.equal(head - 64n + 1n);
    });

    it("leaves out, as a full pass does, a batch the ledger marked settled that the chain does not have", async () => {
      const { memory, stores } = await rememberedWorld();
      // Batch 2 recorded with its call, never sent (the send fails), then marked settled by a hand in the file.
      await fx.pay("alice", "acme", 3_000n);
      await fx
        .settler({ walletClient: faultyWallet(chain.settlerWallet, ["fail_before_send"]) })
        .runOnce()
        .catch(() => undefined);
      expect(await new BatchesStore(fx.db).markSettled(2, null, Date.now())).to.equal(true);
      // The totals have batch 2's call; the chain's last batch is 1: it is taken away again, as a full pass never counts it.
      const incremental = await checkWith(stores, memory);
      // From the totals, not from every call.
      expect(incremental.checked).to.deep.include({ totals: false });
      const full = await check();
      expect(codes(full)).to.deep.equal(["batch_not_on_chain"]);
      expect(incremental.differences).to.deep.equal(full.differences);
    });

    it("reads the escrow's events from the deploy block again when the block it kept is no longer the chain's", async () => {
      const { memory, stores } = await rememberedWorld(100);
      expect(memory.events?.throughHash).to.be.a("string");
      const { client, from } = loggedReads();
      const pass = () => checkWith(stores, memory, { publicClient: client });
      // As after a reorganisation deeper than the margin: the kept block's hash is not the chain's.
      memory.events!.throughHash = `0x${"00".repeat(32)}`;
      await chain.mine(1);
      expect((await pass()).differences).to.deep.equal([]);
      expect(from[0]).to.equal(chain.deployment.deployBlock);
      // Remembered again, the next pass resumes above the deploy block...
      from.length = 0;
      memory.remember((await pass()).checked);
      from.length = 0;
      await chain.mine(1);
      await pass();
      expect(from[0]! > chain.deployment.deployBlock).to.equal(true);
      // ...unless the memory was read from another first block (another escrow's deployment): all again.
      memory.events = { ...memory.events!, fromBlock: chain.deployment.deployBlock + 1n };
      from.length = 0;
      await pass();
      expect(from[0]).to.equal(chain.deployment.deployBlock);
    });

    it("counts a batch the chain has and the ledger still has pending, and sees the books apart from the totals", async () => {
      const { memory, stores } = await rememberedWorld();

      // Batch 2 sent and mined, not yet marked: the chain counts it, the totals do not have it yet.
      await fx.pay("alice", "acme", 2_000n);
      const wallet = faultyWallet(chain.settlerWallet, ["lose_answer"]);
      await fx
        .settler({ walletClient: wallet })
        .runOnce()
        .then(
          () => expect.fail("the lost answer was not reported"),
          () => undefined,
        );
      expect(wallet.sent).to.have.length(1);
      await chain.receipt(wallet.sent[0]!);
      expect(await fx.db.value("SELECT status FROM settlement_batches WHERE number = 2")).to.equal("pending");
      expect(await chain.settledBatches()).to.have.length(2);
      const pending = await checkWith(stores, memory);
      expect(pending.differences).to.deep.equal([]);
      expect(pending.lastBatchNumber).to.equal(2);
      expect(pending.checked).to.deep.include({ batches: [2], totals: false });
      memory.remember(pending.checked);

      // Totals that drift from the calls: the chain's earnings tell, since the expectation now comes from them.
      await driftTotals(fx, userId("alice"));
      expect(codes(await checkWith(stores, memory))).to.deep.equal(["earnings_mismatch"]);
    });
  });

  it("refuses, in the schema, to move a settled call to another batch or to change a recorded batch", async () => {
    await settledWorld();
    const refusal = (sql: string) =>
      fx.db.run(sql).then(
        () => expect.fail(`${sql} was accepted`),
        (error: Error) => error.message,
      );
    expect(await refusal("UPDATE holds SET batch_number = NULL")).to.include("a hold already belongs to a settlement batch");
    expect(await refusal("UPDATE holds SET amount = amount + 1, seller_amount = seller_amount + 1 WHERE batch_number = 1")).to.include(
      "a hold in a settlement batch cannot change",
    );
    expect(await refusal("UPDATE holds SET status = 'released' WHERE batch_number = 1")).to.include(
      "a hold in a settlement batch cannot change",
    );
    expect(await refusal("DELETE FROM holds WHERE batch_number = 1")).to.include("a hold in a settlement batch cannot be deleted");
    expect(await refusal("UPDATE settlement_batches SET total_debits = total_debits + 1")).to.include(
      "a recorded settlement batch cannot change",
    );
    expect(await refusal("UPDATE settlement_batches SET status = 'pending', settled_at = NULL")).to.include(
      "a settled batch cannot become pending again",
    );
  });

  it("halts the settler after a batch that leaves the books apart, and a restarted settler sends nothing", async () => {
    const settler = await settledWorld();
    await fx.ledger.credit(userId("bob"), 7n, "deposit", "made up");
    await fx.pay("bob", "globex", 1_000n);

    const error = await settler.runOnce().catch((e: unknown) => e);

    expect(error).to.be.instanceOf(SettlementHaltedError);
    expect((error as SettlementHaltedError).code).to.equal("reconcile_failed");
    expect((error as SettlementHaltedError).details.differences?.map((d) => [d.code, d.accountIds])).to.deep.equal([
      ["escrow_balance_mismatch", [userId("bob")]],
    ]);
    expect(await fx.db.value("SELECT status FROM settlement_batches WHERE number = 2")).to.equal("settled");
    expect(await settler.runOnce().catch((e: unknown) => e)).to.equal(error);

    await fx.pay("bob", "globex", 2_000n);
    const restarted = await fx
      .settler()
      .runOnce()
      .catch((e: unknown) => e);
    expect((restarted as SettlementHaltedError).code).to.equal("reconcile_failed");
    expect(await fx.db.value("SELECT MAX(number) FROM settlement_batches")).to.equal(2n);
    expect(await chain.settledBatches()).to.have.length(2);
    expect(await fx.ledger.balanceOf(sellerId("globex"), "earned")).to.equal(450_000n + 900n + 1_800n);
  });
});
