import type { Database } from "../db/sql";
import { AddressesStore } from "./addresses-store";
import { BatchesStore } from "./batches-store";
import { ExitsStore } from "./exits-store";
import { IndexerStore } from "./indexer-store";
import { ReconcileStore } from "./reconcile-store";
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

const built = new WeakMap<Database, SettlementStores>();

/**
 * Settlement's stores on one database, built once per database: the composition root builds them and hands
 * them on, and a caller that only has the ledger (a test, the demo seed) reaches the same ones through
 * `ledger.db`.
 */
export function settlementStores(db: Database): SettlementStores {
  let stores = built.get(db);
  if (!stores) {
    stores = {
      addresses: new AddressesStore(db),
      exits: new ExitsStore(db),
      indexer: new IndexerStore(db),
      batches: new BatchesStore(db),
      vouchers: new VoucherStore(db),
      reconcile: new ReconcileStore(db),
    };
    built.set(db, stores);
  }
  return stores;
}
