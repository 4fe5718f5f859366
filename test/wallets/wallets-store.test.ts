import { expect } from "chai";
import type { Database } from "../../server/db/sql";
import { Ledger } from "../../server/ledger/ledger";
import { WalletsStore } from "../../server/wallets/wallets-store";
import { describeEachEngine } from "../helpers/engines";

describeEachEngine("WalletsStore", (engine) => {
  let db: Database;

  beforeEach(async () => {
    db = await engine.open();
    const ledger = await Ledger.open(db);
    await ledger.ensureAccount({ id: "ada", kind: "user", name: "Ada" });
    await ledger.ensureAccount({ id: "bob", kind: "user", name: "Bob" });
  });

  it("stores one wallet per account, never replaced, and lists them oldest first", async () => {
    const store = new WalletsStore(db);
    const wallet = (accountId: string, hex: string, createdAtMs: number) => ({
      accountId,
      address: `0x${hex.repeat(20)}`,
      ownerKind: "server" as const,
      ownerAddress: `0x${"ee".repeat(20)}`,
      encryptedOwnerKey: Buffer.from([1, 2, 3]),
      createdAtMs,
    });
    await store.insertIfAbsent(wallet("bob", "b0", 2));
    await store.insertIfAbsent(wallet("ada", "a0", 1));
    await store.insertIfAbsent(wallet("ada", "a9", 3));
    expect(await store.get("ada")).to.deep.equal(wallet("ada", "a0", 1));
    expect(await store.get("carol")).to.equal(undefined);
    expect((await store.list()).map((w) => w.accountId)).to.deep.equal(["ada", "bob"]);
  });

  it("keeps the first of two wallets stored at once for one account", async () => {
    const store = new WalletsStore(db);
    const wallet = (hex: string) => ({
      accountId: "ada",
      address: `0x${hex.repeat(20)}`,
      ownerKind: "siwe" as const,
      ownerAddress: `0x${"ee".repeat(20)}`,
      encryptedOwnerKey: null,
      createdAtMs: 1,
    });
    await Promise.all(["a1", "a2", "a3"].map((hex) => db.transaction((tx) => store.insertIfAbsent(wallet(hex), tx))));
    expect(await store.list()).to.have.length(1);
  });
});
