import type { Db } from "../db/db";
import { type AddressesStore, SqliteAddressesStore } from "./addresses-store";
import { BatchesStore } from "./batches-store";
import { type ExitsStore, SqliteExitsStore } from "./exits-store";
import { type IndexerStore, SqliteIndexerStore } from "./indexer-store";
import { type ReconcileStore, SqliteReconcileStore } from "./reconcile-store";
import { VoucherStore } from "./vouchers-store";

/** Every table settlement owns, each behind its store, plus its read-only view across the books. */
export interface SettlementStores {
  addresses: AddressesStore;
  exits: ExitsStore;
  indexer: IndexerStore;
  batches: BatchesStore;
  vouchers: VoucherStore;
  reconcile: ReconcileStore;
}

const built = new WeakMap<Db, SettlementStores>();

/**
 * Settlement's stores on one database, built once per handle (their statements are prepared once): the
 * composition root builds them and hands them on, and a caller that only has the ledger (a test, the demo
 * seed) reaches the same ones through `ledger.db`.
 */
export function settlementStores(db: Db): SettlementStores {
  let stores = built.get(db);
  if (!stores) {
    stores = {
      addresses: new SqliteAddressesStore(db),
      exits: new SqliteExitsStore(db),
      indexer: new SqliteIndexerStore(db),
      batches: new BatchesStore(db),
      vouchers: new VoucherStore(db),
      reconcile: new SqliteReconcileStore(db),
    };
    built.set(db, stores);
  }
  return stores;
}
