/**
 * The voucher sweep: settles the fate of the withdrawal vouchers ./vouchers.ts issued, from the chain.
 *
 * It reads the escrow's `VoucherRedeemed` logs by block range, as the deposit indexer reads deposits, instead of
 * asking the escrow about each open voucher: a run costs the same few RPC calls however many vouchers are open (the
 * head's number, the header of the block it read up to last time, then for each chunk of at most `logChunkBlocks`
 * blocks the chunk's last header and its logs). A redemption marks its voucher redeemed. A voucher still issued
 * once every log up to a block whose time is past its deadline has been read can never be redeemed: the escrow
 * refuses it in any block with a later time, and each block's time is later than its parent's. Its amount then
 * goes back to the account's available balance, as a `voucher_return` linked to it.
 *
 * Its progress (the last block read and its hash) is a row of `indexer_state` named `vouchers:<escrow>`, written in
 * the same durable transaction as the redemptions of the chunk it finishes, so what the row says was read has been
 * applied. It reads no higher than `head - confirmations` (the deposits' depth), and each run first checks that the
 * chain still has the block it last read: if not, a reorg deeper than that depth may have replaced a redemption it
 * relied on, and it stops with VoucherSweepReorgError rather than give money back on a chain it did not read.
 *
 * Runs never overlap: `sweep()` waits for the run in progress, and `start()` runs them in a RetryLoop, whose next
 * run starts only an interval after the last one ended (a slow chain slows the loop; it never stacks runs up). Two
 * sweepers on one database (two replicas whose leaderships overlap) are harmless: a chunk's transaction locks the
 * progress row and gives the chunk up if another sweeper moved it first, and a voucher leaves 'issued' by one
 * conditional UPDATE, so of two returns of the same voucher only one gives its amount back.
 */
import { getAbiItem, type Address, type GetLogsReturnType, type Hash } from "viem";
import { skillEscrowAbi } from "../chain/abi";
import { type LoopHealth, RetryLoop } from "../chain/retry-loop";
import type { Sql } from "../db/sql";
import type { Ledger } from "../ledger/ledger";
import { normalizeAddress } from "./addresses";
import type { IndexerProgress, IndexerStore } from "./indexer-store";
import type { VoucherStore } from "./vouchers-store";
import { loggedErrorText } from "../error-log";

/** SkillEscrow's redemption event (contracts/SkillEscrow.sol, withdrawWithVoucher). */
export const VOUCHER_REDEEMED_EVENT = getAbiItem({ abi: skillEscrowAbi, name: "VoucherRedeemed" });

/** The RPC calls the sweep makes: any viem PublicClient. */
export interface VoucherSweepClient {
  getBlockNumber(parameters: { cacheTime: number }): Promise<bigint>;
  getBlock(parameters: { blockNumber: bigint }): Promise<{ hash: Hash | null; timestamp: bigint }>;
  getLogs(parameters: {
    address: Address;
    event: typeof VOUCHER_REDEEMED_EVENT;
    fromBlock: bigint;
    toBlock: bigint;
    strict: true;
  }): Promise<GetLogsReturnType<typeof VOUCHER_REDEEMED_EVENT, [typeof VOUCHER_REDEEMED_EVENT], true, bigint, bigint>>;
}

export type VoucherSweeperParameters = {
  ledger: Ledger;
  stores: { vouchers: VoucherStore; indexer: IndexerStore };
  escrowAddress: Address;
  /** The escrow's deploy block: where the first run reads from when vouchers are open and nothing was read yet. */
  deployBlock: bigint;
  /** Blocks kept between the head and what is read, as for deposits (0: read up to the head). */
  confirmations: number;
  /** Most blocks per `eth_getLogs` request. Default 10,000, as reconciliation and x402 ask. */
  logChunkBlocks?: bigint;
  log?: (message: string, error?: unknown) => void;
};

/** What one run did: vouchers it found redeemed, and vouchers it gave back expired. */
export type SweepReturnType = { redeemed: number; returned: number };

// Internal error, plain on purpose: it stops the sweep's loop (logged); no client request waits on it.
/** A failure retrying cannot fix: the sweep stops and someone must look. */
export class VoucherSweepError extends Error {
  override name = "VoucherSweepError";
}

/** The chain no longer has the block the sweep last read: redemptions it applied, or the lack of them, may be gone. */
export class VoucherSweepReorgError extends VoucherSweepError {
  override name = "VoucherSweepReorgError";
}

const DEFAULT_LOG_CHUNK_BLOCKS = 10_000n;

/** Thrown inside a chunk's transaction to undo it: another sweeper recorded the chunk first. */
class ChunkTakenError extends Error {
  override name = "ChunkTakenError";
}

/** A block the sweep has read every redemption up to, and that block's time. */
type ReadUpTo = { progress: IndexerProgress; timestampSec: bigint };

export class VoucherSweeper {
  /** The sweep's row in `indexer_state`. */
  readonly name: string;
  private readonly p: VoucherSweeperParameters;
  private readonly escrow: Address;
  private readonly confirmations: bigint;
  private readonly logChunkBlocks: bigint;
  /** Runs go one at a time: a sweep asked for during a run waits for it. */
  private queue: Promise<unknown> = Promise.resolve();
  private loop: RetryLoop<SweepReturnType> | undefined;

  constructor(parameters: VoucherSweeperParameters) {
    const { confirmations, logChunkBlocks = DEFAULT_LOG_CHUNK_BLOCKS } = parameters;
    if (!Number.isSafeInteger(confirmations) || confirmations < 0) {
      throw new RangeError(`confirmations must be a non-negative integer, got ${confirmations}`);
    }
    if (logChunkBlocks < 1n) throw new RangeError(`logChunkBlocks must be at least 1, got ${logChunkBlocks}`);
    const escrow = normalizeAddress(parameters.escrowAddress);
    if (!escrow) throw new RangeError(`escrowAddress is not an address: ${parameters.escrowAddress}`);
    this.p = parameters;
    this.escrow = escrow as Address;
    this.confirmations = BigInt(confirmations);
    this.logChunkBlocks = logChunkBlocks;
    this.name = `vouchers:${escrow}`;
  }

  /**
   * One run, after the one in progress (if any) has ended: reads the redemptions since the last run and gives back
   * what expired unredeemed. Throws VoucherSweepReorgError after a deep reorg; RPC and disk errors propagate
   * (chunks and returns finished before them stay done).
   */
  sweep(client: VoucherSweepClient): Promise<SweepReturnType> {
    const run = this.queue.then(() => this.sweepOnce(client));
    this.queue = run.catch(() => undefined);
    return run;
  }

  /**
   * Sweeps every `intervalMs` (the first run at once) until `stop()`; after failed runs it waits longer, up to five
   * minutes. A VoucherSweepError ends the loop (logged). Throws only when misused (running already).
   */
  start(client: VoucherSweepClient, intervalMs: number): void {
    if (this.loop?.running) throw new Error("the voucher sweep is already running");
    if (!Number.isFinite(intervalMs) || intervalMs < 1) throw new RangeError(`intervalMs must be at least 1, got ${intervalMs}`);
    this.loop = new RetryLoop({
      step: () => this.sweep(client),
      isFatal: (error) => error instanceof VoucherSweepError,
      onFatal: (error) => this.safeLog(`stopped, no expired voucher will be given back: ${(error as Error).message}`, error),
      onRetry: (error, failures, delayMs) => this.safeLog(`sweep failed (${failures} in a row), retrying in ${delayMs} ms`, error),
    });
    this.loop.start({ intervalMs, retryFirstMs: intervalMs * 2, retryMaxMs: Math.max(intervalMs, 300_000), retryMinMs: intervalMs });
  }

  /** Ends the loop and resolves once the run in progress (if any) has finished. */
  async stop(): Promise<void> {
    await this.loop?.stop();
  }

  /** The loop's recent record. */
  get health(): LoopHealth | undefined {
    return this.loop?.health;
  }

  private async sweepOnce(client: VoucherSweepClient): Promise<SweepReturnType> {
    const { vouchers, indexer } = this.p.stores;
    // The head is read before anything about the vouchers: see the jump below.
    const head = await client.getBlockNumber({ cacheTime: 0 });
    const target = head - this.confirmations;
    const disk = await indexer.progress(this.name);
    let read: ReadUpTo | undefined;
    if (disk) {
      if (disk.lastBlock > head)
        throw new VoucherSweepReorgError(`deep reorg: block ${disk.lastBlock} was read, the chain's head is ${head}`);
      const block = await this.header(client, disk.lastBlock);
      if (block.hash !== disk.lastBlockHash) {
        throw new VoucherSweepReorgError(
          `deep reorg: block ${disk.lastBlock} was read as ${disk.lastBlockHash}, the chain now has ${block.hash}`,
        );
      }
      read = { progress: disk, timestampSec: block.timestampSec };
    }

    let redeemed = 0;
    const from = disk ? disk.lastBlock + 1n : this.p.deployBlock;
    if (from <= target && !(await vouchers.anyIssued())) {
      // No voucher is open, so no log up to the head read above can be about one of ours: a voucher issued from now
      // on is signed only after its row commits (./vouchers.ts), so it is redeemed in a block mined after that head.
      // The progress moves there without reading a log; an idle gateway, or a fresh one, never reads old blocks.
      const end = await this.header(client, target);
      if ((await this.record(read?.progress, target, end.hash, [])) !== "taken") {
        read = { progress: { lastBlock: target, lastBlockHash: end.hash }, timestampSec: end.timestampSec };
      }
    } else {
      for (let start = from; start <= target;) {
        const end = start + this.logChunkBlocks - 1n < target ? start + this.logChunkBlocks - 1n : target;
        const chunk = await this.readChunk(client, start, end);
        const result = await this.record(read?.progress, end, chunk.endHash, chunk.redemptions);
        if (result === "taken") {
          this.safeLog(`blocks ${start}..${end} were read by another sweep first; the next run carries on from its progress`);
          break;
        }
        redeemed += result;
        read = { progress: { lastBlock: end, lastBlockHash: chunk.endHash }, timestampSec: chunk.endTimestampSec };
        start = end + 1n;
      }
    }

    const returned = read ? await this.returnExpired(read.timestampSec) : 0;
    await this.p.ledger.db.durable();
    return { redeemed, returned };
  }

  /**
   * The redemptions in blocks `fromBlock..toBlock`, and that last block's hash and time. The header is read first,
   * as the deposit indexer does: if the chain changes between the two reads, a log of the last block carries
   * another hash (refused here, and read again next run), or the next run's check finds the stored hash gone.
   */
  private async readChunk(
    client: VoucherSweepClient,
    fromBlock: bigint,
    toBlock: bigint,
  ): Promise<{ endHash: string; endTimestampSec: bigint; redemptions: { address: string; nonce: bigint }[] }> {
    const end = await this.header(client, toBlock);
    const logs = await client.getLogs({ address: this.escrow, event: VOUCHER_REDEEMED_EVENT, fromBlock, toBlock, strict: true });
    const redemptions: { address: string; nonce: bigint }[] = [];
    for (const log of logs) {
      if (log.removed) continue;
      if (log.blockNumber < fromBlock || log.blockNumber > toBlock) {
        throw new VoucherSweepError(`the RPC returned a log of block ${log.blockNumber} for blocks ${fromBlock}..${toBlock}`);
      }
      if (log.blockNumber === toBlock && log.blockHash.toLowerCase() !== end.hash) {
        throw new Error(`block ${toBlock} changed while it was read (${end.hash}, then ${log.blockHash.toLowerCase()})`);
      }
      redemptions.push({ address: normalizeAddress(log.args.account)!, nonce: log.args.nonce });
    }
    return { endHash: end.hash, endTimestampSec: end.timestampSec, redemptions };
  }

  /**
   * Marks the chunk's redemptions and moves the progress from `from` to `toBlock`, in one durable transaction;
   * "taken", the transaction undone, when another sweeper moved the progress first. Returns how many vouchers it
   * marked redeemed (a redemption of a voucher another signer issued, or one already marked, changes nothing).
   */
  private async record(
    from: IndexerProgress | undefined,
    toBlock: bigint,
    toBlockHash: string,
    redemptions: { address: string; nonce: bigint }[],
  ): Promise<number | "taken"> {
    const { vouchers, indexer } = this.p.stores;
    try {
      return await this.p.ledger.db.transaction(
        async (tx: Sql) => {
          // Read again, locked: the chunk must start right after what the disk says was read.
          const disk = await indexer.lockProgress(this.name, tx);
          if (!sameProgress(disk, from)) throw new ChunkTakenError("another sweep moved the progress first");
          let redeemed = 0;
          for (const { address, nonce } of redemptions) if (await vouchers.settle(address, nonce, "redeemed", tx)) redeemed++;
          if (!(await indexer.advance(this.name, disk, { lastBlock: toBlock, lastBlockHash: toBlockHash }, Date.now(), tx))) {
            throw new ChunkTakenError("another sweep moved the progress first");
          }
          return redeemed;
        },
        { durable: true },
      );
    } catch (error) {
      if (error instanceof ChunkTakenError) return "taken";
      throw error;
    }
  }

  /** Gives back every voucher still issued whose deadline is before `chainTimeSec`, the time of a block read through. */
  private async returnExpired(chainTimeSec: bigint): Promise<number> {
    const { ledger, stores } = this.p;
    let returned = 0;
    for (const v of await stores.vouchers.issuedExpiredBefore(chainTimeSec)) {
      const gaveBack = await ledger.db.transaction(async (tx) => {
        // Only the sweep that moves the voucher out of 'issued' gives its amount back.
        if (!(await stores.vouchers.settle(v.address, v.nonce, "returned", tx))) return false;
        await ledger.returnVoucher(
          v.accountId,
          v.amountMicros,
          { address: v.address, nonce: v.nonce },
          `voucher ${v.address}:${v.nonce} expired unredeemed: returned`,
          tx,
        );
        return true;
      });
      if (gaveBack) returned++;
    }
    return returned;
  }

  /** A mined block's hash (lowercase) and time. */
  private async header(client: VoucherSweepClient, blockNumber: bigint): Promise<{ hash: string; timestampSec: bigint }> {
    const { hash, timestamp } = await client.getBlock({ blockNumber });
    if (!hash) throw new Error(`the RPC returned block ${blockNumber} without a hash`);
    return { hash: hash.toLowerCase(), timestampSec: timestamp };
  }

  private safeLog(message: string, error?: unknown): void {
    try {
      (this.p.log ?? ((m: string, e?: unknown) => console.error(`[vouchers] ${m}`, e === undefined ? "" : loggedErrorText(e))))(
        message,
        error,
      );
    } catch {
      // A broken logger must not stop expired vouchers from being given back.
    }
  }
}

function sameProgress(a: IndexerProgress | undefined, b: IndexerProgress | undefined): boolean {
  return a === undefined || b === undefined ? a === b : a.lastBlock === b.lastBlock && a.lastBlockHash === b.lastBlockHash;
}
