import { expect } from "chai";
import type { Address } from "viem";
import type { Database } from "../../server/db/sql";
import { assertBalanced } from "../../server/ledger/invariants";
import type { Ledger } from "../../server/ledger/ledger";
import { VoucherSweepReorgError } from "../../server/settlement/voucher-sweep";
import type { Voucher, VoucherIssuer } from "../../server/settlement/vouchers";
import { VoucherStore } from "../../server/settlement/vouchers-store";
import { describeEachEngine } from "../helpers/engines";
import { makeLedger } from "../helpers/ledger";
import { DEFAULT_VOUCHER_LIMITS, offlineIssuer, stubSweepClient, voucherHolder } from "../helpers/vouchers";

const USDC = 1_000_000n;
const ALICE: Address = "0x00000000000000000000000000000000000a11ce";
/** The stub chain's block times: block n is 1,000,000 + 2n s (test/helpers/vouchers.ts). */
const timeOf = (block: bigint) => 1_000_000n + 2n * block;

/**
 * The sweep of issue 23: it read the chain once per open voucher, every 30 s, from a setInterval that did not wait
 * for the run before (about 14% of a core at 4,000 vouchers, runs overlapping past about 20,000). Now it reads the
 * escrow's VoucherRedeemed logs by block range, and runs one at a time.
 */
describeEachEngine("the voucher sweep", (engine) => {
  let db: Database;
  let ledger: Ledger;
  let store: VoucherStore;
  let issuer: VoucherIssuer;

  beforeEach(async () => {
    ({ db, ledger } = await makeLedger(engine));
    store = new VoucherStore(db);
    await voucherHolder(ledger, "alice", 1_000n * USDC, ALICE);
    issuer = offlineIssuer(ledger, { limits: { ...DEFAULT_VOUCHER_LIMITS, openPerAccountMax: 1_000, issuedPerHourMax: 1_000 } });
  });

  /** A voucher of `micros` whose deadline is 600 s after block `atBlock`'s time. */
  const issue = async (micros: bigint, atBlock = 0n): Promise<Voucher> => {
    const result = await issuer.issue("alice", { amountMicros: micros, nowSec: Number(timeOf(atBlock)) });
    if (!result.ok) throw new Error(result.reason);
    return result.issued.voucher;
  };
  /** The first block whose time is past `voucher`'s deadline. */
  const pastDeadline = (voucher: Voucher) => (voucher.deadline - timeOf(0n)) / 2n + 1n;
  const statusOf = async (voucher: Voucher) => (await store.ofAccount("alice", 1_000)).find((v) => v.nonce === voucher.nonce)?.status;
  const redemption = (voucher: Voucher, blockNumber: bigint) => ({
    blockNumber,
    account: voucher.account,
    nonce: voucher.nonce,
    amount: voucher.amount,
  });

  for (const open of [1, 100]) {
    it(`reads the chain the same 3 times with ${open} voucher(s) open, never once per voucher`, async () => {
      for (let i = 0; i < open; i++) await issue(USDC / 100n);
      const chain = stubSweepClient({ head: 100n });

      expect(await issuer.sweep(chain.client)).to.deep.equal({ redeemed: 0, returned: 0 });

      expect(chain.calls.map((c) => c.method)).to.deep.equal(["getBlockNumber", "getBlock", "getLogs"]);
    });
  }

  it("reads the redemption logs in chunks of 10,000 blocks from the deploy block, then from where it stopped, never twice", async () => {
    await issue(USDC, 26_000n);
    const sweepFrom1000 = offlineIssuer(ledger, { deployBlock: 1_000n });
    const chain = stubSweepClient({ head: 26_000n });
    const ranges = () => chain.calls.filter((c) => c.method === "getLogs").map((c) => [c.fromBlock, c.toBlock]);

    await sweepFrom1000.sweep(chain.client);
    expect(ranges()).to.deep.equal([
      [1_000n, 10_999n],
      [11_000n, 20_999n],
      [21_000n, 26_000n],
    ]);

    chain.reset();
    chain.state.head = 26_005n;
    await sweepFrom1000.sweep(chain.client);
    expect(ranges()).to.deep.equal([[26_001n, 26_005n]]);

    chain.reset();
    await sweepFrom1000.sweep(chain.client);
    expect(ranges(), "nothing new was mined").to.deep.equal([]);
    expect(chain.count()).to.equal(2);
  });

  it("marks a redeemed voucher redeemed and gives back one that expired unredeemed, once", async () => {
    const redeemed = await issue(3n * USDC);
    const expired = await issue(4n * USDC);
    const chain = stubSweepClient({ head: pastDeadline(expired), redemptions: [redemption(redeemed, 50n)] });
    expect(await ledger.balanceOf("alice", "available")).to.equal(993n * USDC);

    expect(await issuer.sweep(chain.client)).to.deep.equal({ redeemed: 1, returned: 1 });

    expect([await statusOf(redeemed), await statusOf(expired)]).to.deep.equal(["redeemed", "returned"]);
    expect(await ledger.balanceOf("alice", "available")).to.equal(997n * USDC);
    expect(await issuer.sweep(chain.client)).to.deep.equal({ redeemed: 0, returned: 0 });
    expect(await ledger.balanceOf("alice", "available")).to.equal(997n * USDC);
    await assertBalanced(db);
  });

  it("gives a voucher back only once a block past its deadline is read at the confirmation depth", async () => {
    const deep = offlineIssuer(ledger, { confirmations: 5 });
    const voucher = await issue(USDC);
    const chain = stubSweepClient({ head: pastDeadline(voucher) });

    expect(await deep.sweep(chain.client), "the head is past the deadline, the block 5 below it is not").to.deep.equal({
      redeemed: 0,
      returned: 0,
    });
    chain.state.head += 5n;
    expect(await deep.sweep(chain.client)).to.deep.equal({ redeemed: 0, returned: 1 });
  });

  it("reads no log while no voucher is open, yet sees the redemption of one issued after", async () => {
    const chain = stubSweepClient({ head: 1_000_000n });
    await issuer.sweep(chain.client);
    expect(
      chain.calls.map((c) => c.method),
      "an idle gateway reads no old blocks",
    ).to.deep.equal(["getBlockNumber", "getBlock"]);

    const voucher = await issue(USDC, 1_000_000n);
    chain.state.head = 1_000_010n;
    chain.state.redemptions.push(redemption(voucher, 1_000_003n));
    expect(await issuer.sweep(chain.client)).to.deep.equal({ redeemed: 1, returned: 0 });
    expect(await statusOf(voucher)).to.equal("redeemed");
  });

  it("stops, giving nothing back, when the chain no longer has the block it read last", async () => {
    const voucher = await issue(USDC);
    const chain = stubSweepClient({ head: 10n });
    await issuer.sweep(chain.client);
    const replaced = chain.state.hashOf;
    chain.state.hashOf = (block) => (block === 10n ? `0x${"ee".repeat(32)}` : replaced(block));
    chain.state.head = pastDeadline(voucher);

    const error = await issuer.sweep(chain.client).catch((e: unknown) => e);

    expect(error).to.be.instanceOf(VoucherSweepReorgError);
    expect((error as Error).message).to.include("block 10 was read as");
    expect(await statusOf(voucher)).to.equal("issued");
  });

  it("runs two overlapping sweeps one at a time", async () => {
    const voucher = await issue(USDC);
    // Each call takes longer than the database takes to answer, so that two runs started together would overlap.
    const chain = stubSweepClient({ head: pastDeadline(voucher), delayMs: 50 });

    const results = await Promise.all([issuer.sweep(chain.client), issuer.sweep(chain.client)]);

    expect(chain.maxInFlight, "calls of the two sweeps in flight at once").to.equal(1);
    expect(results).to.deep.equal([
      { redeemed: 0, returned: 1 },
      { redeemed: 0, returned: 0 },
    ]);
  });

  it("never starts a run of its loop while the last one is still running", async () => {
    await issue(USDC);
    const chain = stubSweepClient({ head: 10n, delayMs: 20 });

    issuer.sweeper.start(chain.client, 1);
    await new Promise((resolve) => setTimeout(resolve, 300));
    await issuer.sweeper.stop();

    expect(chain.count("getBlockNumber"), "runs").to.be.greaterThan(1);
    expect(chain.maxInFlight).to.equal(1);
  });

  it("gives an expired voucher back once when two sweepers on one database run at the same time", async () => {
    const voucher = await issue(4n * USDC);
    const other = offlineIssuer(ledger);
    const chain = stubSweepClient({ head: pastDeadline(voucher), delayMs: 2 });

    const results = await Promise.all([issuer.sweep(chain.client), other.sweep(chain.client)]);

    expect(results.map((r) => r.returned).sort()).to.deep.equal([0, 1]);
    expect(await ledger.balanceOf("alice", "available")).to.equal(1_000n * USDC);
    await assertBalanced(db);
  });
});
