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
import type { Ledger } from "../ledger/ledger";
import { buildMerkleTree, receiptLeaf, type CallReceipt } from "../chain/receipts";
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

/** A call id (a UUID) as the bytes32 a receipt carries: its 16 bytes, left-padded with zeros. */
export function callIdToBytes32(callId: string): Hex {
  if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(callId)) {
    throw new RangeError(`a call id must be a UUID, got "${callId}"`);
  }
  return `0x${"0".repeat(32)}${callId.replace(/-/g, "").toLowerCase()}`;
}

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
  tree: ReturnType<typeof buildMerkleTree>;
  batch: ContractBatch;
  totalDebits: bigint;
};

/** The ledger side of settlement: batch building, recording, rebuilding and receipts. */
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
  pending(): BatchRow | undefined {
    return this.store.pending();
  }

  /** The number of the last batch recorded, pending or settled; 0 before the first. */
  lastRecorded(): number {
    return this.store.lastNumber();
  }

  /** Captured calls not yet in a batch (including those waiting for a linked address). */
  unsettledCalls(): number {
    return this.store.unbatchedCount();
  }

  /** Keeps the hash of the transaction sent for pending batch `number`; run it inside a ledger operation. */
  setTxHash(number: number, hash: Hash): void {
    this.store.setTxHash(number, hash);
  }

  /** The call's batch, receipt and Merkle proof, for a receipt endpoint. Reads the ledger only. */
  receiptFor(callId: string): ReceiptForReturnType {
    let holdId: string;
    const call = this.store.callHold(callId);
    if (call) {
      if (call.hold_id === null) return { status: "not_charged" };
      holdId = call.hold_id;
    } else {
      // A hold captured outside the call path is named by its own id (see the file comment).
      const hold = this.store.hold(callId);
      if (!hold || hold.calls > 0n) return { status: "unknown_call" };
      holdId = callId;
    }
    const hold = this.store.hold(holdId);
    if (hold?.status !== "captured") return { status: "not_charged" };
    if (hold.batch_number === null) return { status: "unsettled" };
    const row = this.store.batch(hold.batch_number)!;
    const built = this.load(row);
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

  /**
   * Inside one ledger operation: takes the oldest unbatched captured calls whose payer and seller both have
   * a linked address (at most maxCallsPerBatch), builds batch `number` from them, records it and assigns them.
   */
  /** Accounts with captured calls not yet in a batch, and what those calls would debit them. */
  unbatchedDebits(): Map<string, bigint> {
    return this.store.unbatchedDebits();
  }

  recordNext(number: number, head: bigint, coverage?: ReadonlyMap<string, bigint>): BuiltBatch | undefined {
    const addressOf = this.addressResolver();
    // Calls whose payer or seller has no address cannot be settled; they wait, and the log says so.
    const unaddressed = new Set<string>();
    const missing = new Map<string, number>();
    let waiting = 0;
    for (const g of this.store.unbatchedGroups()) {
      const lacking = [g.account_id, g.seller_account_id].filter((id) => addressOf(id) === undefined);
      if (lacking.length === 0) continue;
      unaddressed.add(`${g.account_id}\u0000${g.seller_account_id}`);
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
      const page = this.store.unbatchedPage(after, this.maxCalls);
      if (page.length === 0) break;
      for (const row of page) {
        if (rows.length >= this.maxCalls || unaddressed.has(`${row.account_id}\u0000${row.seller_account_id}`)) continue;
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

    const built = buildBatch(number, rows, addressOf);
    const pending = this.store.pending();
    const recordedLast = this.store.lastNumber();
    if (pending || recordedLast !== number - 1)
      throw new Error(`batch ${number} cannot be recorded: the ledger's last batch is ${recordedLast}`);
    this.store.insertPending({
      number,
      receiptsRoot: built.tree.root.toLowerCase() as Hex,
      callCount: rows.length,
      totalDebitsMicros: built.totalDebits,
      platformFeeMicros: built.batch.platformFee,
      recordedAtBlock: head,
      createdAtMs: Date.now(),
    });
    // The holds are the ledger's: it alone moves them into the batch, in this same ledger operation.
    for (const id of built.holdIds) this.ledger.assignHoldToBatch(id, number);
    return built;
  }

  /** Rebuilds a recorded batch from its calls, and refuses one that is not what was recorded. */
  load(row: BatchRow): BuiltBatch {
    const number = Number(row.number);
    const cached = this.batchCache.get(number);
    if (cached) return cached;
    const rows = this.store.holdsOfBatch(number);
    const addressOf = this.addressResolver();
    for (const r of rows) {
      for (const id of [r.account_id, r.seller_account_id]) {
        if (!addressOf(id)) {
          throw new SettlementHaltedError("batch_mismatch", `batch ${number}: account ${id} has no linked address any more`, {
            batchNumber: number,
          });
        }
      }
    }
    const built = rows.length > 0 ? buildBatch(number, rows, addressOf) : undefined;
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

  private addressResolver(): (accountId: string) => Address | undefined {
    const cache = new Map<string, Address | undefined>();
    return (accountId) => {
      if (!cache.has(accountId)) cache.set(accountId, settlementAddress(this.addresses, accountId));
      return cache.get(accountId);
    };
  }

  /** Marks pending batch `number` settled, durably. */
  async markSettled(number: number, txHash: Hash | undefined): Promise<void> {
    await this.ledger.commit.runDurable(() => {
      if (!this.store.markSettled(number, txHash ?? null, Date.now())) {
        throw new Error(`batch ${number} was not pending when it was marked settled`);
      }
    });
  }
}

/**
 * Aggregates a batch's calls the way the escrow applies them: one debit per paying address (sum of amounts),
 * one credit per seller address (sum of seller shares, zero ones left out), the summed fee, and the Merkle
 * root of the receipts in the given order. Entries keep first-seen order, so the same calls in the same order
 * always give the same batch.
 */
function buildBatch(number: number, rows: readonly HoldRow[], addressOf: (accountId: string) => Address | undefined): BuiltBatch {
  const receipts: CallReceipt[] = [];
  const debits = new Map<Address, bigint>();
  const credits = new Map<Address, bigint>();
  let platformFee = 0n;
  let totalDebits = 0n;
  for (const row of rows) {
    const account = addressOf(row.account_id)!;
    const seller = addressOf(row.seller_account_id)!;
    receipts.push({ callId: callIdToBytes32(row.call_id ?? row.id), account, seller, amount: row.amount, platformFee: row.fee_amount });
    debits.set(account, (debits.get(account) ?? 0n) + row.amount);
    credits.set(seller, (credits.get(seller) ?? 0n) + row.seller_amount);
    platformFee += row.fee_amount;
    totalDebits += row.amount;
  }
  const tree = buildMerkleTree(receipts.map(receiptLeaf));
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
