import { expect } from "chai";
import hre from "hardhat";
import { DepositIndexer } from "../../server/settlement/indexer";
import { reconcile } from "../../server/settlement/reconcile";
import { computeCharge } from "../../server/ledger/fees";
import { assertBalanced, findViolations } from "../../server/ledger/invariants";
import { USDC, compileContracts } from "../helpers/chain";
import { exitActions, type ExitActions } from "../helpers/exits";
import { SettlementFixture, startSettlementChain, userId, type SettlementChain } from "../helpers/settlement";
import { settlementStores } from "../../server/settlement/store";

type ExitRow = { status: string; requested: bigint; frozen: bigint; shortfall: bigint; paid: bigint | null; uncovered: bigint };

describe("server/settlement/exits: the indexer freezes unilateral exits", function () {
  let chain: SettlementChain;
  let exits: ExitActions;
  let untouched: string;
  let clean: string;
  let fx: SettlementFixture;

  const alice = userId("alice");
  const available = () => fx.ledger.balanceOf(alice, "available");
  const held = () => fx.ledger.balanceOf(alice, "held");
  const exitRows = () =>
    fx.db.all<ExitRow>("SELECT status, requested, frozen, shortfall, paid, uncovered FROM chain_exits ORDER BY block_number, log_index");
  const lastExit = async () => (await exitRows()).at(-1)!;
  const check = () =>
    reconcile({
      stores: settlementStores(fx.db),
      publicClient: chain.publicClient,
      escrowAddress: chain.deployment.escrow,
      fromBlock: chain.deployment.deployBlock,
    });
  /** The books balance and the escrow agrees with the ledger's settled view. */
  async function expectConsistent(): Promise<void> {
    await assertBalanced(fx.db);
    expect((await check()).differences).to.deep.equal([]);
  }
  /** A call in flight: Alice's hold of `priceMicros` for Acme, still open. */
  const holdFor = (priceMicros: bigint) =>
    fx.ledger.hold({
      accountId: alice,
      sellerAccountId: "seller:acme",
      skillId: "skill:acme",
      charge: computeCharge(priceMicros, "included", 1000n),
    });
  const openHold = async (priceMicros: bigint) => {
    const result = await holdFor(priceMicros);
    if (!result.ok) throw new Error(`hold of ${priceMicros} refused`);
    return result.hold.id;
  };
  /** Captures a hold as the call path does: capture and its call row in one transaction (so it settles). */
  const capture = (holdId: string) =>
    fx.db.transaction(async (tx) => {
      expect((await fx.ledger.capture(holdId, tx)).ok).to.equal(true);
      await fx.calls.record(
        {
          id: holdId,
          accountId: alice,
          apiKeyId: "key:test",
          skillId: "skill:acme",
          endpoint: "call",
          httpStatus: 200,
          outcome: "success",
          chargedMicros: 0n,
          holdId,
          latencyUs: 1,
          createdAtMs: Date.now(),
        },
        tx,
      );
    });

  before(async function () {
    this.timeout(60_000);
    await compileContracts();
    untouched = (await hre.network.provider.request({ method: "evm_snapshot", params: [] })) as string;
    chain = await startSettlementChain();
    exits = await exitActions(chain);
    clean = await chain.snapshot();
  });

  after(async () => {
    await hre.network.provider.request({ method: "evm_revert", params: [untouched] });
  });

  beforeEach(async () => {
    fx = await SettlementFixture.open(chain);
    await fx.addUser("alice", 10n * USDC);
    await fx.addSeller("acme");
  });

  afterEach(async () => {
    await fx.close();
    await chain.revert(clean);
    clean = await chain.snapshot();
  });

  it("freezes the whole request at once when the available balance covers it", async () => {
    await fx.pay("alice", "acme", 1n * USDC);
    await openHold(2n * USDC);
    await exits.request("alice", 5n * USDC);

    expect((await fx.indexer.poll()).exits).to.equal(1);

    expect(await lastExit()).to.deep.include({ status: "pending", requested: 5n * USDC, frozen: 5n * USDC, shortfall: 0n });
    expect(await available()).to.equal(2n * USDC);
    expect(await held()).to.equal(2n * USDC);
    await expectConsistent();
  });

  it("freezes min(requested, available) and refuses every call while the rest is short", async () => {
    const inFlight = await openHold(2n * USDC);
    await exits.request("alice", 9n * USDC);
    await fx.indexer.poll();

    expect(await lastExit()).to.deep.include({ frozen: 8n * USDC, shortfall: 1n * USDC });
    expect(await available()).to.equal(0n);
    expect(await holdFor(1n)).to.deep.include({ ok: false, reason: "insufficient_balance", availableMicros: 0n });
    const withdrawal = await fx.ledger
      .withdrawByVoucher(alice, 1n, { address: "0x0000000000000000000000000000000000000001", nonce: 1n })
      .then(
        () => expect.fail("a withdrawal of frozen money was accepted"),
        (error: unknown) => error,
      );
    expect(withdrawal).to.be.instanceOf(RangeError);
    expect(await held()).to.equal(2n * USDC);
    expect((await fx.ledger.release(inFlight)).ok).to.equal(true);
    // The released call gave the freeze its missing unit first; the rest is spendable again.
    expect(await lastExit()).to.deep.include({ frozen: 9n * USDC, shortfall: 0n });
    expect(await available()).to.equal(1n * USDC);
    expect((await holdFor(1n * USDC)).ok).to.equal(true);
    expect((await holdFor(1n)).ok).to.equal(false);
    await expectConsistent();
  });

  it("gives a deposit made while the exit is short to the freeze first", async () => {
    await openHold(4n * USDC);
    await exits.request("alice", 10n * USDC);
    await fx.indexer.poll();
    expect(await lastExit()).to.deep.include({ frozen: 6n * USDC, shortfall: 4n * USDC });

    await fx.deposit("alice", 3n * USDC);

    expect(await lastExit()).to.deep.include({ frozen: 9n * USDC, shortfall: 1n * USDC });
    expect(await available()).to.equal(0n);
    await expectConsistent();
  });

  it("racing calls: released holds top the freeze up, captured ones are settled and the escrow pays exactly the freeze", async () => {
    const [a, b, c] = [await openHold(2n * USDC), await openHold(2n * USDC), await openHold(2n * USDC)];
    await exits.request("alice", 10n * USDC);
    await fx.indexer.poll();
    expect(await lastExit()).to.deep.include({ frozen: 4n * USDC, shortfall: 6n * USDC });

    await fx.ledger.release(a);
    await capture(b);
    await fx.ledger.release(c);
    expect(await lastExit()).to.deep.include({ frozen: 8n * USDC, shortfall: 2n * USDC });
    expect([await available(), await held()]).to.deep.equal([0n, 0n]);
    await expectConsistent();

    // The settler posts the captured call during the delay; the escrow then holds what the ledger froze.
    expect(await fx.settler().runOnce()).to.deep.include({ batch: 1, calls: 1 });
    expect(await chain.escrowBalance(chain.address("alice"))).to.equal(8n * USDC);
    await expectConsistent();

    const before = await exits.walletUsdc("alice");
    await exits.passExitDelay();
    await exits.complete("alice");
    expect((await exits.walletUsdc("alice")) - before).to.equal(8n * USDC);
    await expectConsistent(); // the completion is not indexed yet: reconcile reads it from the chain

    await fx.indexer.poll();
    expect(await lastExit()).to.deep.include({ status: "completed", paid: 8n * USDC, frozen: 8n * USDC, shortfall: 0n, uncovered: 0n });
    expect([await available(), await held()]).to.deep.equal([0n, 0n]);
    expect(await chain.escrowBalance(chain.address("alice"))).to.equal(0n);
    await expectConsistent();
  });

  /** A small seeded PRNG (mulberry32): the same seed replays the same race. */
  function random(seed: number): (n: number) => number {
    let t = seed >>> 0;
    return (n) => {
      t = (t + 0x6d2b79f5) >>> 0;
      let r = Math.imul(t ^ (t >>> 15), 1 | t);
      r = (r + Math.imul(r ^ (r >>> 7), 61 | r)) ^ r;
      return ((r ^ (r >>> 14)) >>> 0) % n;
    };
  }

  for (const seed of [1, 7, 2026]) {
    it(`racing calls, seed ${seed}: the frozen amount is never spent and the escrow pays exactly the freeze`, async () => {
      const next = random(seed);
      const open: string[] = [];
      const step = async (i: number) => {
        const what = next(3);
        if (what === 0 || open.length === 0) {
          const result = await holdFor(BigInt(1 + next(1_500_000)));
          if (result.ok) open.push(result.hold.id);
        } else {
          const [id] = open.splice(next(open.length), 1);
          if (what === 1) await capture(id);
          else await fx.ledger.release(id);
        }
        try {
          await assertBalanced(fx.db);
        } catch (error) {
          throw new Error(`seed ${seed}, step ${i}: ${(error as Error).message}`);
        }
      };
      for (let i = 0; i < 15; i++) await step(i);
      const requested = BigInt(1 + next(10_000_000));
      await exits.request("alice", requested);
      await fx.indexer.poll();
      const frozenAtRequest = (await lastExit()).frozen;
      for (let i = 15; i < 60; i++) await step(i);
      while (open.length > 0) {
        const id = open.pop()!;
        if (next(2) === 0) await capture(id);
        else await fx.ledger.release(id);
      }
      await assertBalanced(fx.db);
      const exit = await lastExit();
      // Only money that came back (released holds) could join the freeze; nothing was taken from it.
      expect(exit.frozen >= frozenAtRequest, `seed ${seed}`).to.equal(true);
      expect(exit.frozen + exit.shortfall).to.equal(requested);

      await fx.settler().runOnce();
      await exits.passExitDelay();
      await exits.complete("alice");
      await fx.indexer.poll();

      expect(await lastExit(), `seed ${seed}`).to.deep.include({ status: "completed", paid: exit.frozen, uncovered: 0n });
      expect(await chain.escrowBalance(chain.address("alice")), `seed ${seed}`).to.equal(await available());
      await expectConsistent();
    });
  }

  it("returns the frozen amount when the exit is cancelled", async () => {
    await exits.request("alice", 4n * USDC);
    await fx.indexer.poll();
    expect(await available()).to.equal(6n * USDC);

    await exits.cancel("alice");
    await fx.indexer.poll();

    expect(await lastExit()).to.deep.include({ status: "cancelled", frozen: 0n, shortfall: 0n });
    expect(await available()).to.equal(10n * USDC);
    await expectConsistent();
  });

  it("pays on completion what the ledger froze, and leaves the rest spendable", async () => {
    await exits.request("alice", 4n * USDC);
    await fx.indexer.poll();
    const before = await exits.walletUsdc("alice");
    await exits.passExitDelay();
    await exits.complete("alice");
    await fx.indexer.poll();

    expect((await exits.walletUsdc("alice")) - before).to.equal(4n * USDC);
    expect(await lastExit()).to.deep.include({ status: "completed", paid: 4n * USDC, frozen: 4n * USDC });
    expect(await available()).to.equal(6n * USDC);
    expect(await chain.escrowBalance(chain.address("alice"))).to.equal(6n * USDC);
    await fx.pay("alice", "acme", 6n * USDC);
    await fx.settler().runOnce();
    expect(await chain.escrowBalance(chain.address("alice"))).to.equal(0n);
    await expectConsistent();
  });

  it("adjusts the freeze to a replacing request, up and down", async () => {
    await exits.request("alice", 3n * USDC);
    await exits.request("alice", 8n * USDC);
    await fx.indexer.poll();
    expect((await exitRows()).map((r) => [r.status, r.frozen])).to.deep.equal([
      ["replaced", 0n],
      ["pending", 8n * USDC],
    ]);
    expect(await available()).to.equal(2n * USDC);

    await exits.request("alice", 1n * USDC);
    await fx.indexer.poll();
    expect((await exitRows()).map((r) => [r.status, r.frozen])).to.deep.equal([
      ["replaced", 0n],
      ["replaced", 0n],
      ["pending", 1n * USDC],
    ]);
    expect(await available()).to.equal(9n * USDC);
    await expectConsistent();

    await exits.passExitDelay();
    await exits.complete("alice");
    await fx.indexer.poll();
    expect(await lastExit()).to.deep.include({ status: "completed", paid: 1n * USDC });
    expect(await chain.escrowBalance(chain.address("alice"))).to.equal(9n * USDC);
    await expectConsistent();
  });

  it("applies each exit log once, however often the same blocks are read", async () => {
    await openHold(3n * USDC);
    await exits.request("alice", 9n * USDC);
    await exits.cancel("alice");
    await exits.request("alice", 5n * USDC);
    await fx.indexer.poll();
    const snapshot = async () => ({
      rows: await exitRows(),
      entries: await fx.db.value("SELECT COUNT(*) FROM entries"),
      available: await available(),
    });
    const first = await snapshot();

    // A second reader over the same ledger starts at the deploy block and reads every log again.
    const rereader = new DepositIndexer({
      ledger: fx.ledger,
      publicClient: chain.publicClient,
      escrowAddress: chain.deployment.escrow,
      deployBlock: chain.deployment.deployBlock,
      confirmations: 0,
      name: "reread",
      log: () => {},
    });
    expect(await rereader.poll()).to.deep.include({ recorded: 0, exits: 0 });
    // And the same reader after losing its progress.
    await fx.db.run("DELETE FROM indexer_state");
    expect(await fx.indexer.poll()).to.deep.include({ recorded: 0, exits: 0 });

    expect(await snapshot()).to.deep.equal(first);
    expect(first.rows.map((r) => r.status)).to.deep.equal(["cancelled", "pending"]);
    await expectConsistent();
  });

  it("records loudly an exit paid beyond its freeze (calls spent and not settled before readyAt)", async () => {
    await fx.pay("alice", "acme", 3n * USDC);
    await exits.request("alice", 10n * USDC);
    await fx.indexer.poll();
    expect(await lastExit()).to.deep.include({ frozen: 7n * USDC, shortfall: 3n * USDC });

    // No settlement during the delay: the escrow still has the spent 3 USDC and pays them out.
    await exits.passExitDelay();
    await exits.complete("alice");
    await fx.indexer.poll();

    expect(await lastExit()).to.deep.include({ status: "completed", paid: 10n * USDC, frozen: 7n * USDC, uncovered: 3n * USDC });
    expect(fx.logged.some((m) => m.startsWith("EXIT PAID BEYOND ITS FREEZE"))).to.equal(true);
    await assertBalanced(fx.db);
    const { differences } = await check();
    expect(differences.map((d) => [d.code, d.ledgerMicros, d.chainMicros])).to.deep.equal([["escrow_balance_mismatch", 3n * USDC, 0n]]);
  });

  it("records an exit by an address no account has linked, freezing nothing, and reconciles its payment", async () => {
    await chain.deposit("bob", 4n * USDC);
    await exits.request("bob", 3n * USDC);
    await exits.passExitDelay();
    await exits.complete("bob");
    await fx.indexer.poll();

    const bob = await fx.db.one("SELECT account_id, status, paid, frozen FROM chain_exits WHERE address = ?", [
      chain.address("bob").toLowerCase(),
    ]);
    expect(bob).to.deep.equal({ account_id: null, status: "completed", paid: 3n * USDC, frozen: 0n });
    expect(fx.logged.some((m) => m.includes("which no account has linked"))).to.equal(true);
    await expectConsistent();
  });

  it("names the broken rule when an exit's freeze and its entries disagree, or a short account has money available", async () => {
    await exits.request("alice", 4n * USDC);
    await fx.indexer.poll();
    await assertBalanced(fx.db);

    await fx.db.run("UPDATE chain_exits SET frozen = frozen - 1, shortfall = shortfall + 1");

    expect((await findViolations(fx.db)).map((v) => v.rule)).to.deep.equal([
      "an exit's frozen amount is what its linked freeze and return entries took from its account",
      "an account with a pending exit short of its freeze has nothing available",
    ]);
  });
});
