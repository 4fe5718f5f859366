import { expect } from "chai";
import type { Database } from "../../server/db/sql";
import { PostgresDatabase } from "../../server/db/postgres/database";
import { createPostgresPool } from "../../server/db/postgres/pool";
import { assertBalanced } from "../../server/ledger/invariants";
import { Ledger } from "../../server/ledger/ledger";
import { describeEachEngine } from "../helpers/engines";
import { buildCharge, countRows, holdOk, makeLedger, makeParties } from "../helpers/ledger";

/*
 * Several gateway replicas share one PostgreSQL database: each has its own pool (its own Database handle) and
 * its own Ledger on it. What one replica reads and then changes, another may be changing at the same moment;
 * the ledger's row locks must make them queue, and a deadlock PostgreSQL breaks must be retried, never reach
 * a caller. SQLite has one writer process, so these are PostgreSQL's alone (the sqlite suite declares nothing).
 */
describeEachEngine("Ledger shared by several replicas", (engine) => {
  if (engine.name !== "postgres") return;

  let db: Database;
  /** One Ledger per replica, each on its own pool; the first on the suite's own database handle. */
  let replicas: Ledger[];
  const extraHandles: Database[] = [];

  beforeEach(async () => {
    ({ db } = await makeLedger(engine));
    replicas = [await Ledger.open(db)];
    for (let i = 0; i < 2; i++) {
      const handle = new PostgresDatabase(createPostgresPool({ url: engine.lastUrl(), max: 8, applicationName: `replica-${i + 2}` }));
      extraHandles.push(handle);
      replicas.push(await Ledger.open(handle));
    }
  });

  afterEach(async () => {
    for (const handle of extraHandles.splice(0)) await handle.close();
  });

  /** The replica that serves the i-th request (round robin). */
  const replica = (i: number) => replicas[i % replicas.length];

  it("lets exactly as many concurrent holds through as the balance covers, whichever replica takes them", async () => {
    const { userId, sellerId } = await makeParties(replicas[0], 10_000n);
    const charge = buildCharge({ priceMicros: 700n });
    const results = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        replica(i).hold({ accountId: userId, sellerAccountId: sellerId, skillId: "skill:echo", charge }),
      ),
    );
    const held = results.filter((r) => r.ok);
    expect(held).to.have.length(Math.floor(10_000 / 700));
    for (const refused of results.filter((r) => !r.ok)) {
      expect(refused).to.deep.include({ ok: false, reason: "insufficient_balance", neededMicros: 700n });
      expect(
        refused.ok === false && refused.reason === "insufficient_balance" && refused.availableMicros < 700n,
        "refused with enough money available",
      ).to.equal(true);
    }
    expect(await replicas[1].balance(userId)).to.deep.equal({ availableMicros: 10_000n - 14n * 700n, heldMicros: 14n * 700n });
    await assertBalanced(db);
  });

  it("settles a hold exactly once when replicas capture and release it at the same time", async () => {
    const { userId, sellerId } = await makeParties(replicas[0], 100_000_000n);
    const holdIds = await Promise.all(Array.from({ length: 20 }, (_, i) => holdOk(replica(i), userId, sellerId)));
    const outcomes = await Promise.all(
      holdIds.map((id, i) =>
        Promise.all([replica(i).capture(id), replica(i + 1).release(id), replica(i + 2).capture(id), replica(i + 2).release(id)]),
      ),
    );
    let captured = 0;
    for (const [i, settlements] of outcomes.entries()) {
      const won = settlements.filter((s) => s.ok);
      expect(won, `hold #${i} settled by ${won.length} of its four settlements`).to.have.length(1);
      for (const lost of settlements.filter((s) => !s.ok)) expect(lost).to.deep.equal({ ok: false, reason: "hold_not_open" });
      const status = await db.value("SELECT status FROM holds WHERE id = ?", [holdIds[i]]);
      const capturedHere = settlements.findIndex((s) => s.ok) % 2 === 0;
      expect(status).to.equal(capturedHere ? "captured" : "released");
      if (capturedHere) captured++;
    }
    expect(await db.value("SELECT COUNT(*) FROM entries WHERE kind IN ('capture', 'release')")).to.equal(20n);
    expect(await replicas[2].balance(userId)).to.deep.equal({
      availableMicros: 100_000_000n - BigInt(captured) * 1_000_000n,
      heldMicros: 0n,
    });
    expect(await replicas[0].balanceOf(sellerId, "earned")).to.equal(BigInt(captured) * 900_000n);
    await assertBalanced(db);
  });

  it("runs holds and releases of one account on every replica at once without a deadlock reaching a caller", async () => {
    const { userId, sellerId } = await makeParties(replicas[0], 50_000n);
    const charge = buildCharge({ priceMicros: 1_000n });
    // Each worker holds, then has another replica release what it held, over and over: every transaction
    // locks the same two balances (available and held), from three pools at once.
    const worker = async (w: number) => {
      for (let round = 0; round < 15; round++) {
        const result = await replica(w + round).hold({ accountId: userId, sellerAccountId: sellerId, skillId: "skill:echo", charge });
        if (!result.ok) throw new Error(`worker ${w} round ${round}: ${result.reason}`);
        const released = await replica(w + round + 1).release(result.hold.id);
        if (!released.ok) throw new Error(`worker ${w} round ${round}: ${released.reason}`);
      }
    };
    await Promise.all(Array.from({ length: 12 }, (_, w) => worker(w)));
    expect(await replicas[0].balance(userId)).to.deep.equal({ availableMicros: 50_000n, heldMicros: 0n });
    expect(await countRows(db, "holds")).to.equal(12 * 15);
    expect(await db.value("SELECT COUNT(*) FROM holds WHERE status = 'released'")).to.equal(BigInt(12 * 15));
    await assertBalanced(db);
  });

  it("freezes money released on a replica whose process never heard of the exit (only the leader's indexer records it)", async () => {
    // Ledgers opened as the gateway opens them on PostgreSQL: named for their replica, and never told of an exit.
    const named = [await Ledger.open(db, { replicaId: "replica-a" })];
    for (const handle of extraHandles) named.push(await Ledger.open(handle, { replicaId: `replica-${named.length}` }));
    const { userId, sellerId } = await makeParties(named[0], 10_000n);
    const holdIds = await Promise.all(
      Array.from({ length: 6 }, (_, i) => holdOk(named[i % named.length], userId, sellerId, buildCharge({ priceMicros: 1_000n }))),
    );
    await requestExitWithNothingFrozen(userId, 25_000n, { tell: false });
    await Promise.all(holdIds.map((id, i) => named[(i + 1) % named.length].release(id)));
    expect(await db.one("SELECT frozen, shortfall FROM chain_exits")).to.deep.equal({ frozen: 10_000n, shortfall: 15_000n });
    expect(await named[2].balance(userId)).to.deep.equal({ availableMicros: 0n, heldMicros: 0n });
    await assertBalanced(db);
  });

  /** Records a pending exit of `requestedMicros` by the user, nothing of it frozen yet, as every replica's indexer would learn of it. */
  async function requestExitWithNothingFrozen(userId: string, requestedMicros: bigint, options: { tell?: boolean } = {}): Promise<void> {
    const address = `0x${"ab".repeat(20)}`;
    await db.run("INSERT INTO account_addresses (address, account_id, created_at) VALUES (?, ?, 0)", [address, userId]);
    await db.run(
      `INSERT INTO chain_exits (tx_hash, log_index, block_number, block_hash, address, account_id, requested, ready_at, status,
                                frozen, shortfall, created_at)
       VALUES (?, 0, 1, ?, ?, ?, ?, 0, 'pending', 0, ?, 0)`,
      [`0x${"e".repeat(64)}`, `0x${"b".repeat(64)}`, address, userId, requestedMicros, requestedMicros],
    );
    if (options.tell !== false) for (const ledger of replicas) ledger.noteExitShortfall();
  }

  it("freezes released money for a short exit exactly once when replicas release at the same time", async () => {
    const { userId, sellerId } = await makeParties(replicas[0], 10_000n);
    const holdIds = await Promise.all(
      Array.from({ length: 10 }, (_, i) => holdOk(replica(i), userId, sellerId, buildCharge({ priceMicros: 1_000n }))),
    );
    // The account asks the escrow for more than it has available (nothing: all of it is held by calls in
    // flight), so the exit is short by all of it, and every release must feed the freeze.
    await requestExitWithNothingFrozen(userId, 25_000n);

    const released = await Promise.all(holdIds.map((id, i) => replica(i).release(id)));
    expect(released.filter((r) => r.ok)).to.have.length(10);
    expect(await db.one("SELECT frozen, shortfall FROM chain_exits")).to.deep.equal({ frozen: 10_000n, shortfall: 15_000n });
    expect(await replicas[1].balance(userId)).to.deep.equal({ availableMicros: 0n, heldMicros: 0n });
    expect(await db.value("SELECT COUNT(*) FROM entries WHERE kind = 'exit_freeze'")).to.equal(10n);
    await assertBalanced(db);
  });

  it("freezes money found available for a short exit once, when replicas take holds on the account at the same time", async () => {
    // Money available beside a short exit: what a deposit credited by linking an address leaves, until the
    // next operation on the account freezes it. Every hold tops the freeze up first: only one may move it.
    const { userId, sellerId } = await makeParties(replicas[0], 5_000n);
    await requestExitWithNothingFrozen(userId, 25_000n);

    const charge = buildCharge({ priceMicros: 1_000n });
    const results = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        replica(i).hold({ accountId: userId, sellerAccountId: sellerId, skillId: "skill:echo", charge }),
      ),
    );
    for (const result of results)
      expect(result).to.deep.equal({ ok: false, reason: "insufficient_balance", availableMicros: 0n, neededMicros: 1_000n });
    expect(await db.one("SELECT frozen, shortfall FROM chain_exits")).to.deep.equal({ frozen: 5_000n, shortfall: 20_000n });
    expect(await db.value("SELECT COUNT(*) FROM entries WHERE kind = 'exit_freeze'")).to.equal(1n);
    await assertBalanced(db);
  });
});
