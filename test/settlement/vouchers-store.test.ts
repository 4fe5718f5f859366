import { expect } from "chai";
import { openDatabase, type Db } from "../../server/db/db";
import { SCHEMA } from "../../server/schema";
import { Ledger } from "../../server/ledger/ledger";
import { SqliteVoucherStore, type VoucherStore } from "../../server/settlement/vouchers-store";

describe("VoucherStore: the vouchers table behind its interface", () => {
  let db: Db;
  let ledger: Ledger;
  let store: VoucherStore;
  const address = "0x00000000000000000000000000000000000a11ce";

  beforeEach(() => {
    db = openDatabase(":memory:", SCHEMA);
    ledger = new Ledger(db);
    store = new SqliteVoucherStore(db);
    ledger.ensureAccount({ id: "alice", kind: "user", name: "Alice" });
    ledger.credit("alice", 10n, "dev_credit");
  });
  afterEach(() => db.close());

  /** Issues a voucher as VoucherIssuer does: the ledger entry and the row in one operation. */
  function issue(nonce: bigint, amountMicros: bigint): void {
    ledger.commit.run(() => {
      const entryId = ledger.withdrawByVoucher("alice", amountMicros, { address, nonce });
      store.insertIssued({ address, nonce, accountId: "alice", amountMicros, deadlineSec: 100n, entryId });
    });
  }

  it("records issued vouchers and lists an account's newest first, up to the limit", () => {
    issue(1n, 2n);
    issue(2n, 3n);
    expect(store.ofAccount("alice", 10).map((v) => [v.nonce, v.amountMicros, v.status])).to.have.deep.members([
      [1n, 2n, "issued"],
      [2n, 3n, "issued"],
    ]);
    expect(store.ofAccount("alice", 1)).to.have.length(1);
    expect(store.ofAccount("bob", 10)).to.deep.equal([]);
    expect(store.issued().map((v) => v.nonce)).to.have.members([1n, 2n]);
  });

  it("settles an issued voucher once: a second settle (redeemed after returned) changes nothing", () => {
    issue(1n, 2n);
    expect(store.settle(address, 1n, "returned")).to.equal(true);
    expect(store.settle(address, 1n, "redeemed")).to.equal(false);
    expect(store.ofAccount("alice", 10)[0].status).to.equal("returned");
    expect(store.issued()).to.deep.equal([]);
  });

  it("keeps the signature given out", () => {
    issue(1n, 2n);
    store.setSignature(address, 1n, "0xsig");
    expect(db.prepare("SELECT signature FROM vouchers").pluck().get()).to.equal("0xsig");
  });
});
