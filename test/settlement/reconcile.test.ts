import { expect } from "chai";
import hre from "hardhat";
import { getAddress } from "viem";
import { skillEscrowAbi } from "../../server/chain/abi";
import { reconcile, type ReconcileReturnType } from "../../server/settlement/reconcile";
import type { Settler } from "../../server/settlement/settler";
import { SettlementHaltedError } from "../../server/settlement/settlement-errors";
import { USDC, compileContracts } from "../helpers/chain";
import { batchFromReceipts, buildReceipt } from "../contracts/helpers/batch";
import { SettlementFixture, sellerId, startSettlementChain, userId, type SettlementChain } from "../helpers/settlement";
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
          name: "a settled call's fee moved to its seller",
          tamper: async (fx) => {
            await fx.db.run("UPDATE holds SET seller_amount = seller_amount + 1, fee_amount = fee_amount - 1 WHERE account_id = ?", [
              userId("alice"),
            ]);
          },
          expected: ["batch_mismatch", "earnings_mismatch"],
        },
        {
          name: "a settled call's price raised",
          tamper: async (fx) => {
            await fx.db.run("UPDATE holds SET amount = amount + 10, seller_amount = seller_amount + 10 WHERE account_id = ?", [
              userId("alice"),
            ]);
          },
          expected: ["batch_mismatch", "earnings_mismatch", "escrow_balance_mismatch"],
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

  it("refuses, in the schema, to move a settled call to another batch or to change a recorded batch", async () => {
    await settledWorld();
    const refusal = (sql: string) =>
      fx.db.run(sql).then(
        () => expect.fail(`${sql} was accepted`),
        (error: Error) => error.message,
      );
    expect(await refusal("UPDATE holds SET batch_number = NULL")).to.include("a hold already belongs to a settlement batch");
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
