/**
 * The deposit indexer: reads the escrow's `Deposited` logs and credits the ledger, once per log. It reads the
 * exit logs (`ExitRequested`, `ExitCancelled`, `ExitCompleted`) in the same requests and applies them through
 * ./exits.ts: one reader, so deposits and exits are applied in block and log order (a deposit followed by an
 * exit request in the next block is credited before the request freezes it), under the same confirmation
 * depth, exactly-once keys, durable progress and reorg checks. The progress row keeps its historical name
 * `deposits:<escrow>`, which reconciliation reads; a ledger that indexed blocks before exits were read
 * would have skipped their exit logs (no such ledger exists outside development).
 *
 * Safety comes from three choices. It never reads above `head - confirmations`, so a reorg of at most
 * `confirmations` blocks cannot touch anything it has read. Each chunk of blocks is one transaction: the
 * logs' rows in `chain_deposits` (keyed by tx hash and log index), their credits and the new `indexer_state`
 * commit together or not at all, so a crash or a repeated read cannot credit twice and a restart resumes
 * where the disk says. And it remembers the hash of the last block it finished: if the chain later has
 * another block at that height, a reorg deeper than the depth has replaced money it already credited, and
 * it stops with DeepReorgError instead of guessing.
 *
 * The chain is read outside any transaction (a transaction awaits only its own statements); the chunk's
 * transaction then checks that the progress on disk is still the one the chunk starts from. Two indexers on
 * one database (two replicas whose leaderships overlap, or a second process) are therefore harmless: the
 * chunk's transaction locks the progress row first (PostgreSQL), so the second waits for the first, then
 * finds the progress moved and gives its chunk up; the next poll carries on from the disk's progress. Before
 * the first chunk there is no row to lock: the second's writes then meet the first's keys (the deposit's
 * log, its credit, the progress row) and its transaction fails and is given up the same way. A log seen
 * twice never credits twice.
 */
import { getAbiItem, type Address, type GetLogsReturnType, type Hash } from "viem";
import { skillEscrowAbi } from "../chain/abi";
import type { Sql } from "../db/sql";
import type { Ledger } from "../ledger/ledger";
import { creditChainDeposit, depositMemo, normalizeAddress } from "./addresses";
import type { ChainDeposit } from "./addresses-store";
import type { AddressesStore } from "./addresses-store";
import type { ExitsStore } from "./exits-store";
import type { IndexerProgress, IndexerStore } from "./indexer-store";
import { settlementStores } from "./store";
import {
  applyExitEvent,
  EXIT_CANCELLED_EVENT,
  EXIT_COMPLETED_EVENT,
  EXIT_REQUESTED_EVENT,
  type ChainExitEvent,
  type PendingExit,
} from "./exits";
import { type LoopHealth, RetryLoop } from "../chain/retry-loop";
import { loggedErrorText } from "../error-log";

/** SkillEscrow's deposit event (contracts/SkillEscrow.sol). */
export const DEPOSITED_EVENT = getAbiItem({ abi: skillEscrowAbi, name: "Deposited" });

/** Every escrow event the indexer applies, read in one request per chunk. */
export const INDEXED_EVENTS = [DEPOSITED_EVENT, EXIT_REQUESTED_EVENT, EXIT_CANCELLED_EVENT, EXIT_COMPLETED_EVENT] as const;

/**
 * The RPC calls the indexer makes: any viem PublicClient, whatever its chain (a chain's block formatter, such as
 * Base's deposit transactions, does not matter here: only block hashes are read).
 */
export interface DepositIndexerClient {
  getBlockNumber(parameters: { cacheTime: number }): Promise<bigint>;
  getBlock(parameters: { blockNumber: bigint }): Promise<{ hash: Hash | null }>;
  getLogs(parameters: {
    address: Address;
    events: typeof INDEXED_EVENTS;
    fromBlock: bigint;
    toBlock: bigint;
    strict: true;
  }): Promise<GetLogsReturnType<undefined, typeof INDEXED_EVENTS, true, bigint, bigint>>;
}

export type DepositIndexerLog = (message: string, error?: unknown) => void;

export type DepositIndexerParameters = {
  ledger: Ledger;
  /** The tables the indexer records logs and progress in; by default settlement's stores on `ledger.db`. */
  stores?: { addresses: AddressesStore; exits: ExitsStore; indexer: IndexerStore };
  publicClient: DepositIndexerClient;
  escrowAddress: Address;
  /** The block that created the escrow: where a fresh database starts reading. */
  deployBlock: bigint;
  /** Blocks that must be mined on top of a deposit's block before it is credited (0: credit at the head). */
  confirmations: number;
  /** Most blocks per `eth_getLogs` request (and per transaction). Default 2,000. */
  batchBlocks?: number;
  /** Longest wait between retries after failed polls. Default 30 s. */
  maxBackoffMs?: number;
  /** Names this indexer's row in `indexer_state`. Default `deposits:<escrow address>`. */
  name?: string;
  log?: DepositIndexerLog;
  /**
   * Told about each exit request once it is durable in the ledger, so the gateway can have the settler post
   * the account's paid calls before `readyAt` (e.g. `settler.nudge()`). Must not throw.
   */
  onExitRequested?: (exit: PendingExit) => void;
};

/** What one poll did: the block range it read (empty when `toBlock < fromBlock`) and the deposits it found. */
export type PollReturnType = {
  fromBlock: bigint;
  toBlock: bigint;
  /** New deposits recorded in `chain_deposits`. */
  recorded: number;
  /** Of those, how many were credited to an account (the rest wait for their address to be linked). */
  credited: number;
  /** New exit logs applied (requests, cancellations, completions). */
  exits: number;
};

// Internal error, plain on purpose: it stops the indexer's loop (logged); no client request waits on it.
/** A failure retrying cannot fix: the indexer stops and someone must look. */
export class DepositIndexerError extends Error {
  override name = "DepositIndexerError";
}

/**
 * The chain no longer has the block the indexer last finished: a reorg deeper than the confirmation depth
 * (or a chain reset). Deposits already credited may no longer exist; nothing more is credited.
 */
export class DeepReorgError extends DepositIndexerError {
  override name = "DeepReorgError";
  constructor(
    readonly blockNumber: bigint,
    readonly indexedHash: string,
    /** The chain's hash at that height now; undefined if the chain is no longer that long. */
    readonly chainHash: string | undefined,
  ) {
    super(
      chainHash === undefined
        ? `deep reorg: block ${blockNumber} (indexed as ${indexedHash}) is above the chain's head`
        : `deep reorg: block ${blockNumber} was indexed as ${indexedHash}, the chain now has ${chainHash}`,
    );
  }
}

const MAX_SQLITE_INTEGER = 2n ** 63n - 1n;
const DEFAULT_BATCH_BLOCKS = 2_000;
const DEFAULT_MAX_BACKOFF_MS = 30_000;

const defaultLog: DepositIndexerLog = (message, error) =>
  console.error(`[indexer] ${message}`, error === undefined ? "" : loggedErrorText(error));

/** One log of a chunk, in chain order. */
type ChunkItem = { kind: "deposit"; deposit: ChainDeposit } | { kind: "exit"; exit: ChainExitEvent };

type IndexerState = IndexerProgress;

/** What a chunk's transaction did. */
type ChunkResult = { recorded: number; credited: number; waiting: number; exits: number; warnings: string[]; requested: PendingExit[] };

/** Thrown inside a chunk's transaction to undo it: another indexer recorded the chunk first. */
class ChunkTakenError extends Error {
  override name = "ChunkTakenError";
}

/**
 * Credits escrow deposits to the ledger. `poll()` does one step and may throw; `start()` runs it in a loop
 * that never throws (RPC and disk failures are logged and retried with backoff; a DepositIndexerError, such
 * as a deep reorg, is logged and ends the loop, see `fatalError`).
 */
export class DepositIndexer {
  readonly name: string;
  private readonly ledger: Ledger;
  private readonly stores: { addresses: AddressesStore; exits: ExitsStore; indexer: IndexerStore };
  private readonly client: DepositIndexerClient;
  private readonly escrow: Address;
  private readonly deployBlock: bigint;
  private readonly confirmations: bigint;
  private readonly batchBlocks: bigint;
  private readonly maxBackoffMs: number;
  private readonly log: DepositIndexerLog;
  private readonly onExitRequested: ((exit: PendingExit) => void) | undefined;

  /** Polls run one at a time: a manual poll during the loop's waits behind it. */
  private queue: Promise<unknown> = Promise.resolve();
  private readonly loop: RetryLoop<PollReturnType>;

  constructor(parameters: DepositIndexerParameters) {
    const { confirmations, batchBlocks = DEFAULT_BATCH_BLOCKS, maxBackoffMs = DEFAULT_MAX_BACKOFF_MS } = parameters;
    if (!Number.isSafeInteger(confirmations) || confirmations < 0) {
      throw new RangeError(`confirmations must be a non-negative integer, got ${confirmations}`);
    }
    if (!Number.isSafeInteger(batchBlocks) || batchBlocks < 1) {
      throw new RangeError(`batchBlocks must be a positive integer, got ${batchBlocks}`);
    }
    if (!Number.isFinite(maxBackoffMs) || maxBackoffMs < 1) throw new RangeError(`maxBackoffMs must be at least 1, got ${maxBackoffMs}`);
    if (parameters.deployBlock < 0n) throw new RangeError(`deployBlock must be >= 0, got ${parameters.deployBlock}`);
    const escrow = normalizeAddress(parameters.escrowAddress);
    if (!escrow) throw new RangeError(`escrowAddress is not an address: ${parameters.escrowAddress}`);
    this.ledger = parameters.ledger;
    this.stores = parameters.stores ?? settlementStores(parameters.ledger.db);
    this.client = parameters.publicClient;
    this.escrow = escrow;
    this.deployBlock = parameters.deployBlock;
    this.confirmations = BigInt(confirmations);
    this.batchBlocks = BigInt(batchBlocks);
    this.maxBackoffMs = maxBackoffMs;
    this.name = parameters.name ?? `deposits:${escrow}`;
    this.log = parameters.log ?? defaultLog;
    this.onExitRequested = parameters.onExitRequested;
    this.loop = new RetryLoop({
      step: () => this.poll(),
      isFatal: (error) => error instanceof DepositIndexerError,
      onFatal: (error) => this.safeLog(`stopped, no further deposits will be credited: ${(error as Error).message}`, error),
      onRetry: (error, failures, delayMs) => this.safeLog(`poll failed (${failures} in a row), retrying in ${delayMs} ms`, error),
    });
  }

  /**
   * One step: verifies the chain still has the last indexed block, then reads the deposits from there up to
   * `head - confirmations` in chunks, each chunk recorded, credited and made durable before the next.
   * Throws DeepReorgError if the chain under the indexed blocks changed; RPC and disk errors propagate
   * (whatever chunks finished before them stay done).
   */
  poll(): Promise<PollReturnType> {
    const run = this.queue.then(() => this.pollOnce());
    this.queue = run.catch(() => undefined);
    return run;
  }

  /** The last block fully indexed and its hash, or undefined before the first chunk. */
  async lastIndexed(): Promise<{ block: bigint; hash: string } | undefined> {
    const state = await this.readState();
    return state && { block: state.lastBlock, hash: state.lastBlockHash };
  }

  /**
   * Polls every `intervalMs` until `stop()`; after a failed poll waits twice as long as the last time, up to
   * `maxBackoffMs`. The loop never throws; `start` itself throws only when misused (running already).
   */
  start(intervalMs: number): void {
    if (this.loop.running) throw new Error("the deposit indexer is already running");
    if (!Number.isFinite(intervalMs) || intervalMs < 1) throw new RangeError(`intervalMs must be at least 1, got ${intervalMs}`);
    // The first retry waits twice the interval, and no retry waits less than the interval.
    this.loop.start({ intervalMs, retryFirstMs: intervalMs * 2, retryMaxMs: this.maxBackoffMs, retryMinMs: intervalMs });
  }

  /** Ends the loop and resolves once the poll in progress (if any) has finished. */
  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** Resolves when the loop ends, by `stop()` or by a fatal error. */
  whenStopped(): Promise<void> {
    return this.loop.whenStopped();
  }

  get running(): boolean {
    return this.loop.running;
  }

  /** The loop's recent record, for GET /readyz. */
  get health(): LoopHealth {
    return this.loop.health;
  }

  /** The error that stopped the loop, if one did (a deep reorg, an impossible log). */
  get fatalError(): DepositIndexerError | undefined {
    return this.loop.fatalError as DepositIndexerError | undefined;
  }

  private async pollOnce(): Promise<PollReturnType> {
    const head = await this.client.getBlockNumber({ cacheTime: 0 });
    let state = await this.readState();
    if (state) await this.assertChainHas(state, head);
    const fromBlock = state ? state.lastBlock + 1n : this.deployBlock;
    const toBlock = head - this.confirmations;
    let recorded = 0;
    let credited = 0;
    let exits = 0;
    for (let start = fromBlock; start <= toBlock;) {
      const end = start + this.batchBlocks - 1n < toBlock ? start + this.batchBlocks - 1n : toBlock;
      const chunk = await this.readChunk(start, end);
      const result = await this.recordChunk(state, end, chunk.endHash, chunk.items);
      if (result === "taken") {
        this.safeLog(`blocks ${start}..${end} were recorded by another indexer first; the next poll carries on from its progress`);
        break;
      }
      state = { lastBlock: end, lastBlockHash: chunk.endHash };
      recorded += result.recorded;
      credited += result.credited;
      exits += result.exits;
      if (result.waiting > 0) {
        this.safeLog(`${result.waiting} deposit(s) in blocks ${start}..${end} to addresses no account has linked; credited when linked`);
      }
      for (const warning of result.warnings) this.safeLog(warning);
      for (const exit of result.requested) {
        try {
          this.onExitRequested?.(exit);
        } catch (error) {
          this.safeLog("onExitRequested threw", error);
        }
      }
      start = end + 1n;
    }
    return { fromBlock, toBlock, recorded, credited, exits };
  }

  /** Throws DeepReorgError unless the chain still has the last indexed block, with the same hash. */
  private async assertChainHas(state: IndexerState, head: bigint): Promise<void> {
    if (head < state.lastBlock) throw new DeepReorgError(state.lastBlock, state.lastBlockHash, undefined);
    const hash = await this.blockHash(state.lastBlock);
    if (hash !== state.lastBlockHash) throw new DeepReorgError(state.lastBlock, state.lastBlockHash, hash);
  }

  /**
   * Reads one chunk's deposits and the hash of its last block. The block is read first: if the chain changes
   * between the two reads, either a log carries another hash for that block (caught here) or the stored hash
   * is the old chain's and the next poll's check catches it. Never the other way round, which could store a
   * new hash beside old logs.
   */
  private async readChunk(fromBlock: bigint, toBlock: bigint): Promise<{ endHash: string; items: ChunkItem[] }> {
    const endHash = await this.blockHash(toBlock);
    const logs = await this.client.getLogs({ address: this.escrow, events: INDEXED_EVENTS, fromBlock, toBlock, strict: true });
    const items: ChunkItem[] = [];
    for (const log of logs) {
      if (log.removed) continue;
      const blockHash = log.blockHash.toLowerCase();
      if (log.blockNumber < fromBlock || log.blockNumber > toBlock) {
        throw new DepositIndexerError(`the RPC returned a log of block ${log.blockNumber} for blocks ${fromBlock}..${toBlock}`);
      }
      if (log.blockNumber === toBlock && blockHash !== endHash) throw new DeepReorgError(toBlock, endHash, blockHash);
      const memo = depositMemo(log.transactionHash, log.logIndex);
      const position = {
        txHash: log.transactionHash.toLowerCase(),
        logIndex: log.logIndex,
        blockNumber: log.blockNumber,
        blockHash,
        address: normalizeAddress(log.args.account)!,
      };
      const amounts: bigint[] = [];
      let item: ChunkItem;
      switch (log.eventName) {
        case "Deposited":
          amounts.push(log.args.amount);
          item = { kind: "deposit", deposit: { ...position, sender: normalizeAddress(log.args.from)!, amountMicros: log.args.amount } };
          break;
        case "ExitRequested":
          amounts.push(log.args.amount, log.args.readyAt);
          item = { kind: "exit", exit: { ...position, kind: "requested", amountMicros: log.args.amount, readyAtSec: log.args.readyAt } };
          break;
        case "ExitCancelled":
          amounts.push(log.args.amount);
          item = { kind: "exit", exit: { ...position, kind: "cancelled", amountMicros: log.args.amount } };
          break;
        case "ExitCompleted":
          amounts.push(log.args.requested, log.args.paid);
          item = { kind: "exit", exit: { ...position, kind: "completed", requestedMicros: log.args.requested, paidMicros: log.args.paid } };
          break;
      }
      if (
        amounts.some((amount) => amount < 0n || amount > MAX_SQLITE_INTEGER) ||
        (log.eventName === "Deposited" && log.args.amount === 0n)
      ) {
        throw new DepositIndexerError(`${log.eventName} ${memo} has an amount the ledger cannot hold: ${amounts.join(", ")}`);
      }
      items.push(item);
    }
    const position = (item: ChunkItem) => (item.kind === "deposit" ? item.deposit : item.exit);
    items.sort((x, y) => {
      const a = position(x);
      const b = position(y);
      return a.blockNumber === b.blockNumber ? a.logIndex - b.logIndex : a.blockNumber < b.blockNumber ? -1 : 1;
    });
    return { endHash, items };
  }

  /**
   * Records and credits the chunk that ends at `toBlock` in one durable transaction. It starts right after
   * progress `from` (what the poll read); says "taken", the transaction undone, when another indexer
   * recorded it first (see the file comment).
   */
  private async recordChunk(
    from: IndexerState | undefined,
    toBlock: bigint,
    toBlockHash: string,
    items: ChunkItem[],
  ): Promise<ChunkResult | "taken"> {
    try {
      return await this.ledger.db.transaction((tx) => this.applyChunk(tx, from, toBlock, toBlockHash, items), { durable: true });
    } catch (error) {
      if (error instanceof ChunkTakenError) return "taken";
      // Before the first chunk there is no progress row to wait on, so a second indexer's chunk fails on what
      // the first one wrote meanwhile (a log's key, an exit it closed). If the progress has moved, that is
      // what happened: the chunk is done, by the other one.
      const disk = await this.readState().catch(() => from);
      if (!sameProgress(disk, from)) return "taken";
      throw error;
    }
  }

  /** Inside the chunk's transaction: records and credits a chunk's new logs and advances the progress. */
  private async applyChunk(
    tx: Sql,
    from: IndexerState | undefined,
    toBlock: bigint,
    toBlockHash: string,
    items: ChunkItem[],
  ): Promise<ChunkResult> {
    const { addresses, indexer } = this.stores;
    // Read again, locked, inside the transaction: the chunk must start right after what the disk says is done.
    const disk = await indexer.lockProgress(this.name, tx);
    if (!sameProgress(disk, from)) throw new ChunkTakenError("another indexer moved the progress first");
    let recorded = 0;
    let credited = 0;
    let exits = 0;
    const warnings: string[] = [];
    const requested: PendingExit[] = [];
    for (const item of items) {
      if (item.kind === "exit") {
        const result = await applyExitEvent(this.ledger, item.exit, this.stores, tx);
        if (result.outcome === "conflict") throw new DepositIndexerError(result.detail);
        if (result.outcome === "applied") {
          exits++;
          if (result.warning) warnings.push(result.warning);
          if (result.requested) requested.push(result.requested);
        }
        continue;
      }
      const { deposit } = item;
      const seen = await addresses.deposit(deposit.txHash, deposit.logIndex, tx);
      if (seen) {
        // Already recorded (the progress row lost, or an RPC repeating a log). The key says it is the same
        // log; if its contents differ, the chain is not the one we read.
        if (seen.address !== deposit.address || seen.amountMicros !== deposit.amountMicros) {
          throw new DepositIndexerError(
            `deposit ${depositMemo(deposit.txHash, deposit.logIndex)} was recorded as ${seen.amountMicros} to ${seen.address}, the chain now says ${deposit.amountMicros} to ${deposit.address}`,
          );
        }
        continue;
      }
      const accountId = await addresses.accountFor(deposit.address, tx);
      const entryId = accountId === undefined ? null : await creditChainDeposit(this.ledger, deposit, accountId, tx);
      // A deposit to an account with a pending exit short of its freeze goes to the freeze first (./exits.ts).
      if (accountId !== undefined) await this.ledger.topUpExitFreezes(accountId, tx);
      await addresses.recordDeposit(deposit, accountId ?? null, entryId, Date.now(), tx);
      recorded++;
      if (accountId !== undefined) credited++;
    }
    if (!(await indexer.advance(this.name, disk, { lastBlock: toBlock, lastBlockHash: toBlockHash }, Date.now(), tx))) {
      throw new ChunkTakenError("another indexer moved the progress first");
    }
    return { recorded, credited, waiting: recorded - credited, exits, warnings, requested };
  }

  /** The hash of a mined block, lowercase. */
  private async blockHash(blockNumber: bigint): Promise<string> {
    const { hash } = await this.client.getBlock({ blockNumber });
    if (!hash) throw new Error(`the RPC returned block ${blockNumber} without a hash`);
    return hash.toLowerCase();
  }

  private readState(): Promise<IndexerState | undefined> {
    return this.stores.indexer.progress(this.name);
  }

  private safeLog(message: string, error?: unknown): void {
    try {
      this.log(message, error);
    } catch {
      // A broken logger must not stop the money from being indexed.
    }
  }
}

function sameProgress(a: IndexerState | undefined, b: IndexerState | undefined): boolean {
  return a === undefined || b === undefined ? a === b : a.lastBlock === b.lastBlock && a.lastBlockHash === b.lastBlockHash;
}
