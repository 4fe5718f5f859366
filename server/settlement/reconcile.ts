/**
 * Reconciliation: does the escrow on-chain hold what the ledger says it should, address by address?
 *
 * The ledger's side is its settled view: what was deposited, minus what settled batches debited, minus what
 * was withdrawn, per escrow address; and what settled batches credited to each seller and to the treasury.
 * Unsettled holds and captures do not count: the chain has not seen them yet, by design. The chain's side is
 * read at one pinned block, so a block mined half-way through cannot make two reads disagree.
 *
 * A difference means money the two books disagree about: the settler stops on one (see ./settler.ts), and
 * `npm run reconcile` prints them.
 */
import { getAbiItem, getAddress, type Address, type Hex, type PublicClient } from "viem";
import { skillEscrowAbi } from "../chain/abi";
import type { Sql } from "../db/sql";
import { settlementAddress } from "./addresses";
import { callIdToBytes32 } from "../chain/receipts";
import type { AddressesStore } from "./addresses-store";
import type { PairSums, ReconcileBatchRow, ReconcileStore } from "./reconcile-store";
import { EXIT_COMPLETED_EVENT } from "./exits";
import { DEPOSITED_EVENT } from "./indexer";

/** SkillEscrow's event emitted once per applied batch; says which treasury received its fee. */
export const BATCH_SETTLED_EVENT = getAbiItem({ abi: skillEscrowAbi, name: "BatchSettled" });
const CLAIMED_EVENT = getAbiItem({ abi: skillEscrowAbi, name: "Claimed" });
const X402_SETTLED_EVENT = getAbiItem({ abi: skillEscrowAbi, name: "X402Settled" });

export type ReconcileClient = Pick<PublicClient, "getBlockNumber" | "getBlock" | "readContract" | "getLogs">;

export type ReconcileParameters = {
  /** The ledger's side: settlement's read-only view across the books, and who owns each address. */
  stores: { reconcile: ReconcileStore; addresses: AddressesStore };
  publicClient: ReconcileClient;
  escrowAddress: Address;
  /** First block to read escrow events from: the deploy block. Default 0. */
  fromBlock?: bigint;
  /** Most blocks per `eth_getLogs` request. Default 10,000. */
  logChunkBlocks?: bigint;
  /**
   * What earlier clean reconciliations of this process checked (the settler's, after each batch): given, only what
   * is new is checked again. Without it (`npm run reconcile`) every reconciliation checks everything.
   */
  memory?: ReconcileMemory;
};

/**
 * What a settler's reconciliations have already checked, so the one after each batch reads the batches new since the
 * last and the settled totals per (payer, seller), not every call ever settled: a full pass over the holds took about
 * 0.9 s at a million settled calls, on the event loop with SQLite, after every batch. The first reconciliation with a
 * memory checks everything, the settled totals against the holds included, and a clean one is remembered
 * (`remember`). What stays true between two is the schema's to keep (./schema.ts, version 29): a call is put into a
 * batch only while the batch is pending, and a call in a batch cannot change, move or go (holds_into_pending_batch,
 * holds_batched_final, holds_batch_once, holds_batched_kept), nor can a recorded batch (settlement_batches' triggers);
 * the database adds a batch's calls to the totals as it is marked settled, and the totals only grow. What the schema
 * does not refuse (a hand in the file inserting a batched call or a settled batch, or dropping a trigger) the next
 * process's first pass finds.
 */
export class ReconcileMemory {
  /** Batches whose calls were found to sum to their recorded totals. */
  readonly checkedBatches = new Set<number>();
  /** Whether the settled totals were found equal to what the settled batches' calls sum to. */
  totalsChecked = false;
  /** The escrow's events read up to a margin below the last head (the blocks after are read again). */
  events: ChainEvents | undefined;

  /** Takes a clean reconciliation's findings (`reconcile` answers them as `checked`). */
  remember(checked: ReconcileReturnType["checked"]): void {
    for (const number of checked.batches) this.checkedBatches.add(number);
    if (checked.totals) this.totalsChecked = true;
    if (checked.events) this.events = checked.events;
  }
}

/** Why two books disagree, in the order they are reported. */
export type ReconcileDifferenceCode =
  /** `balances(address)` differs from deposits − settled debits − withdrawals. */
  | "escrow_balance_mismatch"
  /** `earnings(address)` + what it claimed differs from what settled batches credited it. */
  | "earnings_mismatch"
  /** A settled batch's recorded root or totals differ from its calls or from its BatchSettled event. */
  | "batch_mismatch"
  /** The ledger marked a batch settled that the chain does not have. */
  | "batch_not_on_chain"
  /** The chain has a batch the ledger never recorded. */
  | "batch_not_in_ledger"
  /** An x402 payment's X402Settled event says another amount, fee or seller than the ledger recorded. */
  | "x402_mismatch"
  /** The ledger recorded an x402 payment settled that has no X402Settled event on-chain. */
  | "x402_not_on_chain"
  /** The chain settled an x402 payment (X402Settled) the ledger has no record of. */
  | "x402_not_in_ledger";

export type ReconcileDifference = {
  code: ReconcileDifferenceCode;
  /** One sentence a human can act on. */
  detail: string;
  address?: Address;
  accountIds?: string[];
  batchNumber?: number;
  /** What the ledger says, in base units. */
  ledgerMicros?: bigint;
  /** What the chain says, in base units. */
  chainMicros?: bigint;
};

export type ReconcileReturnType = {
  ok: boolean;
  /** The block every chain read was made at. */
  blockNumber: bigint;
  /** The chain's last batch number at that block. */
  lastBatchNumber: number;
  differences: ReconcileDifference[];
  addressesChecked: number;
  /** The applied batches compared with their BatchSettled events (every one, every pass; `checked.batches` says whose calls were summed). */
  batchesChecked: number;
  /**
   * The batches whose calls this pass summed against their recorded totals, and whether it checked the settled totals
   * against the holds: for a ReconcileMemory, once the result is clean.
   */
  checked: { batches: number[]; totals: boolean; events?: ChainEvents };
};

/**
 * The escrow's batch and claim events a reconciliation read, from `fromBlock` through `through`, for the next one to go
 * on from: a batch's event each and a sum an address, not an entry per call.
 */
export type ChainEvents = {
  escrow: Address;
  fromBlock: bigint;
  through: bigint;
  /** The hash of block `through` when it was read (none when nothing was read: `through` below `fromBlock`). */
  throughHash?: Hex;
  /** One a batch. */
  settled: Map<number, { receiptsRoot: Hex; callCount: bigint; totalDebits: bigint; platformFee: bigint; treasury: Address }>;
  /** What each seller (and the treasury) claimed, summed: one an address. */
  claimed: Map<Address, bigint>;
};

/** The last blocks below the head read again by every reconciliation with a memory: a reorganisation may replace them. */
const REREAD_BLOCKS = 64n;

function copyEvents(events: ChainEvents): ChainEvents {
  return { ...events, settled: new Map(events.settled), claimed: new Map(events.claimed) };
}

// Internal error, plain on purpose: for the reconcile command and readiness, never a client's answer.
/** The ledger cannot be compared (its schema predates settlement): not a difference, the check did not run. */
export class ReconcileError extends Error {
  override name = "ReconcileError";
}

/** What `reconcile` throws: ReconcileError, or the RPC client's error when the chain cannot be read. */
export type ReconcileErrorType = ReconcileError | Error;

const DEFAULT_LOG_CHUNK_BLOCKS = 10_000n;

/**
 * Compares the escrow's state at the current block with the ledger's settled view and returns every
 * difference (an empty list when the books agree). Throws when it cannot compare: an RPC failure, or
 * ReconcileError for a ledger without the settlement schema (every table it reads comes with a fully migrated one).
 *
 * Which batches count as applied is the chain's word: every recorded batch up to `lastBatchNumber()`, even
 * one the ledger still has as 'pending' (sent, not yet marked), so a check racing the settler stays clean.
 * Deposits are the ledger's deposit entries, attributed to the address the indexer saw them paid to (or,
 * for a deposit entry with no chain record, to the account's settlement address), plus the recorded deposits
 * still waiting for an address to be linked, plus `Deposited` logs the indexer has not reached yet (it
 * stays `confirmations` blocks behind the head on purpose, which must not read as missing money).
 *
 * Exits (./exits.ts): the ledger freezes a requested exit with exit_freeze entries, but the escrow pays only at
 * `completeExit`. So an exit counts at its own address once the pinned block has its completion: the ledger's
 * side subtracts what it took for it (frozen, which equals what was paid unless the escrow paid beyond the
 * freeze: that difference is then reported), or, for an address no account had linked, what was paid. A
 * pending, cancelled or replaced exit's entries net out against money the escrow still holds, so they count
 * nowhere; `ExitCompleted` logs above the indexer's progress are subtracted as read from the chain.
 */
export async function reconcile(parameters: ReconcileParameters): Promise<ReconcileReturnType> {
  const { stores, publicClient } = parameters;
  const escrow = getAddress(parameters.escrowAddress);
  const fromBlock = parameters.fromBlock ?? 0n;
  const chunk = parameters.logChunkBlocks ?? DEFAULT_LOG_CHUNK_BLOCKS;
  if (chunk < 1n) throw new RangeError(`logChunkBlocks must be positive, got ${chunk}`);
  // openDatabase migrates every database it opens, so only a handle opened some other way can lack the schema.
  if (!(await stores.reconcile.hasSettlementSchema())) {
    throw new ReconcileError(
      "the ledger lacks settlement_batches or settled_pair_totals: start the gateway on it once so that it migrates, then reconcile",
    );
  }

  const blockNumber = await publicClient.getBlockNumber({ cacheTime: 0 });
  const contract = { address: escrow, abi: skillEscrowAbi, blockNumber } as const;
  const lastBatchNumber = Number(await publicClient.readContract({ ...contract, functionName: "lastBatchNumber" }));
  const blockTimeSec = (await publicClient.getBlock({ blockNumber })).timestamp;

  // The ledger side, read in one snapshot so no write can land between two of its queries.
  const ledgerSide = await stores.reconcile.snapshot((sql) =>
    readLedgerSide(stores, sql, escrow, lastBatchNumber, blockNumber, blockTimeSec, parameters.memory),
  );
  const differences: ReconcileDifference[] = [...ledgerSide.differences];
  const missingX402: string[] = [];

  // The chain's events: settled batches (their treasury and totals) and claims. With a memory, those up to a margin
  // below its last head are taken from it, and only the blocks after are read.
  const known = parameters.memory?.events;
  const resume =
    known !== undefined &&
    known.fromBlock === fromBlock &&
    known.escrow === escrow &&
    known.through < blockNumber &&
    // The last block kept is still the chain's: no reorganisation deeper than the margin, no chain started anew.
    (known.throughHash === undefined || (await publicClient.getBlock({ blockNumber: known.through })).hash === known.throughHash);
  const events: ChainEvents = resume
    ? copyEvents(known)
    : { escrow, fromBlock, through: fromBlock - 1n, settled: new Map(), claimed: new Map() };
  // Blocks at most this far below the head are read again next time (a reorganisation may still replace them).
  const keepThrough = blockNumber - REREAD_BLOCKS;
  let kept: ChainEvents | undefined = events.through >= keepThrough ? copyEvents(events) : undefined;
  for (let start = events.through + 1n; start <= blockNumber; start = events.through + 1n) {
    let end = start + chunk - 1n < blockNumber ? start + chunk - 1n : blockNumber;
    // A chunk ends at the kept block, so that what is kept is exactly what was read up to it.
    if (kept === undefined && start <= keepThrough && end > keepThrough) end = keepThrough;
    // The kept block's hash is read before its logs: a reorganisation between the two then shows as a changed hash
    // next time (everything read again), never as old logs kept under the new chain's hash.
    const keptHash = end === keepThrough ? (await publicClient.getBlock({ blockNumber: end })).hash : undefined;
    const logs = await publicClient.getLogs({
      address: escrow,
      events: [BATCH_SETTLED_EVENT, CLAIMED_EVENT],
      fromBlock: start,
      toBlock: end,
      strict: true,
    });
    for (const log of logs) {
      if (log.removed) continue;
      if (log.eventName === "BatchSettled") {
        events.settled.set(Number(log.args.batchNumber), { ...log.args, treasury: getAddress(log.args.treasury) });
      } else {
        const seller = getAddress(log.args.seller);
        events.claimed.set(seller, (events.claimed.get(seller) ?? 0n) + log.args.amount);
      }
    }
    events.through = end;
    if (keptHash !== undefined) kept = { ...copyEvents(events), throughHash: keptHash };
  }
  const { settled: settledEvents, claimed } = events;
  // x402 settlements: one event an x402 call, from the deploy block every pass, as the ledger's x402 payments are read
  // whole (./reconcile-store.ts x402Payments): kept, they would grow the memory with every payment (docs/scaling.md).
  const x402Events = new Map<string, { payer: Address; seller: Address; amount: bigint; platformFee: bigint; treasury: Address }>();
  for (let start = fromBlock; start <= blockNumber; start += chunk) {
    const end = start + chunk - 1n < blockNumber ? start + chunk - 1n : blockNumber;
    const logs = await publicClient.getLogs({ address: escrow, event: X402_SETTLED_EVENT, fromBlock: start, toBlock: end, strict: true });
    for (const log of logs) {
      if (log.removed) continue;
      const { callId, payer, seller, amount, platformFee, treasury } = log.args;
      x402Events.set(callId.toLowerCase(), {
        payer: getAddress(payer),
        seller: getAddress(seller),
        amount,
        platformFee,
        treasury: getAddress(treasury),
      });
    }
  }
  // Deposits made on-chain above what the indexer has read (see the doc comment).
  const expectedBalance = new Map(ledgerSide.expectedBalance);
  if (ledgerSide.unindexedFrom !== undefined && ledgerSide.unindexedFrom <= blockNumber) {
    for (let start = ledgerSide.unindexedFrom; start <= blockNumber; start += chunk) {
      const end = start + chunk - 1n < blockNumber ? start + chunk - 1n : blockNumber;
      const logs = await publicClient.getLogs({
        address: escrow,
        events: [DEPOSITED_EVENT, EXIT_COMPLETED_EVENT],
        fromBlock: start,
        toBlock: end,
        strict: true,
      });
      for (const log of logs) {
        if (log.removed) continue;
        const address = getAddress(log.args.account);
        const change = log.eventName === "Deposited" ? log.args.amount : -log.args.paid;
        expectedBalance.set(address, (expectedBalance.get(address) ?? 0n) + change);
      }
    }
  }

  // Vouchers issued (their amount already out of the ledger) and not redeemed at the pinned block: the
  // escrow still holds that money.
  for (const voucher of ledgerSide.outstandingVouchers) {
    const address = getAddress(voucher.address);
    const used = await publicClient.readContract({ ...contract, functionName: "voucherNonceUsed", args: [address, voucher.nonce] });
    if (!used) expectedBalance.set(address, (expectedBalance.get(address) ?? 0n) + voucher.amount);
  }

  // Batches the ledger marked settled above the pinned block's last one: missing from the chain, unless a
  // batch settled while this check was reading (the settler marks a batch only after its receipt).
  if (ledgerSide.settledAbove.length > 0) {
    const latest = Number(await publicClient.readContract({ address: escrow, abi: skillEscrowAbi, functionName: "lastBatchNumber" }));
    for (const number of ledgerSide.settledAbove.filter((n) => n > latest)) {
      differences.push({
        code: "batch_not_on_chain",
        batchNumber: number,
        detail: `the ledger marked batch ${number} settled, the chain's last batch is ${latest}`,
      });
    }
  }

  // Batches: each applied batch has its event, and the event says what the ledger recorded.
  const expectedEarnings = new Map(ledgerSide.expectedEarnings);
  for (const batch of ledgerSide.appliedBatches) {
    const number = Number(batch.number);
    const event = settledEvents.get(number);
    if (!event) {
      differences.push({
        code: "batch_mismatch",
        batchNumber: number,
        detail: `batch ${number} has no BatchSettled event at or before block ${blockNumber}`,
      });
      continue;
    }
    const mismatches = [
      event.receiptsRoot.toLowerCase() !== batch.receipts_root
        ? `receipts root ${event.receiptsRoot} vs recorded ${batch.receipts_root}`
        : "",
      event.callCount !== batch.call_count ? `call count ${event.callCount} vs recorded ${batch.call_count}` : "",
      event.totalDebits !== batch.total_debits ? `total debits ${event.totalDebits} vs recorded ${batch.total_debits}` : "",
      event.platformFee !== batch.platform_fee ? `platform fee ${event.platformFee} vs recorded ${batch.platform_fee}` : "",
    ].filter(Boolean);
    if (mismatches.length > 0) {
      differences.push({ code: "batch_mismatch", batchNumber: number, detail: `batch ${number} on-chain: ${mismatches.join("; ")}` });
    }
    // The fee went to whoever was the treasury when the batch settled.
    expectedEarnings.set(event.treasury, (expectedEarnings.get(event.treasury) ?? 0n) + batch.platform_fee);
  }
  for (const number of settledEvents.keys()) {
    if (number <= lastBatchNumber && !ledgerSide.recordedNumbers.has(number)) {
      differences.push({
        code: "batch_not_in_ledger",
        batchNumber: number,
        detail: `the chain settled batch ${number}, which the ledger never recorded`,
      });
    }
  }

  // x402 payments: each X402Settled event credited its seller and its treasury; the ledger must know its call, with
  // the same split, and every payment the ledger recorded settled must have its event. A payment still settling
  // (mined, not yet recorded) counts as the chain says.
  const x402Known = new Set<string>();
  for (const payment of ledgerSide.x402) {
    const key = callIdToBytes32(payment.call_id);
    x402Known.add(key);
    const event = x402Events.get(key);
    if (!event) {
      if (payment.status === "settled") missingX402.push(payment.call_id);
      continue;
    }
    const sellerAddress = ledgerSide.x402Sellers.get(payment.seller_account_id);
    const mismatches = [
      event.amount !== payment.amount ? `amount ${event.amount} vs recorded ${payment.amount}` : "",
      event.platformFee !== payment.fee_amount ? `fee ${event.platformFee} vs recorded ${payment.fee_amount}` : "",
      sellerAddress !== event.seller ? `seller ${event.seller} vs the account's address ${sellerAddress ?? "(none)"}` : "",
    ].filter(Boolean);
    if (mismatches.length > 0) {
      differences.push({
        code: "x402_mismatch",
        accountIds: [payment.seller_account_id],
        detail: `x402 call ${payment.call_id}: ${mismatches.join("; ")}`,
      });
    }
    expectedEarnings.set(event.seller, (expectedEarnings.get(event.seller) ?? 0n) + (event.amount - event.platformFee));
    if (event.platformFee > 0n) expectedEarnings.set(event.treasury, (expectedEarnings.get(event.treasury) ?? 0n) + event.platformFee);
  }
  for (const [callId, event] of x402Events) {
    if (x402Known.has(callId)) continue;
    differences.push({
      code: "x402_not_in_ledger",
      address: event.seller,
      chainMicros: event.amount,
      detail: `the chain settled x402 call ${callId} (${event.amount} from ${event.payer}), which the ledger never recorded`,
    });
  }
  // Recorded settled after the pinned block was read: look again at the latest block before calling it missing.
  if (missingX402.length > 0) {
    const later = await publicClient.getLogs({
      address: escrow,
      event: X402_SETTLED_EVENT,
      fromBlock: blockNumber + 1n,
      toBlock: "latest",
      strict: true,
    });
    const seen = new Set(later.map((log) => log.args.callId.toLowerCase()));
    for (const callId of missingX402.filter((id) => !seen.has(callIdToBytes32(id)))) {
      differences.push({
        code: "x402_not_on_chain",
        detail: `the ledger recorded x402 call ${callId} settled, the chain has no X402Settled for it`,
      });
    }
  }

  // Address by address: escrowed balances, then earnings (claimed ones included).
  const addresses = new Set<Address>([
    ...expectedBalance.keys(),
    ...expectedEarnings.keys(),
    ...claimed.keys(),
    ...ledgerSide.linked.keys(),
  ]);
  for (const address of [...addresses].sort()) {
    const accountIds = ledgerSide.linked.get(address);
    const [balance, earnings] = await Promise.all([
      publicClient.readContract({ ...contract, functionName: "balances", args: [address] }),
      publicClient.readContract({ ...contract, functionName: "earnings", args: [address] }),
    ]);
    const wantBalance = expectedBalance.get(address) ?? 0n;
    if (balance !== wantBalance) {
      differences.push({
        code: "escrow_balance_mismatch",
        address,
        accountIds,
        ledgerMicros: wantBalance,
        chainMicros: balance,
        detail: `${address}${accountIds ? ` (${accountIds.join(", ")})` : ""}: the escrow holds ${balance}, the ledger's settled view says ${wantBalance}`,
      });
    }
    const wantCredited = expectedEarnings.get(address) ?? 0n;
    const credited = earnings + (claimed.get(address) ?? 0n);
    if (credited !== wantCredited) {
      differences.push({
        code: "earnings_mismatch",
        address,
        accountIds,
        ledgerMicros: wantCredited,
        chainMicros: credited,
        detail:
          `${address}${accountIds ? ` (${accountIds.join(", ")})` : ""}: earnings ${earnings} + claimed ` +
          `${claimed.get(address) ?? 0n} on-chain, settled batches credited ${wantCredited}`,
      });
    }
  }

  return {
    ok: differences.length === 0,
    blockNumber,
    lastBatchNumber,
    differences,
    addressesChecked: addresses.size,
    batchesChecked: ledgerSide.appliedBatches.length,
    checked: { ...ledgerSide.checked, events: kept },
  };
}

/** The ledger's settled view, keyed by checksummed escrow address, read on `sql` (one snapshot). */
async function readLedgerSide(
  { reconcile: books, addresses }: ReconcileParameters["stores"],
  sql: Sql,
  escrow: Address,
  lastBatchNumber: number,
  blockNumber: bigint,
  blockTimeSec: bigint,
  memory: ReconcileMemory | undefined,
) {
  const differences: ReconcileDifference[] = [];
  const expectedBalance = new Map<Address, bigint>();
  const expectedEarnings = new Map<Address, bigint>();
  const add = (map: Map<Address, bigint>, address: Address, amount: bigint) => map.set(address, (map.get(address) ?? 0n) + amount);

  const addressOf = new Map<string, Address | undefined>();
  const settlementAddressOf = async (accountId: string) => {
    if (!addressOf.has(accountId)) addressOf.set(accountId, await settlementAddress(addresses, accountId, sql));
    return addressOf.get(accountId);
  };

  // Batches: which the chain has applied, and whether the ledger agrees about each one's status.
  const batches: ReconcileBatchRow[] = await books.batches(sql);
  const recordedNumbers = new Set(batches.map((b) => Number(b.number)));
  const appliedBatches = batches.filter((b) => Number(b.number) <= lastBatchNumber);
  const settledAbove = batches.filter((b) => b.status === "settled" && Number(b.number) > lastBatchNumber).map((b) => Number(b.number));

  // Each applied batch's calls: the batch's recorded totals must be its calls' sums (once a process, with a memory).
  const checkedBatches: number[] = [];
  for (const b of appliedBatches) {
    if (memory?.checkedBatches.has(Number(b.number))) continue;
    checkedBatches.push(Number(b.number));
    const sums = await books.batchSums(b.number, sql);
    if (sums.calls !== b.call_count || sums.debits !== b.total_debits || sums.fees !== b.platform_fee) {
      differences.push({
        code: "batch_mismatch",
        batchNumber: Number(b.number),
        detail:
          `batch ${b.number} was recorded as ${b.call_count} calls, ${b.total_debits} debited, ${b.platform_fee} fee; ` +
          `its calls now sum to ${sums.calls}, ${sums.debits}, ${sums.fees}`,
      });
    }
  }

  // Settled debits and seller credits, per account, attributed to its settlement address: from every call, on a full
  // pass (which checks the settled totals too), or from the settled totals with the applied batches they differ by.
  const checkTotals = !memory?.totalsChecked;
  let perAccount: Omit<PairSums, "calls">[];
  if (checkTotals) {
    perAccount = await books.settledPerAccount(lastBatchNumber, sql);
    differences.push(...totalsDifferences(await books.settledTotals(sql), await books.settledPairSums(sql)));
  } else {
    // The totals count the settled batches; the chain's view is the batches up to its last: take away those settled
    // above it (each also reported below as batch_not_on_chain, unless it settled meanwhile), add the pending one it has.
    const pendingApplied = appliedBatches.filter((b) => b.status === "pending").map((b) => b.number);
    perAccount = addPairSums(
      await books.settledTotals(sql),
      await Promise.all(settledAbove.map((n) => books.batchPairSums(n, sql))),
      await Promise.all(pendingApplied.map((n) => books.batchPairSums(n, sql))),
    );
  }
  for (const row of perAccount) {
    const payer = await settlementAddressOf(row.account_id);
    const seller = await settlementAddressOf(row.seller_account_id);
    for (const [accountId, address] of [
      [row.account_id, payer],
      [row.seller_account_id, seller],
    ] as const) {
      if (address === undefined) {
        differences.push({
          code: "batch_mismatch",
          accountIds: [accountId],
          detail: `account ${accountId} is in a settled batch but has no linked address`,
        });
      }
    }
    if (payer) add(expectedBalance, payer, -row.debits);
    if (seller && row.credits > 0n) add(expectedEarnings, seller, row.credits);
  }

  // Deposits: chain deposits where the indexer saw them paid, other deposit entries at the settlement address.
  const deposits = await books.deposits(blockNumber, sql);
  for (const row of deposits) {
    const address = row.address !== null ? getAddress(row.address) : await settlementAddressOf(row.account_id);
    if (address === undefined) {
      differences.push({
        code: "escrow_balance_mismatch",
        accountIds: [row.account_id],
        ledgerMicros: row.amount,
        detail: `account ${row.account_id} has ${row.amount} of deposit entries but no linked address to find them at`,
      });
      continue;
    }
    add(expectedBalance, address, row.amount);
  }
  let unindexedFrom: bigint | undefined;
  {
    // Recorded deposits to addresses no account has linked: on-chain, not yet in any account.
    const waiting = await books.waitingDeposits(blockNumber, sql);
    for (const row of waiting) add(expectedBalance, getAddress(row.address), row.amount);
    const last = await books.indexedThrough(`deposits:${escrow.toLowerCase()}`, sql);
    if (last !== undefined) unindexedFrom = last + 1n;
  }

  // Withdrawals leave the account's available bucket when they are issued (server/settlement/vouchers.ts); the
  // escrow pays them later. An issued voucher is added back below unless the chain had used its nonce at
  // the pinned block. So is one the sweep has since marked redeemed, if it could still have been unused
  // then: its deadline had not passed at the pinned block (a voucher is redeemed before its deadline, so
  // one redeemed after the pinned block always has a deadline after it).
  const outstandingVouchers = await books.outstandingVouchers(blockTimeSec, sql);
  // An exit's entries are counted at the exit's own address, below.
  const withdrawals = await books.voucherWithdrawals(sql);
  for (const row of withdrawals) {
    const address = await settlementAddressOf(row.account_id);
    if (address) add(expectedBalance, address, -row.amount);
    else {
      differences.push({
        code: "escrow_balance_mismatch",
        accountIds: [row.account_id],
        detail: `account ${row.account_id} withdrew ${row.amount} but has no linked address`,
      });
    }
  }

  // Exits completed at or before the pinned block: what the ledger took for each (its linked entries, net),
  // or what the escrow paid for an address with no account behind it (see the doc comment of reconcile).
  {
    const completed = await books.completedExits(blockNumber, sql);
    for (const row of completed) add(expectedBalance, getAddress(row.address), -(row.account_id === null ? row.paid : row.taken));
  }

  // Every linked address is checked, even one the ledger expects nothing at.
  const linked = new Map<Address, string[]>();
  {
    const rows = await books.linkedAddresses(sql);
    for (const row of rows) {
      const address = getAddress(row.address);
      linked.set(address, [...(linked.get(address) ?? []), row.account_id]);
    }
  }

  // x402 payments, and the address each one's seller is settled at.
  const x402 = await books.x402Payments(sql);
  const x402Sellers = new Map<string, Address | undefined>();
  for (const payment of x402) {
    if (!x402Sellers.has(payment.seller_account_id))
      x402Sellers.set(payment.seller_account_id, await settlementAddressOf(payment.seller_account_id));
  }

  return {
    differences,
    checked: { batches: checkedBatches, totals: checkTotals },
    x402,
    x402Sellers,
    expectedBalance,
    expectedEarnings,
    appliedBatches,
    settledAbove,
    recordedNumbers,
    unindexedFrom,
    outstandingVouchers,
    linked,
  };
}

/** A (payer, seller) pair as a map's key. */
const pairKey = (row: { account_id: string; seller_account_id: string }) => `${row.account_id}\u0000${row.seller_account_id}`;

/** `totals`, less each of `minus` and plus each of `plus`, by (payer, seller); pairs left with nothing are left out. */
function addPairSums(totals: PairSums[], minus: PairSums[][], plus: PairSums[][]): PairSums[] {
  const pairs = new Map<string, PairSums>();
  const add = (row: PairSums, sign: bigint) => {
    const key = pairKey(row);
    const sum = pairs.get(key) ?? {
      account_id: row.account_id,
      seller_account_id: row.seller_account_id,
      calls: 0n,
      debits: 0n,
      credits: 0n,
    };
    sum.calls += sign * BigInt(row.calls);
    sum.debits += sign * BigInt(row.debits);
    sum.credits += sign * BigInt(row.credits);
    pairs.set(key, sum);
  };
  for (const row of totals) add(row, 1n);
  for (const rows of minus) for (const row of rows) add(row, -1n);
  for (const rows of plus) for (const row of rows) add(row, 1n);
  // In the order the query over every call gives: by payer, then seller (ids compared as the database's C collation).
  return [...pairs.values()]
    .filter((p) => p.calls !== 0n)
    .sort((a, b) => compareC(a.account_id, b.account_id) || compareC(a.seller_account_id, b.seller_account_id));
}

/** Byte order of two strings' UTF-8, as SQLite's BINARY and PostgreSQL's "C" collations order them. */
function compareC(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, "utf8"), Buffer.from(b, "utf8"));
}

/** Where the settled totals per (payer, seller) differ from what the settled batches' calls sum to: one difference a pair. */
function totalsDifferences(totals: PairSums[], sums: PairSums[]): ReconcileDifference[] {
  const byPair = new Map<string, { total?: PairSums; sum?: PairSums }>();
  for (const total of totals) byPair.set(pairKey(total), { total });
  for (const sum of sums) byPair.set(pairKey(sum), { ...byPair.get(pairKey(sum)), sum });
  const differences: ReconcileDifference[] = [];
  const show = (row: PairSums | undefined) => (row ? `${row.calls} calls, ${row.debits} debited, ${row.credits} credited` : "nothing");
  for (const { total, sum } of byPair.values()) {
    const same =
      total !== undefined &&
      sum !== undefined &&
      BigInt(total.calls) === BigInt(sum.calls) &&
      BigInt(total.debits) === BigInt(sum.debits) &&
      BigInt(total.credits) === BigInt(sum.credits);
    if (same) continue;
    const pair = (total ?? sum)!;
    differences.push({
      code: "batch_mismatch",
      accountIds: [pair.account_id, pair.seller_account_id],
      detail:
        `the settled totals of payer ${pair.account_id} and seller ${pair.seller_account_id} say ${show(total)}; ` +
        `their calls in settled batches sum to ${show(sum)}`,
    });
  }
  return differences;
}
