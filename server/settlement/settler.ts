/**
 * The batch settler: turns paid calls (captured holds) into SkillEscrow settlement batches.
 *
 * One step (`runOnce`) follows docs/design.md §8: build a batch → record it → send → wait for the receipt →
 * mark it. Exactly-once across crashes rests on two facts. The batch is recorded as 'pending', with its calls
 * assigned to it, in one durable transaction before anything is sent (the sending happens outside any
 * transaction, and marking it settled is a transaction of its own), so a batch exists on the chain only if
 * the ledger has it. And the escrow accepts batch numbers strictly in order, each once, so a batch
 * sent twice is applied once. A restart therefore reads `lastBatchNumber()`: if the chain has the pending
 * batch, it is marked settled; if not, exactly that batch is rebuilt from its calls (and checked against its
 * recorded root and totals) and sent again.
 *
 * This file holds the orchestration and the chain side. The ledger side (building, recording and rebuilding
 * batches, receipts) is ./batches.ts; the errors are ./settlement-errors.ts; revert decoding is ./reverts.ts.
 */
import { getAddress, type Account, type Address, type Chain, type Hash, type PublicClient, type Transport, type WalletClient } from "viem";
import type { Ledger } from "../ledger/ledger";
import { SettlementBatches, type BuiltBatch, type ReceiptForReturnType } from "./batches";
import type { BatchRow } from "./batches-store";
import { skillEscrowAbi } from "../chain/abi";
import { settlementAddress } from "./addresses";
import { BATCH_SETTLED_EVENT, ReconcileMemory, reconcile, type ReconcileReturnType } from "./reconcile";
import { type SettlementStores, settlementStores } from "./store";
import { type LoopHealth, RetryLoop } from "../chain/retry-loop";
import { classifySendFailure, SettlementHaltedError, SettlementSendError } from "./settlement-errors";
import { loggedErrorText } from "../error-log";

export type SettlerLog = (message: string, error?: unknown) => void;

/** The RPC reads the settler makes. */
export type SettlerPublicClient = Pick<
  PublicClient,
  "getBlockNumber" | "getBlock" | "readContract" | "simulateContract" | "waitForTransactionReceipt" | "getLogs" | "getTransaction"
>;

/** The settler's key: it must hold SETTLER_ROLE on the escrow. */
export type SettlerWalletClient = Pick<WalletClient<Transport, Chain | undefined, Account>, "account" | "chain" | "writeContract">;

export type SettlerParameters = {
  ledger: Ledger;
  /** Settlement's tables; by default its stores on `ledger.db`. */
  stores?: SettlementStores;
  publicClient: SettlerPublicClient;
  walletClient: SettlerWalletClient;
  escrowAddress: Address;
  /**
   * Where the platform expects its fees. When given, a batch is not sent while the escrow's `treasury()` is
   * another address (the settler halts with `treasury_mismatch`).
   */
  platformAddress?: Address;
  /** Most calls in one batch. */
  maxCallsPerBatch: number;
  /** The loop settles early once this many calls wait (those without a linked address not counted). Default maxCallsPerBatch. */
  triggerCalls?: number;
  /** The escrow's deploy block: where reconciliation reads events from. Default 0. */
  deployBlock?: bigint;
  /** How long to wait for a sent batch's receipt before trying again. Default 120 s. */
  receiptTimeoutMs?: number;
  /** First retry delay after a failure; doubles per failure in a row. Default 1 s. */
  retryBaseMs?: number;
  /** Longest retry delay. Default 60 s. */
  maxBackoffMs?: number;
  /** How often the loop counts waiting calls between runs. Default 250 ms. */
  triggerCheckMs?: number;
  log?: SettlerLog;
};

/** What one step did: the batch it settled (if any), how many calls that batch covers, and how many wait for an address. */
export type RunOnceReturnType = { batch?: number; calls: number; callsWithoutAddress: number };

/** What `runOnce` throws: a halt (retrying cannot help), a failed send, or an RPC or disk error (retry). */
export type RunOnceErrorType = SettlementHaltedError | SettlementSendError | Error;

const DEFAULT_RECEIPT_TIMEOUT_MS = 120_000;
const DEFAULT_RETRY_BASE_MS = 1_000;
const DEFAULT_MAX_BACKOFF_MS = 60_000;
const DEFAULT_TRIGGER_CHECK_MS = 250;

const defaultLog: SettlerLog = (message, error) => console.error(`[settler] ${message}`, error === undefined ? "" : loggedErrorText(error));

/**
 * Settles paid calls on-chain in numbered batches. `runOnce()` does one step and may throw;
 * `start(intervalMs)` runs it in a loop that retries failures with exponential backoff and stops on a
 * SettlementHaltedError (see `fatalError`). Every settled batch is followed by `reconcile`; a difference halts.
 */
export class Settler {
  private readonly ledger: Ledger;
  private readonly stores: SettlementStores;
  private readonly client: SettlerPublicClient;
  private readonly wallet: SettlerWalletClient;
  private readonly escrow: Address;
  private readonly platform: Address | undefined;
  private readonly maxCalls: number;
  private readonly batches: SettlementBatches;
  private readonly triggerCalls: number;
  private readonly deployBlock: bigint;
  private readonly receiptTimeoutMs: number;
  private readonly retryBaseMs: number;
  private readonly maxBackoffMs: number;
  private readonly triggerCheckMs: number;
  private readonly log: SettlerLog;

  /** Steps run one at a time: a manual runOnce during the loop's waits behind it. */
  private queue: Promise<unknown> = Promise.resolve();
  private readonly loop: RetryLoop<RunOnceReturnType>;
  /** Set by any step that halts, the loop's or a manual one; never cleared, so `runOnce` keeps throwing it. */
  private fatal: SettlementHaltedError | undefined;
  /** Reconciliation runs before anything else after a start and after every batch, until it passes. */
  private reconcileDue = true;
  /** What this settler's clean reconciliations checked: the next reads only what is new (the first reads everything). */
  private readonly reconciled = new ReconcileMemory();
  private lastReconcile: ReconcileReturnType | undefined;
  /** The last transaction sent for a batch, so a stuck one is replaced (same nonce) rather than queued behind. */
  private inFlight: { number: number; hash: Hash } | undefined;
  /**
   * Calls ready to settle (unbatched, not waiting for an address) at the loop's last count, the count under
   * way, and how many steps have started (a count begun before a step is stale once the step has run).
   */
  private readyCalls = 0;
  private counting: Promise<void> | undefined;
  private stepsStarted = 0;

  constructor(parameters: SettlerParameters) {
    const { maxCallsPerBatch } = parameters;
    if (!Number.isSafeInteger(maxCallsPerBatch) || maxCallsPerBatch < 1) {
      throw new RangeError(`maxCallsPerBatch must be a positive integer, got ${maxCallsPerBatch}`);
    }
    const triggerCalls = parameters.triggerCalls ?? maxCallsPerBatch;
    if (!Number.isSafeInteger(triggerCalls) || triggerCalls < 1)
      throw new RangeError(`triggerCalls must be a positive integer, got ${triggerCalls}`);
    this.ledger = parameters.ledger;
    this.stores = parameters.stores ?? settlementStores(parameters.ledger.db);
    this.client = parameters.publicClient;
    this.wallet = parameters.walletClient;
    this.escrow = getAddress(parameters.escrowAddress);
    this.platform = parameters.platformAddress === undefined ? undefined : getAddress(parameters.platformAddress);
    this.maxCalls = maxCallsPerBatch;
    this.triggerCalls = triggerCalls;
    this.deployBlock = parameters.deployBlock ?? 0n;
    this.receiptTimeoutMs = parameters.receiptTimeoutMs ?? DEFAULT_RECEIPT_TIMEOUT_MS;
    this.retryBaseMs = parameters.retryBaseMs ?? DEFAULT_RETRY_BASE_MS;
    this.maxBackoffMs = parameters.maxBackoffMs ?? DEFAULT_MAX_BACKOFF_MS;
    this.triggerCheckMs = parameters.triggerCheckMs ?? DEFAULT_TRIGGER_CHECK_MS;
    this.log = parameters.log ?? defaultLog;
    this.batches = new SettlementBatches({
      ledger: this.ledger,
      stores: this.stores,
      maxCallsPerBatch,
      log: (message) => this.safeLog(message),
    });
    this.loop = new RetryLoop({
      step: () => this.runOnce(),
      isFatal: (error) => error instanceof SettlementHaltedError,
      onFatal: (error) =>
        this.safeLog(`SETTLEMENT HALTED, no further batches will be sent until this is resolved: ${(error as Error).message}`, error),
      onRetry: (error, failures, delayMs) =>
        this.safeLog(`settlement step failed (${failures} in a row), retrying in ${delayMs} ms: ${(error as Error).message}`, error),
      // A full batch means more may be waiting: go again at once.
      runAgainAtOnce: (result) => result.calls >= this.maxCalls,
      wakeWhen: { check: () => this.triggerReached(), everyMs: this.triggerCheckMs },
    });
  }

  /** One step: recover a pending batch, or build, record, send and mark the next one. See the file comment. */
  runOnce(): Promise<RunOnceReturnType> {
    const run = this.queue.then(() => this.step());
    this.queue = run.catch(() => undefined);
    return run;
  }

  /** Captured calls not yet in a batch (including those waiting for a linked address). */
  unsettledCalls(): Promise<number> {
    return this.batches.unsettledCalls();
  }

  /**
   * Whether `triggerCalls` calls wait, as of the last count; starts the next count. The loop asks this
   * synchronously every `triggerCheckMs`, so the answer it gets is one check old.
   */
  private triggerReached(): boolean {
    const steps = this.stepsStarted;
    this.counting ??= this.unsettledCalls()
      .then((calls) => {
        if (steps === this.stepsStarted) this.readyCalls = calls - this.batches.waitingWithoutAddress;
      })
      .catch(() => {
        // The next step meets (and reports) whatever broke the count.
      })
      .finally(() => {
        this.counting = undefined;
      });
    return this.readyCalls >= this.triggerCalls;
  }

  /** The last reconciliation that passed, if any. */
  get lastReconciliation(): ReconcileReturnType | undefined {
    return this.lastReconcile;
  }

  /** The call's batch, receipt and Merkle proof, for a receipt endpoint. Reads the ledger only. */
  receiptFor(callId: string): Promise<ReceiptForReturnType> {
    return this.batches.receiptFor(callId);
  }

  /**
   * Runs `runOnce` every `intervalMs` until `stop()`, and sooner once `triggerCalls` calls wait or `nudge()`
   * is called. A failure is logged and retried after retryBaseMs, doubling up to maxBackoffMs; a
   * SettlementHaltedError is logged loudly and ends the loop. Never throws.
   */
  start(intervalMs: number): void {
    if (this.loop.running) throw new Error("the settler is already running");
    if (!Number.isFinite(intervalMs) || intervalMs < 0) throw new RangeError(`intervalMs must be >= 0, got ${intervalMs}`);
    this.loop.start({ intervalMs, retryFirstMs: this.retryBaseMs, retryMaxMs: this.maxBackoffMs });
  }

  /** Ends the loop; resolves once the step in progress (if any) has finished. */
  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** Resolves when the loop ends, by `stop()` or by a halt. */
  whenStopped(): Promise<void> {
    return this.loop.whenStopped();
  }

  /** Wakes the loop for a step now, even during a retry backoff (a caller that knows calls are waiting). */
  nudge(): void {
    this.loop.nudge();
  }

  get running(): boolean {
    return this.loop.running;
  }

  /** The loop's recent record, for GET /readyz. */
  get health(): LoopHealth {
    return this.loop.health;
  }

  /** Why settlement stopped, if it did. */
  get fatalError(): SettlementHaltedError | undefined {
    return this.fatal;
  }

  private async step(): Promise<RunOnceReturnType> {
    if (this.fatal) throw this.fatal;
    try {
      return await this.stepUnguarded();
    } catch (error) {
      if (error instanceof SettlementHaltedError) this.fatal = error;
      throw error;
    }
  }

  private async stepUnguarded(): Promise<RunOnceReturnType> {
    // A count taken before this step may include calls it settles: the loop must not wake on it afterwards.
    this.stepsStarted++;
    this.readyCalls = 0;
    if (this.reconcileDue) await this.reconcileNow();
    const chainLast = await this.chainLastBatch();
    const pending = await this.batches.pending();
    if (pending) return this.finishPending(pending, chainLast);

    const recordedLast = await this.batches.lastRecorded();
    this.assertChainAt(chainLast, recordedLast);
    if (this.platform) {
      const treasury = getAddress(await this.client.readContract({ address: this.escrow, abi: skillEscrowAbi, functionName: "treasury" }));
      if (treasury !== this.platform) {
        throw new SettlementHaltedError(
          "treasury_mismatch",
          `the escrow's treasury is ${treasury}, the platform expects its fees at ${this.platform}`,
        );
      }
    }
    const head = await this.client.getBlockNumber({ cacheTime: 0 });
    const coverage = await this.coverage(head);
    // Build, record and assign in one durable transaction: a batch either exists with all its calls or not at
    // all, and it is on disk before it is sent.
    const built = await this.batches.recordNext(chainLast + 1, head, coverage);
    if (!built) return { calls: 0, callsWithoutAddress: this.batches.waitingWithoutAddress };
    return this.sendAndMark(built);
  }

  /**
   * What the escrow holds at `head` for each account with calls to settle. One account
   * short of its debit (an exit paid out before its calls settled, say) would make the
   * escrow refuse the whole batch; knowing this, the batch leaves that account's calls out
   * and everyone else still settles.
   */
  private async coverage(head: bigint): Promise<Map<string, bigint>> {
    const coverage = new Map<string, bigint>();
    for (const accountId of (await this.batches.unbatchedDebits()).keys()) {
      const address = await settlementAddress(this.stores.addresses, accountId);
      if (!address) continue;
      const balance = await this.client.readContract({
        address: this.escrow,
        abi: skillEscrowAbi,
        functionName: "balances",
        args: [address],
        blockNumber: head,
      });
      coverage.set(accountId, balance as bigint);
    }
    return coverage;
  }

  /** A pending batch: marked if the chain has it, otherwise rebuilt and sent again. */
  private async finishPending(pending: BatchRow, chainLast: number): Promise<RunOnceReturnType> {
    const number = Number(pending.number);
    if (chainLast >= number) {
      if (chainLast > number) {
        throw new SettlementHaltedError("chain_ahead", `the chain's last batch is ${chainLast}, the ledger's pending batch is ${number}`, {
          batchNumber: number,
        });
      }
      const root = await this.client.readContract({
        address: this.escrow,
        abi: skillEscrowAbi,
        functionName: "receiptsRoots",
        args: [BigInt(number)],
      });
      if (root.toLowerCase() !== pending.receipts_root) {
        throw new SettlementHaltedError(
          "batch_mismatch",
          `batch ${number} on-chain has root ${root}, the ledger recorded ${pending.receipts_root}`,
          {
            batchNumber: number,
          },
        );
      }
      // Sent before a crash (or a lost answer): the chain has it, so it is only marked, never sent again.
      const txHash = await this.findSettlementTx(number, pending.recorded_at_block);
      await this.batches.markSettled(number, txHash);
      this.safeLog(`batch ${number} was already on-chain${txHash ? ` (${txHash})` : ""}; marked settled`);
      await this.reconcileNow();
      return { batch: number, calls: Number(pending.call_count), callsWithoutAddress: this.batches.waitingWithoutAddress };
    }
    if (chainLast < number - 1) {
      throw new SettlementHaltedError("chain_behind", `the chain's last batch is ${chainLast}, the ledger's pending batch is ${number}`, {
        batchNumber: number,
      });
    }
    return this.sendAndMark(await this.batches.load(pending));
  }

  private async sendAndMark(built: BuiltBatch): Promise<RunOnceReturnType> {
    const { number } = built;
    const hash = await this.send(built);
    // Kept for the record; a crash that loses it loses nothing, since a restart finds the batch's event.
    await this.batches.setTxHash(number, hash);
    let receipt: { status: "success" | "reverted"; transactionHash: Hash };
    try {
      receipt = await this.client.waitForTransactionReceipt({ hash, timeout: this.receiptTimeoutMs });
    } catch (error) {
      throw new SettlementSendError(`batch ${number}: no receipt for ${hash} (${(error as Error).message})`, number, undefined, error);
    }
    if (receipt.status !== "success") {
      // Mined but reverted: ask the chain why, now. A batch that can never pass halts in simulate().
      await this.simulate(built);
      throw new SettlementSendError(`batch ${number}: transaction ${receipt.transactionHash} reverted`, number);
    }
    this.inFlight = undefined;
    // The receipt's hash, not ours: viem follows a transaction replaced by a faster one of the same nonce.
    await this.batches.markSettled(number, receipt.transactionHash);
    this.safeLog(
      `batch ${number} settled: ${built.receipts.length} call(s), ${built.totalDebits} debited, ${built.batch.platformFee} fee (${receipt.transactionHash})`,
    );
    await this.reconcileNow();
    return { batch: number, calls: built.receipts.length, callsWithoutAddress: this.batches.waitingWithoutAddress };
  }

  /** Simulates, then sends `settle`; a stuck earlier transaction for the same batch is replaced. */
  private async send(built: BuiltBatch): Promise<Hash> {
    await this.simulate(built);
    const replacement = await this.replacementFor(built.number);
    try {
      const hash = await this.wallet.writeContract({
        address: this.escrow,
        abi: skillEscrowAbi,
        functionName: "settle",
        args: [built.batch],
        account: this.wallet.account,
        chain: this.wallet.chain,
        ...replacement,
      });
      this.inFlight = { number: built.number, hash };
      return hash;
    } catch (error) {
      throw classifySendFailure(error, built.number, "sending");
    }
  }

  private async simulate(built: BuiltBatch): Promise<void> {
    try {
      await this.client.simulateContract({
        address: this.escrow,
        abi: skillEscrowAbi,
        functionName: "settle",
        args: [built.batch],
        account: this.wallet.account,
      });
    } catch (error) {
      throw classifySendFailure(error, built.number, "simulating");
    }
  }

  /** Same nonce and twice the fees of a still-pending earlier transaction for this batch; none otherwise. */
  private async replacementFor(number: number): Promise<{ nonce?: number; maxFeePerGas?: bigint; maxPriorityFeePerGas?: bigint }> {
    if (this.inFlight?.number !== number) return {};
    let previous;
    try {
      previous = await this.client.getTransaction({ hash: this.inFlight.hash });
    } catch {
      return {}; // Dropped from the mempool: a fresh transaction is right.
    }
    if (previous.blockNumber !== null || previous.maxFeePerGas === undefined) return {};
    this.safeLog(`batch ${number}: replacing stuck transaction ${this.inFlight.hash} (nonce ${previous.nonce}) with doubled fees`);
    return {
      nonce: previous.nonce,
      maxFeePerGas: previous.maxFeePerGas * 2n,
      maxPriorityFeePerGas: (previous.maxPriorityFeePerGas ?? 0n) * 2n,
    };
  }

  private async chainLastBatch(): Promise<number> {
    return Number(await this.client.readContract({ address: this.escrow, abi: skillEscrowAbi, functionName: "lastBatchNumber" }));
  }

  private assertChainAt(chainLast: number, recordedLast: number): void {
    if (chainLast > recordedLast) {
      throw new SettlementHaltedError(
        "chain_ahead",
        `the chain's last batch is ${chainLast}, the ledger recorded batches up to ${recordedLast}`,
      );
    }
    if (chainLast < recordedLast) {
      throw new SettlementHaltedError(
        "chain_behind",
        `the ledger settled batches up to ${recordedLast}, the chain's last batch is ${chainLast}`,
      );
    }
  }

  /** The transaction that emitted batch `number`'s BatchSettled event, searched from the block it was recorded at. */
  private async findSettlementTx(number: number, fromBlock: bigint): Promise<Hash | undefined> {
    try {
      const logs = await this.client.getLogs({
        address: this.escrow,
        event: BATCH_SETTLED_EVENT,
        args: { batchNumber: BigInt(number) },
        fromBlock,
        toBlock: "latest",
        strict: true,
      });
      return logs.find((log) => !log.removed)?.transactionHash;
    } catch (error) {
      this.safeLog(`batch ${number}: could not find its BatchSettled event; it is marked settled without a transaction hash`, error);
      return undefined;
    }
  }

  private async reconcileNow(): Promise<void> {
    this.reconcileDue = true;
    const result = await reconcile({
      stores: this.stores,
      publicClient: this.client,
      escrowAddress: this.escrow,
      fromBlock: this.deployBlock,
      memory: this.reconciled,
    });
    if (!result.ok) {
      throw new SettlementHaltedError(
        "reconcile_failed",
        `the escrow and the ledger disagree at block ${result.blockNumber}: ${result.differences.map((d) => d.detail).join("; ")}`,
        { differences: result.differences },
      );
    }
    this.reconciled.remember(result.checked);
    this.reconcileDue = false;
    this.lastReconcile = result;
  }

  private safeLog(message: string, error?: unknown): void {
    try {
      this.log(message, error);
    } catch {
      // A broken logger must not stop settlement.
    }
  }
}
