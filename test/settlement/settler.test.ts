import { expect } from "chai";
import hre from "hardhat";
import { parseAbi } from "viem";
import { bytes32ToCallId } from "../../server/settlement/batches";
import { SettlementHaltedError, SettlementSendError } from "../../server/settlement/settlement-errors";
import { assertBalanced } from "../../server/ledger/invariants";
import { USDC, compileContracts } from "../helpers/chain";
import { makeTempDir } from "../helpers/ledger";
import {
  faultyWallet,
  SettlementFixture,
  sellerId,
  startSettlementChain,
  userId,
  waitUntil,
  type SettlementChain,
} from "../helpers/settlement";

const VERIFY_ABI = parseAbi([
  "function verifyReceipt(uint256 batch, bytes32 callId, address account, address seller, uint256 amount, uint256 fee, bytes32[] proof) view returns (bool)",
  "function lastBatchNumber() view returns (uint256)",
]);

const batchRow = (fx: SettlementFixture, number: number) =>
  fx.db.one<{ number: bigint; status: string; call_count: bigint; total_debits: bigint; platform_fee: bigint; tx_hash: string | null }>(
    "SELECT number, status, call_count, total_debits, platform_fee, tx_hash FROM settlement_batches WHERE number = ?",
    [number],
  );

const unbatched = async (fx: SettlementFixture) =>
  Number(await fx.db.value<bigint>("SELECT COUNT(*) FROM holds WHERE status = 'captured' AND batch_number IS NULL"));

describe("server/settlement/settler: Settler", function () {
  let chain: SettlementChain;
  let untouched: string;
  let clean: string;
  let fx: SettlementFixture;
  let dir: ReturnType<typeof makeTempDir>;

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
    dir = makeTempDir();
    fx = await SettlementFixture.open(chain, dir.file("ledger.db"));
  });

  afterEach(async () => {
    await fx.close();
    dir.remove();
    await chain.setAutomine(true);
    await chain.revert(clean);
    clean = await chain.snapshot();
  });

  it("settles a batch exactly: on-chain balances and earnings match the ledger to the base unit", async () => {
    await fx.addUser("alice", 10n * USDC);
    await fx.addSeller("acme");
    const prices = [1_000_000n, 333_333n, 7n, 1n, 250_001n];
    const callIds: string[] = [];
    for (const price of prices) callIds.push(await fx.pay("alice", "acme", price));
    const spent = prices.reduce((a, b) => a + b, 0n);
    const fees = prices.reduce((a, p) => a + (p * 1000n) / 10_000n, 0n);

    const result = await fx.settler().runOnce();

    expect(result).to.deep.equal({ batch: 1, calls: callIds.length, callsWithoutAddress: 0 });
    expect(await chain.escrowBalance(chain.address("alice"))).to.equal(10n * USDC - spent);
    expect((await fx.ledger.balance(userId("alice"))).availableMicros).to.equal(10n * USDC - spent);
    expect(await chain.earnings(chain.sellerAddress("acme"))).to.equal(await fx.ledger.balanceOf(sellerId("acme"), "earned"));
    expect(await chain.earnings(chain.treasuryWallet.account.address)).to.equal(fees);
    expect(await fx.ledger.balanceOf("platform", "fees")).to.equal(fees);
    const row = (await batchRow(fx, 1))!;
    expect(row).to.deep.include({ status: "settled", call_count: 5n, total_debits: spent, platform_fee: fees });
    expect(row.tx_hash).to.equal((await chain.settledBatches())[0].transactionHash);
    expect(await unbatched(fx)).to.equal(0);
    await assertBalanced(fx.db);
  });

  it("splits 90/10 across several users and sellers, oldest calls first, in batches of maxCallsPerBatch", async () => {
    await fx.addUser("alice", 20n * USDC);
    await fx.addUser("bob", 20n * USDC);
    await fx.addUser("carol", 20n * USDC);
    await fx.addSeller("acme");
    await fx.addSeller("globex");
    // A fixed pseudo-random sequence of 40 calls (seed 7), prices from 1 base unit to 0.5 USDC.
    let seed = 7;
    const next = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31);
    const users = ["alice", "bob", "carol"] as const;
    const sellers = ["acme", "globex"] as const;
    const paid: { user: (typeof users)[number]; seller: (typeof sellers)[number]; price: bigint }[] = [];
    for (let i = 0; i < 40; i++) {
      const call = { user: users[next() % 3], seller: sellers[next() % 2], price: BigInt(1 + (next() % 500_000)) };
      await fx.pay(call.user, call.seller, call.price);
      paid.push(call);
    }
    const settler = fx.settler({ maxCallsPerBatch: 15 });

    const results = [await settler.runOnce(), await settler.runOnce(), await settler.runOnce(), await settler.runOnce()];

    expect(results.map((r) => [r.batch, r.calls])).to.deep.equal([
      [1, 15],
      [2, 15],
      [3, 10],
      [undefined, 0],
    ]);
    const batchOf = (await fx.db.all<{ batch_number: bigint }>("SELECT batch_number FROM holds ORDER BY closed_at, id")).map(
      (h) => h.batch_number,
    );
    expect(batchOf).to.deep.equal([...Array(15).fill(1n), ...Array(15).fill(2n), ...Array(10).fill(3n)]);
    for (const user of users) {
      const spent = paid.filter((c) => c.user === user).reduce((a, c) => a + c.price, 0n);
      expect(await chain.escrowBalance(chain.address(user)), user).to.equal(20n * USDC - spent);
    }
    let fees = 0n;
    for (const seller of sellers) {
      const share = paid.filter((c) => c.seller === seller).reduce((a, c) => a + c.price - (c.price * 1000n) / 10_000n, 0n);
      expect(await chain.earnings(chain.sellerAddress(seller)), seller).to.equal(share);
      expect(await fx.ledger.balanceOf(sellerId(seller), "earned")).to.equal(share);
    }
    for (const c of paid) fees += (c.price * 1000n) / 10_000n;
    expect(await chain.earnings(chain.treasuryWallet.account.address)).to.equal(fees);
    expect(settler.lastReconciliation).to.deep.include({ ok: true, lastBatchNumber: 3, batchesChecked: 3 });
  });

  it("gives every settled call a receipt whose Merkle proof verifies on-chain, and says why a call has none", async () => {
    await fx.addUser("alice", 5n * USDC);
    await fx.addUser("bob", 5n * USDC);
    await fx.addSeller("acme");
    await fx.addSeller("globex");
    const settler = fx.settler();
    const callIds = [
      await fx.pay("alice", "acme", 100_000n),
      await fx.pay("bob", "globex", 42n),
      await fx.pay("alice", "globex", 999_999n),
    ];
    const failed = await fx.failedCall("bob", "acme");
    // A hold captured through the Ledger API alone (no call row) is named by its hold id.
    const charge = { chargedMicros: 30n, sellerMicros: 27n, feeMicros: 3n };
    const held = await fx.ledger.hold({ accountId: userId("bob"), sellerAccountId: sellerId("acme"), skillId: "skill:acme", charge });
    if (!held.ok) throw new Error(held.reason);
    await fx.ledger.capture(held.hold.id);
    callIds.push(held.hold.id);
    expect(await settler.receiptFor(callIds[0])).to.deep.equal({ status: "unsettled" });
    await settler.runOnce();
    const late = await fx.pay("bob", "acme", 5n);

    for (const callId of callIds) {
      const found = await settler.receiptFor(callId);
      if (found.status !== "settled") throw new Error(`expected a settled receipt, got ${found.status}`);
      expect(bytes32ToCallId(found.receipt.callId)).to.equal(callId);
      const { callId: id, account, seller, amount, platformFee } = found.receipt;
      const verified = await chain.publicClient.readContract({
        address: chain.deployment.escrow,
        abi: VERIFY_ABI,
        functionName: "verifyReceipt",
        args: [BigInt(found.batchNumber), id, account, seller, amount, platformFee, found.proof],
      });
      expect(verified, callId).to.equal(true);
      const forged = await chain.publicClient.readContract({
        address: chain.deployment.escrow,
        abi: VERIFY_ABI,
        functionName: "verifyReceipt",
        args: [BigInt(found.batchNumber), id, account, seller, amount + 1n, platformFee, found.proof],
      });
      expect(forged, `${callId} with a changed amount`).to.equal(false);
    }
    expect(await settler.receiptFor(failed)).to.deep.equal({ status: "not_charged" });
    expect(await settler.receiptFor(late)).to.deep.equal({ status: "unsettled" });
    expect(await settler.receiptFor("0190a5a0-0000-7000-8000-000000000000")).to.deep.equal({ status: "unknown_call" });
    const heldByCall = (await fx.db.value<string>("SELECT hold_id FROM calls WHERE id = ?", [callIds[0]]))!;
    expect(await settler.receiptFor(heldByCall), "a hold id where a call id is due").to.deep.equal({ status: "unknown_call" });
  });

  it("leaves the calls of an account without a linked address unbatched, says so, and settles them once it is linked", async () => {
    await fx.addUser("alice", 5n * USDC);
    await fx.addSeller("acme");
    await fx.addSeller("globex", false);
    await fx.pay("alice", "acme", 1_000n);
    await fx.pay("alice", "globex", 2_000n);
    await fx.pay("alice", "globex", 3_000n);
    const settler = fx.settler();

    expect(await settler.runOnce()).to.deep.equal({ batch: 1, calls: 1, callsWithoutAddress: 2 });
    expect(fx.logged.join("\n")).to.include("2 paid call(s) wait for a linked address and are not settled: seller:globex (2 call(s))");
    expect(await settler.runOnce()).to.deep.equal({ calls: 0, callsWithoutAddress: 2 });
    expect(await unbatched(fx)).to.equal(2);

    await fx.link(sellerId("globex"), chain.sellerAddress("globex"));
    expect(await settler.runOnce()).to.deep.equal({ batch: 2, calls: 2, callsWithoutAddress: 0 });
    expect(await chain.earnings(chain.sellerAddress("globex"))).to.equal(4_500n);
  });

  describe("exactly once across crashes", () => {
    it("sends a batch recorded before a crash, once, after the restart, and nothing paid later in it", async () => {
      await fx.addUser("alice", 5n * USDC);
      await fx.addSeller("acme");
      await fx.pay("alice", "acme", 10_000n);
      await fx.pay("alice", "acme", 20_000n);
      const dying = faultyWallet(chain.settlerWallet, ["fail_before_send"]);

      const failure = await fx
        .settler({ walletClient: dying })
        .runOnce()
        .catch((e: unknown) => e);
      expect(failure).to.be.instanceOf(SettlementSendError);
      expect(await batchRow(fx, 1)).to.deep.include({ status: "pending", call_count: 2n });
      expect(dying.sent).to.have.length(0);
      await fx.pay("alice", "acme", 40_000n);
      await fx.db.durable();

      // The process dies; a new one opens the same ledger file.
      const file = fx.file;
      await fx.crash();
      fx = await SettlementFixture.open(chain, file);
      const wallet = faultyWallet(chain.settlerWallet, []);
      const settler = fx.settler({ walletClient: wallet });

      expect(await settler.runOnce()).to.deep.equal({ batch: 1, calls: 2, callsWithoutAddress: 0 });
      expect(wallet.sent).to.have.length(1);
      expect(await chain.escrowBalance(chain.address("alice"))).to.equal(5n * USDC - 30_000n);
      expect(await settler.runOnce()).to.deep.include({ batch: 2, calls: 1 });
      expect(await settler.runOnce()).to.deep.include({ calls: 0 });
      expect((await chain.settledBatches()).map((b) => b.batchNumber)).to.deep.equal([1n, 2n]);
      expect(wallet.sent).to.have.length(2);
      expect(await chain.escrowBalance(chain.address("alice"))).to.equal(5n * USDC - 70_000n);
    });

    it("marks a batch the chain already has after a crash between sending and marking, and does not send it again", async () => {
      await fx.addUser("alice", 5n * USDC);
      await fx.addSeller("acme");
      await fx.pay("alice", "acme", 10_000n);
      const dying = faultyWallet(chain.settlerWallet, ["lose_answer"]);

      const failure = await fx
        .settler({ walletClient: dying })
        .runOnce()
        .catch((e: unknown) => e);
      expect(failure).to.be.instanceOf(SettlementSendError);
      expect(dying.sent).to.have.length(1);
      expect(await batchRow(fx, 1)).to.deep.include({ status: "pending", tx_hash: null });

      const file = fx.file;
      await fx.crash();
      fx = await SettlementFixture.open(chain, file);
      const wallet = faultyWallet(chain.settlerWallet, []);

      expect(await fx.settler({ walletClient: wallet }).runOnce()).to.deep.equal({ batch: 1, calls: 1, callsWithoutAddress: 0 });
      expect(wallet.sent).to.have.length(0);
      expect(await batchRow(fx, 1)).to.deep.include({ status: "settled", tx_hash: dying.sent[0] });
      expect(await chain.settledBatches()).to.deep.equal([{ batchNumber: 1n, transactionHash: dying.sent[0] }]);
      expect(await chain.escrowBalance(chain.address("alice"))).to.equal(5n * USDC - 10_000n);
      expect(fx.logged.join("\n")).to.include(`batch 1 was already on-chain (${dying.sent[0]}); marked settled`);
    });

    it("replaces a stuck settlement transaction (same nonce, higher fee) instead of queueing a second one", async () => {
      await fx.addUser("alice", 5n * USDC);
      await fx.addSeller("acme");
      await fx.pay("alice", "acme", 10_000n);
      const wallet = faultyWallet(chain.settlerWallet, []);
      const settler = fx.settler({ walletClient: wallet, receiptTimeoutMs: 200 });
      await chain.setAutomine(false);

      expect(await settler.runOnce().catch((e: unknown) => e)).to.be.instanceOf(SettlementSendError);
      const first = await chain.publicClient.getTransaction({ hash: wallet.sent[0] });
      expect(first.blockNumber).to.equal(null);
      expect(await settler.runOnce().catch((e: unknown) => e)).to.be.instanceOf(SettlementSendError);
      expect(wallet.sent).to.have.length(2);
      const second = await chain.publicClient.getTransaction({ hash: wallet.sent[1] });
      expect(second.nonce).to.equal(first.nonce);
      expect(second.maxFeePerGas).to.equal(first.maxFeePerGas! * 2n);
      expect(fx.logged.join("\n")).to.include(`batch 1: replacing stuck transaction ${wallet.sent[0]}`);
      await chain.mine(1);
      await chain.setAutomine(true);

      expect(await settler.runOnce()).to.deep.include({ batch: 1, calls: 1 });
      expect(await chain.settledBatches()).to.deep.equal([{ batchNumber: 1n, transactionHash: wallet.sent[1] }]);
      expect(await batchRow(fx, 1)).to.deep.include({ status: "settled", tx_hash: wallet.sent[1] });
    });
  });

  describe("failures", () => {
    it("retries with backoff while the RPC is unreachable, and settles the batch once", async () => {
      await fx.addUser("alice", 5n * USDC);
      await fx.addSeller("acme");
      await fx.pay("alice", "acme", 10_000n);
      const wallet = faultyWallet(chain.settlerWallet, ["fail_before_send", "fail_before_send"]);
      const settler = fx.settler({ walletClient: wallet });
      chain.failNextRequests(3);

      settler.start(60_000);
      await waitUntil(async () => (await batchRow(fx, 1))?.status === "settled", 5_000, "batch 1 to settle");
      await settler.stop();

      const failures = fx.logged.filter((m) => m.startsWith("settlement step failed"));
      expect(failures.map((m) => m.match(/\((\d+) in a row\), retrying in (\d+) ms/)?.slice(1))).to.deep.equal([
        ["1", "10"],
        ["2", "20"],
        ["3", "40"],
        ["4", "50"],
        ["5", "50"],
      ]);
      expect(wallet.sent).to.have.length(1);
      expect(await chain.settledBatches()).to.have.length(1);
    });

    it("holds back an account whose calls exceed what the escrow holds for it, loudly, and settles everyone else", async () => {
      await fx.addUser("alice", 1n * USDC);
      await fx.addUser("bob", 5n * USDC);
      await fx.addSeller("acme");
      // Development credit is not money in the escrow: spending it makes a debit the chain would refuse,
      // and one such debit used to make the escrow refuse the whole batch.
      await fx.ledger.credit(userId("alice"), 5n * USDC, "dev_credit");
      await fx.pay("alice", "acme", 3n * USDC);
      await fx.pay("bob", "acme", 2n * USDC);
      const settler = fx.settler();

      expect(await settler.runOnce()).to.deep.include({ batch: 1, calls: 1 });
      expect(fx.logged.join("\n")).to.include(`ESCROW SHORT: paid calls of ${userId("alice")}`);
      expect(await batchRow(fx, 1)).to.deep.include({ status: "settled", call_count: 1n, total_debits: 2n * USDC });
      expect(await unbatched(fx)).to.equal(1);
      expect(settler.fatalError).to.equal(undefined);
      expect(await settler.runOnce()).to.deep.include({ calls: 0 });
      expect(
        await chain.publicClient.readContract({ address: chain.deployment.escrow, abi: VERIFY_ABI, functionName: "lastBatchNumber" }),
      ).to.equal(1n);
    });

    it("halts on a key without SETTLER_ROLE, and a settler with the right key sends the same batch", async () => {
      await fx.addUser("alice", 5n * USDC);
      await fx.addSeller("acme");
      await fx.pay("alice", "acme", 10_000n);
      const error = await fx
        .settler({ walletClient: chain.treasuryWallet })
        .runOnce()
        .catch((e: unknown) => e);
      expect(error).to.be.instanceOf(SettlementHaltedError);
      expect((error as SettlementHaltedError).details.revert?.errorName).to.equal("AccessControlUnauthorizedAccount");

      expect(await fx.settler().runOnce()).to.deep.include({ batch: 1, calls: 1 });
    });
  });

  it("settles early once triggerCalls calls wait, long before the interval", async () => {
    await fx.addUser("alice", 5n * USDC);
    await fx.addSeller("acme");
    const settler = fx.settler({ triggerCalls: 3, triggerCheckMs: 5 });
    settler.start(60_000);
    await waitUntil(async () => settler.lastReconciliation !== undefined, 5_000, "the first step");
    // The first step reconciles before it looks for calls: let it finish, or it could take
    // the calls paid below into its own batch.
    await new Promise((resolve) => setTimeout(resolve, 250));
    await fx.pay("alice", "acme", 1_000n);
    await fx.pay("alice", "acme", 1_000n);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await batchRow(fx, 1)).to.equal(undefined);
    await fx.pay("alice", "acme", 1_000n);
    await waitUntil(async () => (await batchRow(fx, 1))?.status === "settled", 10_000, "the triggered batch");
    expect((await batchRow(fx, 1))?.call_count).to.equal(3n);
  });
});
