import { expect } from "chai";
import { linkAddress } from "../../server/settlement/addresses";
import { DepositIndexer } from "../../server/settlement/indexer";
import { reconcile } from "../../server/settlement/reconcile";
import type { Database } from "../../server/db/sql";
import { assertBalanced } from "../../server/ledger/invariants";
import { Ledger } from "../../server/ledger/ledger";
import { type LocalChain, USDC, startLocalChain } from "../helpers/chain";
import { describeEachEngine } from "../helpers/engines";
import { type ExitActions, exitActions } from "../helpers/exits";
import { settlementStores } from "../../server/settlement/store";

/** Linking an address to an account, when the chain already has history for it. */
describeEachEngine("linking an address to an account", (engine) => {
  describe("with the chain's history", function () {
    this.timeout(60_000);
    let chain: LocalChain;
    let exits: ExitActions;
    let snapshot: string;
    let db: Database;
    let ledger: Ledger;
    let indexer: DepositIndexer;

    before(async () => {
      chain = await startLocalChain();
      exits = await exitActions(chain);
    });
    beforeEach(async () => {
      snapshot = await chain.snapshot();
      db = await engine.open();
      ledger = await Ledger.open(db);
      await ledger.ensureAccount({ id: "carol", kind: "user", name: "Carol" });
      indexer = new DepositIndexer({
        ledger,
        publicClient: chain.publicClient,
        escrowAddress: chain.deployment.escrow,
        deployBlock: chain.deployment.deployBlock,
        confirmations: 0,
        log: () => {},
      });
    });
    afterEach(async () => {
      await chain.revert(snapshot);
    });

    const books = () =>
      reconcile({
        stores: settlementStores(db),
        publicClient: chain.publicClient,
        escrowAddress: chain.deployment.escrow,
        fromBlock: chain.deployment.deployBlock,
      });
    const available = async (accountId: string) => (await ledger.balance(accountId)).availableMicros;

    it("freezes an exit the address requested before anyone owned it, so its money cannot be spent", async () => {
      await chain.deposit("carol", 10n * USDC);
      await exits.request("carol", 4n * USDC);
      await indexer.poll();
      expect(await available("carol")).to.equal(0n);

      const linked = await linkAddress(ledger, { accountId: "carol", address: chain.address("carol") });
      expect(linked).to.include({ ok: true, creditedMicros: 10n * USDC });
      expect(await available("carol")).to.equal(6n * USDC);
      const row = await db.one("SELECT account_id, frozen, shortfall FROM chain_exits");
      expect(row).to.deep.equal({ account_id: "carol", frozen: 4n * USDC, shortfall: 0n });
      await assertBalanced(db);

      await exits.passExitDelay();
      await exits.complete("carol");
      await indexer.poll();
      expect(await available("carol")).to.equal(6n * USDC);
      expect(await chain.escrowBalance(chain.address("carol"))).to.equal(6n * USDC);
      expect((await books()).differences).to.deep.equal([]);
      await assertBalanced(db);
    });

    it("refuses an address whose exit completed while no one owned it: its waiting deposits are gone", async () => {
      await chain.deposit("carol", 5n * USDC);
      await exits.request("carol", 5n * USDC);
      await exits.passExitDelay();
      await exits.complete("carol");
      await indexer.poll();
      expect(await linkAddress(ledger, { accountId: "carol", address: chain.address("carol") })).to.deep.equal({
        ok: false,
        reason: "address_exited",
      });
      expect(await available("carol")).to.equal(0n);
      await assertBalanced(db);
    });

    it("refuses a second address for one account, since settlement debits one", async () => {
      expect((await linkAddress(ledger, { accountId: "carol", address: chain.address("carol") })).ok).to.equal(true);
      expect(await linkAddress(ledger, { accountId: "carol", address: chain.address("bob") })).to.deep.equal({
        ok: false,
        reason: "second_address",
      });
      expect((await linkAddress(ledger, { accountId: "carol", address: chain.address("carol") })).ok).to.equal(true);
    });
  });
});
