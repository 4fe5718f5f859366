import { expect } from "chai";
import { type Db, openDatabase } from "../../server/db/db";
import { SCHEMA } from "../../server/schema";
import { Ledger } from "../../server/ledger/ledger";
import { SqliteWalletsStore } from "../../server/wallets/wallets-store";

describe("WalletsStore on a real SQLite database", () => {
  let db: Db;

  beforeEach(() => {
    db = openDatabase(":memory:", SCHEMA);
    const ledger = new Ledger(db);
    ledger.ensureAccount({ id: "ada", kind: "user", name: "Ada" });
    ledger.ensureAccount({ id: "bob", kind: "user", name: "Bob" });
  });
  afterEach(() => db.close());

  it("stores one wallet per account, never replaced, and lists them oldest first", () => {
    const store = new SqliteWalletsStore(db);
    const wallet = (accountId: string, hex: string, createdAtMs: number) => ({
      accountId,
      address: `0x${hex.repeat(20)}`,
      ownerKind: "server" as const,
      ownerAddress: `0x${"ee".repeat(20)}`,
      encryptedOwnerKey: Buffer.from([1, 2, 3]),
      createdAtMs,
    });
    store.insertIfAbsent(wallet("bob", "b0", 2));
    store.insertIfAbsent(wallet("ada", "a0", 1));
    store.insertIfAbsent(wallet("ada", "a9", 3));
    expect(store.get("ada")).to.deep.equal(wallet("ada", "a0", 1));
    expect(store.get("carol")).to.equal(undefined);
    expect(store.list().map((w) => w.accountId)).to.deep.equal(["ada", "bob"]);
  });
});
