/**
 * The batch settler: turns paid calls (captured holds) into SkillEscrow settlement batches.
 *
 * One step (`runOnce`) follows DESIGN section 8: build a batch → record it → send → wait for the receipt →
 * mark it. Exactly-once across crashes rests on two facts. The batch is recorded as 'pending', with its calls
 * assigned to it, in one durable ledger operation before anything is sent, so a batch exists on the chain
 * only if the ledger has it. And the escrow accepts batch numbers strictly in order, each once, so a batch
 * sent twice is applied once. A restart therefore reads `lastBatchNumber()`: if the chain has the pending
 * batch, it is marked settled; if not, exactly that batch is rebuilt from its calls (and checked against its
 * recorded root and totals) and sent again.
 *
 * A receipt names its call by the call's id (a UUIDv7) as bytes32: the UUID's 16 bytes, left-padded with
 * zeros (`callIdToBytes32`), so anyone holding a receipt can read the call id back. A hold captured outside
 * the call path (no row in `calls`) is named by its hold id, also a UUIDv7.
 */
import {
  BaseError,
  ContractFunctionRevertedError,
  decodeErrorResult,
  getAddress,
  isHex,
  type Account,
  type Address,
  type Chain,
  type Hash,
  type Hex,
  type PublicClient,
  type Transport,
  type WalletClient,
} from "viem";
import type { Db } from "../ledger/db";
import type { Ledger } from "../ledger/ledger";
import { buildMerkleTree, receiptLeaf, type CallReceipt } from "./receipts";
import {
  BATCH_SETTLED_EVENT,
  ESCROW_SETTLEMENT_ABI,
  reconcile,
  settlementAddress,
  type ReconcileDifference,
  type ReconcileReturnType,
} from "./reconcile";
import { RetryLoop } from "./retry-loop";

export type SettlerLog = (message: string, error?: unknown) => void;

/** The RPC reads the settler makes. */
export type SettlerPublicClient = Pick<
  PublicClient,
  "getBlockNumber" | "readContract" | "simulateContract" | "waitForTransactionReceipt" | "getLogs" | "getTransaction"
>;

/** The settler's key: it must hold SETTLER_ROLE on the escrow. */
export type SettlerWalletClient = Pick<WalletClient<Transport, Chain | undefined, Account>, "account" | "chain" | "writeContract">;

export type SettlerParameters = {
  ledger: Ledger;
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

/** Why settlement stopped for good, until someone looks. */
export type SettlementHaltCode =
  /** The escrow refused the batch for a reason retrying cannot change (EscrowInsufficientBalance, a missing role, …). */
  | "batch_cannot_settle"
  /** A recorded batch no longer rebuilds to what was recorded, or the chain holds another root under its number. */
  | "batch_mismatch"
  /** The chain has batches the ledger never recorded (another settler, or a ledger restored from an old backup). */
  | "chain_ahead"
  /** The ledger has batches settled that the chain does not (a reset chain, or the wrong escrow). */
  | "chain_behind"
  /** The escrow's treasury is not `platformAddress`. */
  | "treasury_mismatch"
  /** Reconciliation found the chain and the ledger's settled view apart. */
  | "reconcile_failed";

/** A failure retrying will not fix. The loop stops on it; `runOnce` keeps throwing it. */
export class SettlementHaltedError extends Error {
  override name = "SettlementHaltedError";
  constructor(
    readonly code: SettlementHaltCode,
    message: string,
    readonly details: { batchNumber?: number; revert?: DecodedRevert; differences?: ReconcileDifference[]; cause?: unknown } = {},
  ) {
    super(`settlement halted (${code}): ${message}`, { cause: details.cause });
  }
}

/** A send that failed in a way worth retrying (RPC down, no receipt in time, a reverted transaction). */
export class SettlementSendError extends Error {
  override name = "SettlementSendError";
  constructor(
    message: string,
    readonly batchNumber: number,
    readonly revert?: DecodedRevert,
    cause?: unknown,
  ) {
    super(message, { cause });
  }
}

/** What `runOnce` throws: a halt (retrying cannot help), a failed send, or an RPC or disk error (retry). */
export type RunOnceErrorType = SettlementHaltedError | SettlementSendError | Error;

/** A contract revert, decoded. */
export type DecodedRevert = { errorName: string; args: readonly unknown[] };

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

/** Reverts that say the batch as built can never be applied. */
const PERMANENT_REVERTS: ReadonlySet<string> = new Set([
  "EscrowInsufficientBalance",
  "EscrowInvalidAccount",
  "EscrowZeroAmount",
  "EscrowEmptyBatch",
  "EscrowMissingReceiptsRoot",
  "EscrowBatchUnbalanced",
  "AccessControlUnauthorizedAccount",
]);

const DEFAULT_RECEIPT_TIMEOUT_MS = 120_000;
const DEFAULT_RETRY_BASE_MS = 1_000;
const DEFAULT_MAX_BACKOFF_MS = 60_000;
const DEFAULT_TRIGGER_CHECK_MS = 250;
const BATCH_CACHE_SIZE = 8;

const defaultLog: SettlerLog = (message, error) => console.error(`[settler] ${message}`, error ?? "");

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
type ContractBatch = {
  number: bigint;
  receiptsRoot: Hex;
  callCount: bigint;
  debits: { account: Address; amount: bigint }[];
  credits: { seller: Address; amount: bigint }[];
  platformFee: bigint;
};

/** A batch with everything needed to send it and to prove its calls. */
type BuiltBatch = {
  number: number;
  holdIds: string[];
  receipts: CallReceipt[];
  tree: ReturnType<typeof buildMerkleTree>;
  batch: ContractBatch;
  totalDebits: bigint;
};

type HoldRow = {
  id: string;
  account_id: string;
  seller_account_id: string;
  amount: bigint;
  seller_amount: bigint;
  fee_amount: bigint;
  closed_at: bigint;
  call_id: string | null;
};

type BatchRow = {
  number: bigint;
  status: "pending" | "settled";
  receipts_root: Hex;
  call_count: bigint;
  total_debits: bigint;
  platform_fee: bigint;
  recorded_at_block: bigint;
  tx_hash: Hash | null;
};

const HOLD_COLUMNS = `h.id, h.account_id, h.seller_account_id, h.amount, h.seller_amount, h.fee_amount, h.closed_at,
  (SELECT c.id FROM calls c WHERE c.hold_id = h.id LIMIT 1) AS call_id`;

/**
 * Settles paid calls on-chain in numbered batches. `runOnce()` does one step and may throw;
 * `start(intervalMs)` runs it in a loop that retries failures with exponential backoff and stops on a
 * SettlementHaltedError (see `fatalError`). Every settled batch is followed by `reconcile`; a difference halts.
 */
export class Settler {
  private readonly ledger: Ledger;
  private readonly db: Db;
  private readonly client: SettlerPublicClient;
  private readonly wallet: SettlerWalletClient;
  private readonly escrow: Address;
  private readonly platform: Address | undefined;
  private readonly maxCalls: number;
  private readonly triggerCalls: number;
  private readonly deployBlock: bigint;
  private readonly receiptTimeoutMs: number;
  private readonly retryBaseMs: number;
  private readonly maxBackoffMs: number;
  private readonly triggerCheckMs: number;
  private readonly log: SettlerLog;
  private readonly stmt;

  /** Steps run one at a time: a manual runOnce during the loop's waits behind it. */
  private queue: Promise<unknown> = Promise.resolve();
  private readonly loop: RetryLoop<RunOnceReturnType>;
  /** Set by any step that halts, the loop's or a manual one; never cleared, so `runOnce` keeps throwing it. */
  private fatal: SettlementHaltedError | undefined;
  /** Reconciliation runs before anything else after a start and after every batch, until it passes. */
  private reconcileDue = true;
  private lastReconcile: ReconcileReturnType | undefined;
  /** The last transaction sent for a batch, so a stuck one is replaced (same nonce) rather than queued behind. */
  private inFlight: { number: number; hash: Hash } | undefined;
  private waitingWithoutAddress = 0;
  private lastUnaddressedReport = "";
  private readonly batchCache = new Map<number, BuiltBatch>();

  constructor(parameters: SettlerParameters) {
    const { maxCallsPerBatch } = parameters;
    if (!Number.isSafeInteger(maxCallsPerBatch) || maxCallsPerBatch < 1) {
      throw new RangeError(`maxCallsPerBatch must be a positive integer, got ${maxCallsPerBatch}`);
    }
    const triggerCalls = parameters.triggerCalls ?? maxCallsPerBatch;
    if (!Number.isSafeInteger(triggerCalls) || triggerCalls < 1) throw new RangeError(`triggerCalls must be a positive integer, got ${triggerCalls}`);
    this.ledger = parameters.ledger;
    this.db = parameters.ledger.db;
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
    this.loop = new RetryLoop({
      step: () => this.runOnce(),
      isFatal: (error) => error instanceof SettlementHaltedError,
      onFatal: (error) =>
        this.safeLog(`SETTLEMENT HALTED, no further batches will be sent until this is resolved: ${(error as Error).message}`, error),
      onRetry: (error, failures, delayMs) =>
        this.safeLog(`settlement step failed (${failures} in a row), retrying in ${delayMs} ms: ${(error as Error).message}`, error),
      // A full batch means more may be waiting: go again at once.
      runAgainAtOnce: (result) => result.calls >= this.maxCalls,
      wakeWhen: { check: () => this.unsettledCalls() - this.waitingWithoutAddress >= this.triggerCalls, everyMs: this.triggerCheckMs },
    });
    const db = this.db;
    this.stmt = {
      pending: db.prepare(
        `SELECT number, status, receipts_root, call_count, total_debits, platform_fee, recorded_at_block, tx_hash
         FROM settlement_batches WHERE status = 'pending'`,
      ),
      batch: db.prepare(
        `SELECT number, status, receipts_root, call_count, total_debits, platform_fee, recorded_at_block, tx_hash
         FROM settlement_batches WHERE number = ?`,
      ),
      lastNumber: db.prepare("SELECT COALESCE(MAX(number), 0) FROM settlement_batches").pluck(),
      unbatchedGroups: db.prepare(
        `SELECT account_id, seller_account_id, COUNT(*) AS calls FROM holds
         WHERE status = 'captured' AND batch_number IS NULL GROUP BY account_id, seller_account_id`,
      ),
      unbatchedPage: db.prepare(
        `SELECT ${HOLD_COLUMNS} FROM holds h
         WHERE h.status = 'captured' AND h.batch_number IS NULL AND (h.closed_at, h.id) > (?, ?)
         ORDER BY h.closed_at, h.id LIMIT ?`,
      ),
      unbatchedCount: db.prepare("SELECT COUNT(*) FROM holds WHERE status = 'captured' AND batch_number IS NULL").pluck(),
      holdsOfBatch: db.prepare(`SELECT ${HOLD_COLUMNS} FROM holds h WHERE h.batch_number = ? ORDER BY h.closed_at, h.id`),
      insertBatch: db.prepare(
        `INSERT INTO settlement_batches (number, status, receipts_root, call_count, total_debits, platform_fee, recorded_at_block, created_at)
         VALUES (?, 'pending', ?, ?, ?, ?, ?, ?)`,
      ),
      assign: db.prepare("UPDATE holds SET batch_number = ? WHERE id = ? AND status = 'captured' AND batch_number IS NULL"),
      setTxHash: db.prepare("UPDATE settlement_batches SET tx_hash = ? WHERE number = ? AND status = 'pending'"),
      markSettled: db.prepare(
        "UPDATE settlement_batches SET status = 'settled', tx_hash = COALESCE(?, tx_hash), settled_at = ? WHERE number = ? AND status = 'pending'",
      ),
      callById: db.prepare("SELECT hold_id FROM calls WHERE id = ?"),
      holdById: db.prepare(
        "SELECT id, status, batch_number, (SELECT COUNT(*) FROM calls c WHERE c.hold_id = holds.id) AS calls FROM holds WHERE id = ?",
      ),
    };
  }

  /** One step: recover a pending batch, or build, record, send and mark the next one. See the file comment. */
  runOnce(): Promise<RunOnceReturnType> {
    const run = this.queue.then(() => this.step());
    this.queue = run.catch(() => undefined);
    return run;
  }

  /** Captured calls not yet in a batch (including those waiting for a linked address). */
  unsettledCalls(): number {
    return Number(this.stmt.unbatchedCount.get() as bigint);
  }

  /** The last reconciliation that passed, if any. */
  get lastReconciliation(): ReconcileReturnType | undefined {
    return this.lastReconcile;
  }

  /** The call's batch, receipt and Merkle proof, for a receipt endpoint. Reads the ledger only. */
  receiptFor(callId: string): ReceiptForReturnType {
    let holdId: string;
    const call = this.stmt.callById.get(callId) as { hold_id: string | null } | undefined;
    if (call) {
      if (call.hold_id === null) return { status: "not_charged" };
      holdId = call.hold_id;
    } else {
      // A hold captured outside the call path is named by its own id (see the file comment).
      const hold = this.stmt.holdById.get(callId) as { calls: bigint } | undefined;
      if (!hold || hold.calls > 0n) return { status: "unknown_call" };
      holdId = callId;
    }
    const hold = this.stmt.holdById.get(holdId) as { status: string; batch_number: bigint | null } | undefined;
    if (!hold || hold.status !== "captured") return { status: "not_charged" };
    if (hold.batch_number === null) return { status: "unsettled" };
    const row = this.stmt.batch.get(hold.batch_number) as BatchRow;
    const built = this.loadBatch(row);
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
    if (this.reconcileDue) await this.reconcileNow();
    const chainLast = await this.chainLastBatch();
    const pending = this.stmt.pending.get() as BatchRow | undefined;
    if (pending) return this.finishPending(pending, chainLast);

    const recordedLast = Number(this.stmt.lastNumber.get() as bigint);
    this.assertChainAt(chainLast, recordedLast);
    if (this.platform) {
      const treasury = getAddress(await this.client.readContract({ address: this.escrow, abi: ESCROW_SETTLEMENT_ABI, functionName: "treasury" }));
      if (treasury !== this.platform) {
        throw new SettlementHaltedError("treasury_mismatch", `the escrow's treasury is ${treasury}, the platform expects its fees at ${this.platform}`);
      }
    }
    const head = await this.client.getBlockNumber({ cacheTime: 0 });
    // Build, record and assign in one ledger operation: a batch either exists with all its calls or not at all.
    const built = this.ledger.commit.run(() => this.recordNext(chainLast + 1, head));
    if (!built) return { calls: 0, callsWithoutAddress: this.waitingWithoutAddress };
    await this.ledger.commit.durable();
    return this.sendAndMark(built);
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
        abi: ESCROW_SETTLEMENT_ABI,
        functionName: "receiptsRoots",
        args: [BigInt(number)],
      });
      if (root.toLowerCase() !== pending.receipts_root) {
        throw new SettlementHaltedError("batch_mismatch", `batch ${number} on-chain has root ${root}, the ledger recorded ${pending.receipts_root}`, {
          batchNumber: number,
        });
      }
      // Sent before a crash (or a lost answer): the chain has it, so it is only marked, never sent again.
      const txHash = await this.findSettlementTx(number, pending.recorded_at_block);
      await this.markSettled(number, txHash);
      this.safeLog(`batch ${number} was already on-chain${txHash ? ` (${txHash})` : ""}; marked settled`);
      await this.reconcileNow();
      return { batch: number, calls: Number(pending.call_count), callsWithoutAddress: this.waitingWithoutAddress };
    }
    if (chainLast < number - 1) {
      throw new SettlementHaltedError("chain_behind", `the chain's last batch is ${chainLast}, the ledger's pending batch is ${number}`, {
        batchNumber: number,
      });
    }
    return this.sendAndMark(this.loadBatch(pending));
  }

  private async sendAndMark(built: BuiltBatch): Promise<RunOnceReturnType> {
    const { number } = built;
    const hash = await this.send(built);
    // Kept for the record; a crash that loses it loses nothing, since a restart finds the batch's event.
    this.ledger.commit.run(() => this.stmt.setTxHash.run(hash, number));
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
    await this.markSettled(number, receipt.transactionHash);
    this.safeLog(
      `batch ${number} settled: ${built.receipts.length} call(s), ${built.totalDebits} debited, ${built.batch.platformFee} fee (${receipt.transactionHash})`,
    );
    await this.reconcileNow();
    return { batch: number, calls: built.receipts.length, callsWithoutAddress: this.waitingWithoutAddress };
  }

  /** Simulates, then sends `settle`; a stuck earlier transaction for the same batch is replaced. */
  private async send(built: BuiltBatch): Promise<Hash> {
    await this.simulate(built);
    const replacement = await this.replacementFor(built.number);
    try {
      const hash = await this.wallet.writeContract({
        address: this.escrow,
        abi: ESCROW_SETTLEMENT_ABI,
        functionName: "settle",
        args: [built.batch],
        account: this.wallet.account,
        chain: this.wallet.chain,
        ...replacement,
      });
      this.inFlight = { number: built.number, hash };
      return hash;
    } catch (error) {
      throw this.classify(error, built.number, "sending");
    }
  }

  private async simulate(built: BuiltBatch): Promise<void> {
    try {
      await this.client.simulateContract({
        address: this.escrow,
        abi: ESCROW_SETTLEMENT_ABI,
        functionName: "settle",
        args: [built.batch],
        account: this.wallet.account,
      });
    } catch (error) {
      throw this.classify(error, built.number, "simulating");
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

  private classify(error: unknown, number: number, doing: string): Error {
    const revert = decodeRevert(error);
    if (revert && PERMANENT_REVERTS.has(revert.errorName)) {
      return new SettlementHaltedError(
        "batch_cannot_settle",
        `batch ${number} reverts with ${revert.errorName}(${revert.args.map(String).join(", ")}) while ${doing}; retrying cannot change that`,
        { batchNumber: number, revert, cause: error },
      );
    }
    const reason = revert
      ? `${revert.errorName}(${revert.args.map(String).join(", ")})`
      : error instanceof BaseError
        ? error.shortMessage
        : (error as Error).message;
    return new SettlementSendError(`batch ${number}: failed while ${doing}: ${reason}`, number, revert, error);
  }

  /**
   * Inside one ledger operation: takes the oldest unbatched captured calls whose payer and seller both have
   * a linked address (at most maxCallsPerBatch), builds batch `number` from them, records it and assigns them.
   */
  private recordNext(number: number, head: bigint): BuiltBatch | undefined {
    const addressOf = this.addressResolver();
    // Calls whose payer or seller has no address cannot be settled; they wait, and the log says so.
    const unaddressed = new Set<string>();
    const missing = new Map<string, number>();
    let waiting = 0;
    for (const g of this.stmt.unbatchedGroups.all() as { account_id: string; seller_account_id: string; calls: bigint }[]) {
      const lacking = [g.account_id, g.seller_account_id].filter((id) => addressOf(id) === undefined);
      if (lacking.length === 0) continue;
      unaddressed.add(`${g.account_id}\u0000${g.seller_account_id}`);
      waiting += Number(g.calls);
      for (const id of lacking) missing.set(id, (missing.get(id) ?? 0) + Number(g.calls));
    }
    this.waitingWithoutAddress = waiting;
    const report = [...missing].map(([id, calls]) => `${id} (${calls} call(s))`).join(", ");
    if (report !== this.lastUnaddressedReport) {
      this.lastUnaddressedReport = report;
      if (report) this.safeLog(`${waiting} paid call(s) wait for a linked address and are not settled: ${report}`);
    }

    const rows: HoldRow[] = [];
    let after: [bigint, string] = [-1n, ""];
    while (rows.length < this.maxCalls) {
      const page = this.stmt.unbatchedPage.all(after[0], after[1], this.maxCalls) as HoldRow[];
      if (page.length === 0) break;
      for (const row of page) {
        if (rows.length < this.maxCalls && !unaddressed.has(`${row.account_id}\u0000${row.seller_account_id}`)) rows.push(row);
      }
      const last = page[page.length - 1];
      after = [last.closed_at, last.id];
    }
    if (rows.length === 0) return undefined;

    const built = buildBatch(number, rows, addressOf);
    const pending = this.stmt.pending.get();
    const recordedLast = Number(this.stmt.lastNumber.get() as bigint);
    if (pending || recordedLast !== number - 1) throw new Error(`batch ${number} cannot be recorded: the ledger's last batch is ${recordedLast}`);
    this.stmt.insertBatch.run(number, built.tree.root.toLowerCase(), rows.length, built.totalDebits, built.batch.platformFee, head, Date.now());
    for (const id of built.holdIds) {
      if (this.stmt.assign.run(number, id).changes !== 1) throw new Error(`hold ${id} was batched twice`);
    }
    return built;
  }

  /** Rebuilds a recorded batch from its calls, and refuses one that is not what was recorded. */
  private loadBatch(row: BatchRow): BuiltBatch {
    const number = Number(row.number);
    const cached = this.batchCache.get(number);
    if (cached) return cached;
    const rows = this.stmt.holdsOfBatch.all(number) as HoldRow[];
    const addressOf = this.addressResolver();
    for (const r of rows) {
      for (const id of [r.account_id, r.seller_account_id]) {
        if (!addressOf(id)) {
          throw new SettlementHaltedError("batch_mismatch", `batch ${number}: account ${id} has no linked address any more`, { batchNumber: number });
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
      if (!cache.has(accountId)) cache.set(accountId, settlementAddress(this.db, accountId));
      return cache.get(accountId);
    };
  }

  private async chainLastBatch(): Promise<number> {
    return Number(await this.client.readContract({ address: this.escrow, abi: ESCROW_SETTLEMENT_ABI, functionName: "lastBatchNumber" }));
  }

  private assertChainAt(chainLast: number, recordedLast: number): void {
    if (chainLast > recordedLast) {
      throw new SettlementHaltedError("chain_ahead", `the chain's last batch is ${chainLast}, the ledger recorded batches up to ${recordedLast}`);
    }
    if (chainLast < recordedLast) {
      throw new SettlementHaltedError("chain_behind", `the ledger settled batches up to ${recordedLast}, the chain's last batch is ${chainLast}`);
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

  private async markSettled(number: number, txHash: Hash | undefined): Promise<void> {
    await this.ledger.commit.runDurable(() => {
      if (this.stmt.markSettled.run(txHash ?? null, Date.now(), number).changes !== 1) {
        throw new Error(`batch ${number} was not pending when it was marked settled`);
      }
    });
  }

  private async reconcileNow(): Promise<void> {
    this.reconcileDue = true;
    const result = await reconcile({ db: this.db, publicClient: this.client, escrowAddress: this.escrow, fromBlock: this.deployBlock });
    if (!result.ok) {
      throw new SettlementHaltedError(
        "reconcile_failed",
        `the escrow and the ledger disagree at block ${result.blockNumber}: ${result.differences.map((d) => d.detail).join("; ")}`,
        { differences: result.differences },
      );
    }
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

/**
 * The custom error a contract call reverted with. Over HTTP viem decodes it (a ContractFunctionRevertedError
 * in the cause chain); Hardhat's in-process network only passes the raw revert data along, decoded here
 * against the escrow's ABI. Undefined when the failure is not a decodable revert (a network error, say).
 */
export function decodeRevert(error: unknown): DecodedRevert | undefined {
  if (error instanceof BaseError) {
    const reverted = error.walk((cause) => cause instanceof ContractFunctionRevertedError);
    if (reverted instanceof ContractFunctionRevertedError && reverted.data?.errorName) {
      return { errorName: reverted.data.errorName, args: reverted.data.args ?? [] };
    }
  }
  for (let cause: unknown = error, depth = 0; cause && typeof cause === "object" && depth < 16; cause = (cause as { cause?: unknown }).cause, depth++) {
    for (const data of [(cause as { data?: unknown }).data, ((cause as { data?: { data?: unknown } }).data as { data?: unknown } | undefined)?.data]) {
      if (typeof data !== "string" || !isHex(data) || data.length < 10) continue;
      try {
        const decoded = decodeErrorResult({ abi: ESCROW_SETTLEMENT_ABI, data });
        return { errorName: decoded.errorName, args: decoded.args ?? [] };
      } catch {
        // Not one of the escrow's errors; keep looking down the chain.
      }
    }
  }
  return undefined;
}
