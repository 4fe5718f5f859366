import { expect } from "chai";
import type { Database } from "../../server/db/sql";
import { Ledger } from "../../server/ledger/ledger";
import { VoucherStore } from "../../server/settlement/vouchers-store";
import { describeEachEngine } from "../helpers/engines";

describeEachEngine("VoucherStore: the vouchers table", (engine) => {
  let db: Database;
  let ledger: Ledger;
  let store: VoucherStore;
  const address = "0x00000000000000000000000000000000000a11ce";

  beforeEach(async () => {
    db = await engine.open();
    ledger = await Ledger.open(db);
    store = new VoucherStore(db);
    await ledger.ensureAccount({ id: "alice", kind: "user", name: "Alice" });
    await ledger.credit("alice", 10n, "dev_credit");
  });

  /** Issues a voucher as VoucherIssuer does: the ledger entry and the row in one transaction. */
  function issue(nonce: bigint, amountMicros: bigint, deadlineSec = 100n, createdAtMs?: number): Promise<void> {
    return db.transaction(async (tx) => {
      const entryId = await ledger.withdrawByVoucher("alice", amountMicros, { address, nonce }, "", tx);
      await store.insertIssued({ address, nonce, accountId: "alice", amountMicros, deadlineSec, entryId, createdAtMs }, tx);
    });
  }

  it("records issued vouchers and lists an account's newest first, up to the limit", async () => {
    await issue(1n, 2n);
    await issue(2n, 3n);
    expect((await store.ofAccount("alice", 10)).map((v) => [v.nonce, v.amountMicros, v.status])).to.have.deep.members([
      [1n, 2n, "issued"],
      [2n, 3n, "issued"],
    ]);
    expect(await store.ofAccount("alice", 1)).to.have.length(1);
    expect(await store.ofAccount("bob", 10)).to.deep.equal([]);
    expect((await store.issued()).map((v) => v.nonce)).to.have.members([1n, 2n]);
  });

  it("settles an issued voucher once: a second settle (redeemed after returned) changes nothing", async () => {
    await issue(1n, 2n);
    expect(await store.settle(address, 1n, "returned")).to.equal(true);
    expect(await store.settle(address, 1n, "redeemed")).to.equal(false);
    expect((await store.ofAccount("alice", 10))[0].status).to.equal("returned");
    expect(await store.issued()).to.deep.equal([]);
  });

  it("settles a voucher once when two settle it at the same time", async () => {
    await issue(1n, 2n);
    const settled = await Promise.all([store.settle(address, 1n, "returned"), store.settle(address, 1n, "redeemed")]);
    expect(settled.filter(Boolean)).to.have.length(1);
  });

  it("undoes the voucher's row with the transaction that took its amount out", async () => {
    const error = await db
      .transaction(async (tx) => {
        const entryId = await ledger.withdrawByVoucher("alice", 4n, { address, nonce: 1n }, "", tx);
        await store.insertIssued({ address, nonce: 1n, accountId: "alice", amountMicros: 4n, deadlineSec: 100n, entryId }, tx);
        throw new Error("the signer is gone");
      })
      .catch((e: unknown) => e);
    expect((error as Error).message).to.equal("the signer is gone");
    expect(await store.issued()).to.deep.equal([]);
    expect(await ledger.balanceOf("alice", "available")).to.equal(10n);
  });

  it("counts an account's open vouchers and those issued since a time, each with the first to leave the count", async () => {
    await issue(1n, 1n, 100n, 1_000);
    await issue(2n, 1n, 200n, 2_000);
    await issue(3n, 1n, 300n, 3_000);
    await store.settle(address, 1n, "returned");
    expect(await store.openOf("alice", 150n)).to.deep.equal({ count: 2, firstDeadlineSec: 200n });
    expect(await store.openOf("alice", 300n), "a voucher is open up to its deadline's second").to.deep.equal({
      count: 1,
      firstDeadlineSec: 300n,
    });
    expect(await store.openOf("alice", 301n)).to.deep.equal({ count: 0, firstDeadlineSec: undefined });
    expect(await store.issuedSince("alice", 999), "whatever became of them").to.deep.equal({ count: 3, firstAtMs: 1_000 });
    expect(await store.issuedSince("alice", 1_000)).to.deep.equal({ count: 2, firstAtMs: 2_000 });
    expect(await store.issuedSince("bob", 0)).to.deep.equal({ count: 0, firstAtMs: undefined });
  });

  it("finds the issued vouchers past a time, first deadline first, and whether any is issued at all", async () => {
    await issue(1n, 1n, 300n);
    await issue(2n, 1n, 100n);
    await issue(3n, 1n, 200n);
    await store.settle(address, 3n, "redeemed");
    expect((await store.issuedExpiredBefore(301n)).map((v) => v.nonce)).to.deep.equal([2n, 1n]);
    expect(
      (await store.issuedExpiredBefore(300n)).map((v) => v.nonce),
      "a voucher is redeemable at its deadline's second",
    ).to.deep.equal([2n]);
    expect(await store.anyIssued()).to.equal(true);
    await store.settle(address, 1n, "returned");
    await store.settle(address, 2n, "redeemed");
    expect(await store.anyIssued()).to.equal(false);
  });

  it("keeps the signature given out", async () => {
    await issue(1n, 2n);
    await store.setSignature(address, 1n, "0xsig");
    expect(await db.value("SELECT signature FROM vouchers")).to.equal("0xsig");
  });
});
