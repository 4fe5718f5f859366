import { expect } from "chai";
import type { Database } from "../../server/db/sql";
import { PostgresDatabase } from "../../server/db/postgres/database";
import { createPostgresPool } from "../../server/db/postgres/pool";
import { Ledger } from "../../server/ledger/ledger";
import { computeCharge } from "../../server/ledger/fees";
import { AddressesStore } from "../../server/settlement/addresses-store";
import { type BuiltBatch, SettlementBatches } from "../../server/settlement/batches";
import { BatchesStore } from "../../server/settlement/batches-store";
import { describeEachEngine } from "../helpers/engines";

const USER = "user:alice";
const SELLER = "seller:acme";

/** Settlement's batch side on `db`, as a settler builds it. */
async function batchesOn(db: Database, logged: string[] = []): Promise<{ ledger: Ledger; batches: SettlementBatches }> {
  const ledger = await Ledger.open(db);
  const stores = { batches: new BatchesStore(db), addresses: new AddressesStore(db) };
  return { ledger, batches: new SettlementBatches({ ledger, stores, maxCallsPerBatch: 100, log: (m) => logged.push(m) }) };
}

/** A user with 10 USDC of credit and a seller, each linked to an escrow address (unless `linkSeller` is false). */
async function parties(db: Database, ledger: Ledger, linkSeller = true): Promise<void> {
  await ledger.ensureAccount({ id: USER, kind: "user", name: "Alice" });
  await ledger.ensureAccount({ id: SELLER, kind: "seller", name: "Acme skills" });
  await ledger.credit(USER, 10_000_000n, "dev_credit");
  const links: [string, string][] = [[`0x${"a1".repeat(20)}`, USER]];
  if (linkSeller) links.push([`0x${"5e".repeat(20)}`, SELLER]);
  for (const [address, accountId] of links) {
    await db.run("INSERT INTO account_addresses (address, account_id, created_at) VALUES (?, ?, ?)", [address, accountId, 1]);
  }
}

/** `count` captured calls of 1,000 micros each. */
async function pay(ledger: Ledger, count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    const held = await ledger.hold({
      accountId: USER,
      sellerAccountId: SELLER,
      skillId: "skill:echo",
      charge: computeCharge(1_000n, "included", 1000n),
    });
    if (!held.ok) throw new Error(held.reason);
    await ledger.capture(held.hold.id);
  }
}

describeEachEngine("SettlementBatches: recording a batch", (engine) => {
  let db: Database;

  beforeEach(async () => {
    db = await engine.open();
  });

  it("records the batch and assigns its calls in one transaction, and rebuilds it exactly from the ledger", async () => {
    const { ledger, batches } = await batchesOn(db);
    await parties(db, ledger);
    await pay(ledger, 3);

    const built = (await batches.recordNext(1, 42n))!;

    expect(built.receipts).to.have.length(3);
    expect(await batches.pending()).to.include({
      number: 1n,
      status: "pending",
      call_count: 3n,
      total_debits: 3_000n,
      recorded_at_block: 42n,
    });
    expect(await batches.unsettledCalls()).to.equal(0);
    const { batches: again } = await batchesOn(db);
    const rebuilt = await again.load((await batches.pending())!);
    expect(rebuilt.tree.root).to.equal(built.tree.root);
    expect(rebuilt.holdIds).to.deep.equal(built.holdIds);
    await batches.markSettled(1, `0x${"01".repeat(32)}`);
    expect(await batches.pending()).to.equal(undefined);
    expect(await batches.lastRecorded()).to.equal(1);
    const marked = await batches.markSettled(1, undefined).catch((e: unknown) => e);
    expect((marked as Error).message).to.equal("batch 1 was not pending when it was marked settled");
  });

  it("records nothing while a batch is pending, nor a number out of turn, and leaves the calls unbatched", async () => {
    const { ledger, batches } = await batchesOn(db);
    await parties(db, ledger);
    await pay(ledger, 1);
    await batches.recordNext(1, 1n);
    await pay(ledger, 2);

    const refused = await batches.recordNext(2, 1n).catch((e: unknown) => e);
    expect((refused as Error).message).to.equal("batch 2 cannot be recorded: the ledger's last batch is 1");
    await batches.markSettled(1, undefined);
    const outOfTurn = await batches.recordNext(3, 1n).catch((e: unknown) => e);
    expect((outOfTurn as Error).message).to.equal("batch 3 cannot be recorded: the ledger's last batch is 1");
    expect(await batches.unsettledCalls()).to.equal(2);
    expect(await db.value("SELECT COUNT(*) FROM settlement_batches")).to.equal(1n);
  });

  it("leaves the calls of a seller without an address out, and says so", async () => {
    const logged: string[] = [];
    const { ledger, batches } = await batchesOn(db, logged);
    await parties(db, ledger, false);
    await pay(ledger, 2);

    expect(await batches.recordNext(1, 1n)).to.equal(undefined);
    expect(batches.waitingWithoutAddress).to.equal(2);
    expect(logged).to.deep.equal([`2 paid call(s) wait for a linked address and are not settled: ${SELLER} (2 call(s))`]);
    expect(await batches.pending()).to.equal(undefined);
  });

  it("lets exactly one of two settlers recording at once record a batch, each call in at most one batch", async function () {
    // Two gateway replicas running a settler by mistake: on PostgreSQL two handles (two pools) on one
    // database; on SQLite one handle, whose single writer makes them take turns.
    const second = engine.name === "postgres" ? new PostgresDatabase(createPostgresPool({ url: engine.lastUrl() })) : db;
    try {
      const a = await batchesOn(db);
      const b = await batchesOn(second);
      await parties(db, a.ledger);
      for (let number = 1; number <= 5; number++) {
        await pay(a.ledger, 20);
        const results = await Promise.allSettled([a.batches.recordNext(number, 1n), b.batches.recordNext(number, 1n)]);

        // One records the batch; the other fails cleanly, or finds no call left to batch.
        const outcomes = results.map((r) => (r.status === "rejected" ? String(r.reason) : r.value ? "recorded" : "nothing to batch"));
        const recorded = results.findIndex((r) => r.status === "fulfilled" && r.value !== undefined);
        expect(
          outcomes.filter((o) => o === "recorded"),
          `batch ${number}: ${outcomes.join("; ")}`,
        ).to.have.length(1);
        for (const other of outcomes.filter((o) => o !== "recorded")) {
          expect(other).to.match(
            /^nothing to batch$|another settler recorded a batch on this database at the same time|cannot be recorded: the ledger's last batch is|batched twice/,
          );
        }
        const built = (results[recorded] as PromiseFulfilledResult<BuiltBatch>).value;
        expect(built.holdIds).to.have.length(20);
        const rows = await db.all<{ number: bigint; status: string; call_count: bigint }>(
          "SELECT number, status, call_count FROM settlement_batches WHERE status = 'pending'",
        );
        expect(rows).to.deep.equal([{ number: BigInt(number), status: "pending", call_count: 20n }]);
        const inBatch = await db.all<{ id: string }>("SELECT id FROM holds WHERE batch_number = ? ORDER BY closed_at, id", [number]);
        expect(inBatch.map((h) => h.id)).to.deep.equal(built.holdIds);
        expect(await a.batches.unsettledCalls()).to.equal(0);
        await [a, b][recorded].batches.markSettled(number, undefined);
      }
      expect(await db.value("SELECT COUNT(*) FROM holds WHERE status = 'captured' AND batch_number IS NULL")).to.equal(0n);
      expect(await db.value("SELECT COUNT(*) FROM settlement_batches WHERE status = 'settled'")).to.equal(5n);
    } finally {
      if (second !== db) await second.close();
    }
  });
});
