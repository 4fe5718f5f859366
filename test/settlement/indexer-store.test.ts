import { expect } from "chai";
import { SqliteIndexerStore } from "../../server/settlement/indexer-store";
import { makeLedger } from "../helpers/ledger";

describe("IndexerStore: an indexer's progress on a real SQLite database", () => {
  it("has no progress before the first chunk, then keeps the last one saved, per indexer", () => {
    const { db } = makeLedger();
    try {
      const store = new SqliteIndexerStore(db);
      expect(store.progress("deposits:0xabc")).to.equal(undefined);
      store.saveProgress("deposits:0xabc", { lastBlock: 10n, lastBlockHash: "0x10" }, 1);
      store.saveProgress("deposits:0xabc", { lastBlock: 12n, lastBlockHash: "0x12" }, 2);
      store.saveProgress("deposits:0xdef", { lastBlock: 3n, lastBlockHash: "0x03" }, 2);
      expect(store.progress("deposits:0xabc")).to.deep.equal({ lastBlock: 12n, lastBlockHash: "0x12" });
      expect(store.progress("deposits:0xdef")).to.deep.equal({ lastBlock: 3n, lastBlockHash: "0x03" });
    } finally {
      db.close();
    }
  });
});
