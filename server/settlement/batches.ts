/**
 * Settlement batches in the ledger: which paid calls go into the next batch, recording it with its calls,
 * rebuilding a recorded batch exactly (and refusing one that no longer rebuilds to its record), marking it
 * settled, and the receipt and Merkle proof of a call in it. The settler (./settler.ts) decides when; this
 * file only reads and writes the ledger.
 *
 * A receipt names its call by the call's id (a UUIDv7) as bytes32: the UUID's 16 bytes, left-padded with
 * zeros (`callIdToBytes32`), so anyone holding a receipt can read the call id back. A hold captured outside
 * the call path (no row in `calls`) is named by its hold id, also a UUIDv7.
 */
import type { Address, Hash, Hex } from "viem";
import { isUniqueViolation, type Sql } from "../db/sql";
import type { Ledger } from "../ledger/ledger";
import { type CallReceipt, type MerkleTree, callIdToBytes32, receiptsTree } from "../chain/receipts";
import { settlementAddress } from "./addresses";
import type { AddressesStore } from "./addresses-store";
import type { BatchRow, BatchesStore, HoldRow } from "./batches-store";
import { settlementStores } from "./store";
import { SettlementHaltedError } from "./settlement-errors";

/** A settled (or pending) call's proof of inclusion, checkable with SkillEscrow.verifyReceipt. */
export type ReceiptForReturnType =
  | { status: "unknown_call" }
  /** The call charged nothing (it failed, or the skill is free): there is nothing to settle. */
  | { status: "not_charged" }
  /** Charged, not yet in a batch. */
  | { status: "unsettled" }
  | {
      status: "pending" | "settled";
      batchNumber: number;
      receiptsRoot: Hex;
      /** The settling transaction; null while pending (or if a restart could not find it). */
      txHash: Hash | null;
      receipt: CallReceipt;
      proof: Hex[];
    };

const BATCH_CACHE_SIZE = 8;

export { callIdToBytes32 } from "../chain/receipts";

/** The inverse of callIdToBytes32. */
export function bytes32ToCallId(value: Hex): string {
  if (!/^0x0{32}[0-9a-f]{32}$/i.test(value)) throw new RangeError(`not a padded UUID: ${value}`);
  const hex = value.slice(34).toLowerCase();
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** The escrow's Batch struct as viem encodes it. */
export type ContractBatch = {
  number: bigint;
  receiptsRoot: Hex;
  callCount: bigint;
  debits: { account: Address; amount: bigint }[];
  credits: { seller: Address; amount: bigint }[];
  platformFee: bigint;
};

/** A batch with everything needed to send it and to prove its calls. */
export type BuiltBatch = {
  number: number;
  holdIds: string[];
  receipts: CallReceipt[];
  tree: MerkleTree;
  batch: ContractBatch;
  totalDebits: bigint;
};

/** Resolves an account's settlement address, once per account: batch building asks it for every call. */
type AddressResolver = (accountId: string) => Promise<Address | undefined>;

/**
 * The ledger side of settlement: batch building, recording, rebuilding and receipts.
 *
 * Recording a batch is one transaction: it reads the unbatched captured holds, records the batch as pending
 * and has the ledger move its holds into it, so a batch exists with all its calls or not at all. Two
 * settlers on one database (two gateway replicas, by mistake) cannot both record one: at most one batch is
 * pending (a unique partial index) and its number is the table's key, so the second's insert fails and its
 * whole transaction with it; and a hold moves into a batch only while it is in none (Ledger.assignHoldToBatch).
 */
export class SettlementBatches {
  private readonly ledger: Ledger;
  private readonly maxCalls: number;
  private readonly log: (message: string) => void;
  private readonly store: BatchesStore;
  private readonly addresses: AddressesStore;
  /** Paid calls that wait for a linked address, as counted by the last `recordNext`. */
  private waiting = 0;
  private lastUnaddressedReport = "";
  private lastShortReport = "";
  private readonly batchCache = new Map<number, BuiltBatch>();

  constructor(parameters: {
    ledger: Ledger;
    maxCallsPerBatch: number;
    log: (message: string) => void;
    /** The batches' table and the linked addresses; by default settlement's stores on `ledger.db`. */
    stores?: { batches: BatchesStore; addresses: AddressesStore };
  }) {
    this.ledger = parameters.ledger;
    this.maxCalls = parameters.maxCallsPerBatch;
    this.log = parameters.log;
    const stores = parameters.stores ?? settlementStores(parameters.ledger.db);
    this.store = stores.batches;
    this.addresses = stores.addresses;
  }

  /** Paid calls not settled because a payer or seller has no linked address, as of the last `recordNext`. */
  get waitingWithoutAddress(): number {
    return this.waiting;
  }

  /** The batch recorded but not yet marked settled, if any (there is at most one). */
  pending(): Promise<BatchRow | undefined> {
    return this.store.pending();
  }

  /** The number of the last batch recorded, pending or settled; 0 before the first. */
  lastRecorded(): Promise<number> {
    return this.store.lastNumber();
  }

  /** Captured calls not yet in a batch (including those waiting for a linked address). */
  unsettledCalls(): Promise<number> {
    return this.store.unbatchedCount();
  }

  /** Keeps the hash of the transaction sent for pending batch `number` (not durably: a restart finds the batch's event). */
  setTxHash(number: number, hash: Hash): Promise<void> {
    return this.store.setTxHash(number, hash);
  }

  /** The call's batch, receipt and Merkle proof, for a receipt endpoint. Reads the ledger only. */
  async receiptFor(callId: string): Promise<ReceiptForReturnType> {
    let holdId: string;
    const call = await this.store.callHold(callId);
    if (call) {
      if (call.hold_id === null) return { status: "not_charged" };
      holdId = call.hold_id;
    } else {
      // A hold captured outside the call path is named by its own id (see the file comment).
      const hold = await this.store.hold(callId);
      if (!hold || hold.calls > 0n) return { status: "unknown_call" };
      holdId = callId;
    }
    const hold = await this.store.hold(holdId);
    if (hold?.status !== "captured") return { status: "not_charged" };
    if (hold.batch_number === null) return { status: "unsettled" };
    const row = (await this.store.batch(hold.batch_number))!;
    const built = await this.load(row);
    const index = built.holdIds.indexOf(holdId);
    return {
      status: row.status,
      batchNumber: built.number,
      receiptsRoot: built.tree.root,
      txHash: row.tx_hash,
      receipt: built.receipts[index],
      proof: built.tree.proof(index),
    };
  }

  /** Accounts with captured calls not yet in a batch, and what those calls would debit them. */
  unbatchedDebits(): Promise<Map<string, bigint>> {
    return this.store.unbatchedDebits();
  }

  /**
   * In one durable transaction: takes the oldest unbatched captured calls whose payer and seller both have
   * a linked address (at most maxCallsPerBatch), builds batch `number` from them, records it as pending and
   * has the ledger assign them to it. Undefined when no call can be batched. Throws (the transaction undone)
   * when the ledger is not at batch `number - 1` or another settler recorded a batch meanwhile.
   */
  async recordNext(number: number, head: bigint, coverage?: ReadonlyMap<string, bigint>): Promise<BuiltBatch | undefined> {
    try {
      return await this.ledger.db.transaction((tx) => this.record(tx, number, head, coverage), { durable: true });
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
      throw new Error(
        `batch ${number} was not recorded: another settler recorded a batch on this database at the same time (run one settler per database)`,
        { cause: error },
      );
    }
  }

  private async record(tx: Sql, number: number, head: bigint, coverage?: ReadonlyMap<string, bigint>): Promise<BuiltBatch | undefined> {
    const addressOf = this.addressResolver(tx);
    // Calls whose payer or seller has no address cannot be settled; they wait, and the log says so.
    const missing = new Map<string, number>();
    let waiting = 0;
    for (const g of await this.store.unbatchedGroups(tx)) {
      const lacking: string[] = [];
      for (const id of [g.account_id, g.seller_account_id]) if ((await addressOf(id)) === undefined) lacking.push(id);
      if (lacking.length === 0) continue;
      waiting += Number(g.calls);
      for (const id of lacking) missing.set(id, (missing.get(id) ?? 0) + Number(g.calls));
    }
    this.waiting = waiting;
    const report = [...missing].map(([id, calls]) => `${id} (${calls} call(s))`).join(", ");
    if (report !== this.lastUnaddressedReport) {
      this.lastUnaddressedReport = report;
      if (report) this.log(`${waiting} paid call(s) wait for a linked address and are not settled: ${report}`);
    }

    // With `coverage` (each account's escrow balance at `head`), a call that would debit its
    // account beyond that balance is held back: the escrow would refuse the whole batch for it.
    const debited = new Map<string, bigint>();
    const short = new Set<string>();
    const rows: HoldRow[] = [];
    let after: [bigint, string] = [-1n, ""];
    while (rows.length < this.maxCalls) {
      const page = await this.store.unbatchedPage(after, this.maxCalls, tx);
      if (page.length === 0) break;
      for (const row of page) {
        if (rows.length >= this.maxCalls) continue;
        // Asked per call, not of the groups above: on PostgreSQL each statement sees the latest commits, so
        // a page may hold a call captured since the groups were counted.
        if ((await addressOf(row.account_id)) === undefined || (await addressOf(row.seller_account_id)) === undefined) continue;
        if (coverage) {
          const total = (debited.get(row.account_id) ?? 0n) + row.amount;
          if (total > (coverage.get(row.account_id) ?? 0n)) {
            short.add(row.account_id);
            continue;
          }
          debited.set(row.account_id, total);
        }
        rows.push(row);
      }
      const last = page[page.length - 1];
      after = [last.closed_at, last.id];
    }
    const shortReport = [...short].sort().join(", ");
    if (shortReport !== this.lastShortReport) {
      this.lastShortReport = shortReport;
      if (shortReport) {
        this.log(
          `ESCROW SHORT: paid calls of ${shortReport} exceed what the escrow holds for them and are held back from settlement; the other accounts settle`,
        );
      }
    }
    if (rows.length === 0) return undefined;

    const built = buildBatch(number, rows, await resolveAll(addressOf, rows));
    const pending = await this.store.pending(tx);
    const recordedLast = await this.store.lastNumber(tx);
    if (pending || recordedLast !== number - 1)
      throw new Error(`batch ${number} cannot be recorded: the ledger's last batch is ${recordedLast}`);
    await this.store.insertPending(
      {
        number,
        receiptsRoot: built.tree.root.toLowerCase() as Hex,
        callCount: rows.length,
        totalDebitsMicros: built.totalDebits,
        platformFeeMicros: built.batch.platformFee,
        recordedAtBlock: head,
        createdAtMs: Date.now(),
      },
      tx,
    );
    // The holds are the ledger's: it alone moves them into the batch, in this same transaction.
    for (const id of built.holdIds) await this.ledger.assignHoldToBatch(id, number, tx);
    return built;
  }

  /** Rebuilds a recorded batch from its calls, and refuses one that is not what was recorded. */
  async load(row: BatchRow): Promise<BuiltBatch> {
    const number = Number(row.number);
    const cached = this.batchCache.get(number);
    if (cached) return cached;
    const rows = await this.store.holdsOfBatch(number);
    const addressOf = this.addressResolver();
    for (const r of rows) {
      for (const id of [r.account_id, r.seller_account_id]) {
        if (!(await addressOf(id))) {
          throw new SettlementHaltedError("batch_mismatch", `batch ${number}: account ${id} has no linked address any more`, {
            batchNumber: number,
          });
        }
      }
    }
    const built = rows.length > 0 ? buildBatch(number, rows, await resolveAll(addressOf, rows)) : undefined;
    if (
      !built ||
      built.tree.root.toLowerCase() !== row.receipts_root ||
      BigInt(rows.length) !== row.call_count ||
      built.totalDebits !== row.total_debits ||
      built.batch.platformFee !== row.platform_fee
    ) {
      throw new SettlementHaltedError(
        "batch_mismatch",
        `batch ${number} rebuilds to ${rows.length} call(s), root ${built?.tree.root}, ${built?.totalDebits} debited, ${built?.batch.platformFee} fee; ` +
          `recorded: ${row.call_count}, ${row.receipts_root}, ${row.total_debits}, ${row.platform_fee}`,
        { batchNumber: number },
      );
    }
    this.batchCache.set(number, built);
    if (this.batchCache.size > BATCH_CACHE_SIZE) this.batchCache.delete(this.batchCache.keys().next().value!);
    return built;
  }

  /** Settlement addresses read in `sql` (the database by default), each account's once. */
  private addressResolver(sql?: Sql): AddressResolver {
    const cache = new Map<string, Promise<Address | undefined>>();
    return (accountId) => {
      let address = cache.get(accountId);
      if (!address) {
        address = settlementAddress(this.addresses, accountId, sql);
        cache.set(accountId, address);
      }
      return address;
    };
  }

  /** Marks pending batch `number` settled, durably; throws if it was not pending (another settler marked it). */
  async markSettled(number: number, txHash: Hash | undefined): Promise<void> {
    await this.ledger.db.transaction(
      async (tx) => {
        if (!(await this.store.markSettled(number, txHash ?? null, Date.now(), tx))) {
          throw new Error(`batch ${number} was not pending when it was marked settled`);
        }
      },
      { durable: true },
    );
  }
}

/** The settlement address of every payer and seller of `rows`; each must have one (the caller checked). */
async function resolveAll(addressOf: AddressResolver, rows: readonly HoldRow[]): Promise<ReadonlyMap<string, Address | undefined>> {
  const addresses = new Map<string, Address | undefined>();
  for (const row of rows) {
    for (const id of [row.account_id, row.seller_account_id]) if (!addresses.has(id)) addresses.set(id, await addressOf(id));
  }
  return addresses;
}

/**
 * Aggregates a batch's calls the way the escrow applies them: one debit per paying address (sum of amounts),
 * one credit per seller address (sum of seller shares, zero ones left out), the summed fee, and the Merkle
 * root of the receipts in the given order. Entries keep first-seen order, so the same calls in the same order
 * always give the same batch.
 */
function buildBatch(number: number, rows: readonly HoldRow[], addresses: ReadonlyMap<string, Address | undefined>): BuiltBatch {
  const receipts: CallReceipt[] = [];
  const debits = new Map<Address, bigint>();
  const credits = new Map<Address, bigint>();
  let platformFee = 0n;
  let totalDebits = 0n;
  for (const row of rows) {
    const account = addresses.get(row.account_id)!;
    const seller = addresses.get(row.seller_account_id)!;
    receipts.push({ callId: callIdToBytes32(row.call_id ?? row.id), account, seller, amount: row.amount, platformFee: row.fee_amount });
    debits.set(account, (debits.get(account) ?? 0n) + row.amount);
    credits.set(seller, (credits.get(seller) ?? 0n) + row.seller_amount);
    platformFee += row.fee_amount;
    totalDebits += row.amount;
  }
  const tree = receiptsTree(receipts);
  return {
    number,
    holdIds: rows.map((r) => r.id),
    receipts,
    tree,
    totalDebits,
    batch: {
      number: BigInt(number),
      receiptsRoot: tree.root,
      callCount: BigInt(rows.length),
      debits: [...debits].map(([account, amount]) => ({ account, amount })),
      credits: [...credits].filter(([, amount]) => amount > 0n).map(([seller, amount]) => ({ seller, amount })),
      platformFee,
    },
  };
}
