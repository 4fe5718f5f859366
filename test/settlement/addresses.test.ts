import { expect } from "chai";
import { linkAddress } from "../../server/settlement/addresses";
import { DepositIndexer } from "../../server/settlement/indexer";
import { reconcile } from "../../server/settlement/reconcile";
import { type Db, openDatabase } from "../../server/db/db";
import { SCHEMA } from "../../server/schema";
import { assertBalanced } from "../../server/ledger/invariants";
import { Ledger } from "../../server/ledger/ledger";
import { type LocalChain, USDC, startLocalChain } from "../helpers/chain";
import { type ExitActions, exitActions } from "../helpers/exits";
import { settlementStores } from "../../server/settlement/store";

/** Linking an address to an account, when the chain already has history for it. */
describe("linking an address to an account", function () {
  this.timeout(60_000);
  let chain: LocalChain;
  let exits: ExitActions;
  let snapshot: string;
  let db: Db;
  let ledger: Ledger;
  let indexer: DepositIndexer;

  before(async () => {
    chain = await startLocalChain();
    exits = await exitActions(chain);
  });
  beforeEach(async () => {
    snapshot = await chain.snapshot();
    db = openDatabase(":memory:", SCHEMA);
    ledger = new Ledger(db);
    ledger.ensureAccount({ id: "carol", kind: "user", name: "Carol" });
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
    db.close();
    await chain.revert(snapshot);
  });

  const books = () =>
    reconcile({
      stores: settlementStores(db),
      publicClient: chain.publicClient,
      escrowAddress: chain.deployment.escrow,
      fromBlock: chain.deployment.deployBlock,
    });

  it("freezes an exit the address requested before anyone owned it, so its money cannot be spent", async () => {
    await chain.deposit("carol", 10n * USDC);
    await exits.request("carol", 4n * USDC);
    await indexer.poll();
    expect(ledger.balance("carol").availableMicros).to.equal(0n);

    const linked = await linkAddress(ledger, { accountId: "carol", address: chain.address("carol") });
    expect(linked).to.include({ ok: true, creditedMicros: 10n * USDC });
    expect(ledger.balance("carol").availableMicros).to.equal(6n * USDC);
    const row = db.prepare("SELECT account_id, frozen, shortfall FROM chain_exits").get();
    expect(row).to.deep.equal({ account_id: "carol", frozen: 4n * USDC, shortfall: 0n });
    assertBalanced(db);

    await exits.passExitDelay();
    await exits.complete("carol");
    await indexer.poll();
    expect(ledger.balance("carol").availableMicros).to.equal(6n * USDC);
    expect(await chain.escrowBalance(chain.address("carol"))).to.equal(6n * USDC);
    expect((await books()).differences).to.deep.equal([]);
    assertBalanced(db);
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
    expect(ledger.balance("carol").availableMicros).to.equal(0n);
    assertBalanced(db);
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
