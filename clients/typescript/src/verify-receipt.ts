import type { SettledCallReceipt } from "./receipt";

/**
 * verifyReceipt: checks a call's settlement receipt against the chain alone. The receipt (fetched once from the
 * gateway, or a saved copy) names a batch, the call's receipt and a Merkle proof; the escrow's `receiptsRoots(batch)`
 * is read over an RPC URL the caller chooses, and the receipt is proven only when its leaf, folded with the proof
 * (sorted-pair keccak, OpenZeppelin's MerkleProof), gives that root. Nothing of the gateway is trusted or contacted.
 *
 * viem does the chain's part; it is loaded when a receipt is checked, so the SDK's other uses do not need it
 * (the SDK declares it as an optional peer dependency).
 */

/** Why a receipt is not proven, one code per answer (the CLI gives each its exit code). */
export type ReceiptFailureCode =
  /** Not a receipt: missing or malformed fields. */
  | "invalid_receipt"
  /** The receipt contradicts itself: its fields do not hash to its leaf, its call ids differ, or it is another call's. */
  | "tampered_receipt"
  /** The leaf and the proof do not lead to the escrow's root for the batch. */
  | "wrong_proof"
  /** No receipt yet: the call was not charged, waits for its batch, or its batch is not on this chain yet. */
  | "unsettled"
  /** The RPC's chain is not the receipt's, or holds no escrow at the address. */
  | "wrong_chain"
  /** The RPC did not answer. */
  | "chain_unreachable";

export interface ReceiptFailure {
  ok: false;
  code: ReceiptFailureCode;
  /** One sentence saying what was found. */
  message: string;
  /** The call the receipt names, when it names one. */
  callId?: string;
  cause?: unknown;
}

/** What a proven receipt establishes: this call, with these amounts, is in this batch the escrow recorded on-chain. */
export interface ProvenReceipt {
  ok: true;
  callId: string;
  /** The payer's and the seller's addresses. */
  account: string;
  seller: string;
  /** What the account paid, the seller's share and the platform's fee, in USDC base units (micro-USDC). */
  amountMicros: bigint;
  sellerShareMicros: bigint;
  platformFeeMicros: bigint;
  batchNumber: number;
  /** The batch's root, read from the escrow. */
  receiptsRoot: string;
  leaf: string;
  escrow: string;
  chainId: number;
  /** The block and transaction that posted the batch (null when the receipt names no transaction the chain confirms). */
  blockNumber: bigint | null;
  txHash: string | null;
  /** Blocks on top of blockNumber's, itself included (null with blockNumber). */
  confirmations: bigint | null;
}

export type VerifyReceiptResult = ProvenReceipt | ReceiptFailure;

/** An EIP-1193 provider: anything with `request({ method, params })`, a viem client included. */
export interface Eip1193Provider {
  request(args: { method: string; params?: unknown }): Promise<unknown>;
}

export interface VerifyReceiptOptions {
  /** The JSON-RPC URL of the chain to check against (yours: the gateway's is not needed). */
  rpcUrl?: string;
  /** A provider instead of rpcUrl. */
  provider?: Eip1193Provider;
  /** The escrow to check against; default the one the receipt names. */
  escrow?: string;
  /** The call the receipt must be for (as asked of the gateway). */
  callId?: string;
  /** The longest one RPC request may take. Default 10000. */
  timeoutMs?: number;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const BYTES32 = /^0x[0-9a-fA-F]{64}$/;
const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const UINT = /^(0|[1-9]\d{0,77})$/;
const MAX_UINT256 = (1n << 256n) - 1n;
const ZERO_ROOT = `0x${"0".repeat(64)}`;

const ESCROW_ABI = [
  {
    type: "function",
    name: "receiptsRoots",
    stateMutability: "view",
    inputs: [{ name: "batchNumber", type: "uint256" }],
    outputs: [{ name: "root", type: "bytes32" }],
  },
] as const;
const BATCH_SETTLED_TOPIC_SIGNATURE = "BatchSettled(uint256,bytes32,uint256,uint256,uint256,address)";

/** A call id (a UUID) as the bytes32 a receipt carries: its 16 bytes, left-padded with zeros. */
export function callIdToBytes32(callId: string): string {
  if (!UUID.test(callId)) throw new RangeError(`a call id must be a UUID, got "${callId}"`);
  return `0x${"0".repeat(32)}${callId.replace(/-/g, "").toLowerCase()}`;
}

const fail = (code: ReceiptFailureCode, message: string, callId?: string, cause?: unknown): ReceiptFailure => ({
  ok: false,
  code,
  message,
  ...(callId === undefined ? {} : { callId }),
  ...(cause === undefined ? {} : { cause }),
});

/** The receipt inside what was given: GET /v1/calls/:id/receipt's whole answer, or its `data`. */
function unwrap(input: unknown): Record<string, unknown> | undefined {
  if (typeof input !== "object" || input === null || Array.isArray(input)) return undefined;
  const record = input as Record<string, unknown>;
  if (record.success === true && typeof record.data === "object" && record.data !== null) return record.data as Record<string, unknown>;
  return record;
}

/** The receipt's fields checked for form; a string saying what is wrong otherwise. */
function parse(view: Record<string, unknown>): SettledCallReceipt | string {
  const r = view.receipt as Record<string, unknown> | undefined;
  if (typeof view.call_id !== "string" || !UUID.test(view.call_id)) return "call_id is not a call id (a UUID)";
  if (!Number.isSafeInteger(view.batch_number) || (view.batch_number as number) < 1) return "batch_number is not a batch number";
  if (typeof r !== "object" || r === null) return "it has no receipt";
  if (typeof r.call_id !== "string" || !BYTES32.test(r.call_id)) return "receipt.call_id is not 32 bytes of hex";
  for (const field of ["account", "seller"] as const) {
    if (typeof r[field] !== "string" || !ADDRESS.test(r[field] as string)) return `receipt.${field} is not an address`;
  }
  for (const field of ["amount", "platform_fee"] as const) {
    if (typeof r[field] !== "string" || !UINT.test(r[field] as string) || BigInt(r[field] as string) > MAX_UINT256)
      return `receipt.${field} is not a whole number of base units`;
  }
  if (!Array.isArray(view.proof) || !view.proof.every((p) => typeof p === "string" && BYTES32.test(p)))
    return "proof is not a list of 32-byte hashes";
  if (view.proof.length > 64) return "proof is longer than any batch's";
  if (view.leaf !== undefined && (typeof view.leaf !== "string" || !BYTES32.test(view.leaf))) return "leaf is not 32 bytes of hex";
  if (view.escrow !== undefined && view.escrow !== null && (typeof view.escrow !== "string" || !ADDRESS.test(view.escrow)))
    return "escrow is not an address";
  if (view.chain_id !== undefined && view.chain_id !== null && !Number.isSafeInteger(view.chain_id)) return "chain_id is not a chain id";
  if (view.tx_hash !== undefined && view.tx_hash !== null && (typeof view.tx_hash !== "string" || !BYTES32.test(view.tx_hash)))
    return "tx_hash is not a transaction hash";
  return view as unknown as SettledCallReceipt;
}

/**
 * Checks a call's receipt against the escrow's root on the chain `options.rpcUrl` (or `options.provider`) serves,
 * and says what it proves, or why it proves nothing. Never throws for a bad receipt or an unreachable chain: those
 * are the result's failures.
 *
 * ```ts
 * const receipt = await client.receipt(callId); // or JSON.parse(fs.readFileSync("receipt.json", "utf8"))
 * const result = await verifyReceipt(receipt, { rpcUrl: "https://mainnet.base.org" });
 * if (result.ok) console.log(`${result.amountMicros} paid, in batch ${result.batchNumber} at block ${result.blockNumber}`);
 * else console.error(result.code, result.message);
 * ```
 */
export async function verifyReceipt(input: unknown, options: VerifyReceiptOptions): Promise<VerifyReceiptResult> {
  const view = unwrap(input);
  if (!view) return fail("invalid_receipt", "This is not a call receipt: expected the JSON object GET /v1/calls/:callId/receipt answers.");
  const named = typeof view.call_id === "string" ? view.call_id : undefined;
  if (options.callId !== undefined && named !== undefined && named.toLowerCase() !== options.callId.toLowerCase())
    return fail("tampered_receipt", `This receipt is for call ${named}, not for call ${options.callId}.`, named);
  if (view.status === "not_charged") return fail("unsettled", `Call ${named} was not charged: there is nothing to settle or prove.`, named);
  if (view.status === "unsettled")
    return fail("unsettled", `Call ${named} is charged but not settled yet: its batch has not been posted; ask again later.`, named);
  const parsed = parse(view);
  if (typeof parsed === "string") return fail("invalid_receipt", `This is not a valid call receipt: ${parsed}.`, named);
  const receipt = parsed;
  const callId = receipt.call_id;
  const r = receipt.receipt;

  // What the receipt says of itself, before anything is asked of the chain.
  if (r.call_id.toLowerCase() !== callIdToBytes32(callId))
    return fail("tampered_receipt", `The receipt's call id ${r.call_id} is not call ${callId}: the receipt was changed.`, callId);
  const amount = BigInt(r.amount);
  const fee = BigInt(r.platform_fee);
  if (fee > amount)
    return fail("tampered_receipt", `The receipt's platform fee (${fee}) exceeds its amount (${amount}): the receipt was changed.`, callId);

  const viem = await loadViem();
  const leaf = viem.keccak256(
    viem.keccak256(
      viem.encodeAbiParameters(viem.parseAbiParameters("bytes32, address, address, uint256, uint256"), [
        r.call_id as `0x${string}`,
        r.account as `0x${string}`,
        r.seller as `0x${string}`,
        amount,
        fee,
      ]),
    ),
  );
  if (receipt.leaf !== undefined && receipt.leaf.toLowerCase() !== leaf)
    return fail(
      "tampered_receipt",
      `The receipt's fields do not hash to its leaf ${receipt.leaf} (they hash to ${leaf}): its amount, fee, account, seller or call id was changed.`,
      callId,
    );
  let computedRoot: string = leaf;
  for (const sibling of receipt.proof) {
    const s = sibling.toLowerCase() as `0x${string}`;
    const c = computedRoot as `0x${string}`;
    computedRoot = BigInt(c) < BigInt(s) ? viem.keccak256(viem.concat([c, s])) : viem.keccak256(viem.concat([s, c]));
  }

  const escrow = options.escrow ?? receipt.escrow ?? undefined;
  if (escrow === undefined || !ADDRESS.test(escrow))
    return fail("invalid_receipt", "The receipt names no escrow: pass the SkillEscrow's address (the escrow option, --escrow).", callId);
  if (!options.rpcUrl && !options.provider) throw new TypeError("verifyReceipt needs an rpcUrl or a provider to read the chain.");
  const timeout = options.timeoutMs ?? 10_000;
  const client = viem.createPublicClient({
    transport: options.provider ? viem.custom(options.provider, { retryCount: 0 }) : viem.http(options.rpcUrl, { retryCount: 0, timeout }),
  });
  const where = options.rpcUrl ?? "the provider";
  const unreachable = (cause: unknown) =>
    fail("chain_unreachable", `The chain at ${where} did not answer: ${shortReason(cause)}. Nothing was verified.`, callId, cause);

  let chainId: number;
  let code: string | undefined;
  try {
    [chainId, code] = await Promise.all([client.getChainId(), client.getCode({ address: escrow as `0x${string}` })]);
  } catch (cause) {
    return unreachable(cause);
  }
  if (typeof receipt.chain_id === "number" && receipt.chain_id !== chainId)
    return fail("wrong_chain", `The receipt is for chain ${receipt.chain_id}, but ${where} serves chain ${chainId}.`, callId);
  if (!code || code === "0x") return fail("wrong_chain", `There is no contract at ${escrow} on chain ${chainId} (${where}).`, callId);

  let root: string;
  try {
    root = await client.readContract({
      address: escrow as `0x${string}`,
      abi: ESCROW_ABI,
      functionName: "receiptsRoots",
      args: [BigInt(receipt.batch_number)],
    });
  } catch (cause) {
    if (
      cause instanceof viem.BaseError &&
      cause.walk((e) => e instanceof viem.ContractFunctionRevertedError || e instanceof viem.ContractFunctionZeroDataError)
    )
      return fail(
        "wrong_chain",
        `The contract at ${escrow} on chain ${chainId} is not a SkillEscrow (it has no receiptsRoots).`,
        callId,
        cause,
      );
    return unreachable(cause);
  }
  if (root.toLowerCase() === ZERO_ROOT)
    return fail(
      "unsettled",
      `Batch ${receipt.batch_number} is not on chain ${chainId} at escrow ${escrow} yet: call ${callId} is not settled there; ask again later.`,
      callId,
    );
  if (root.toLowerCase() !== computedRoot)
    return fail(
      "wrong_proof",
      `The proof does not lead from the receipt's leaf to batch ${receipt.batch_number}'s root ${root} on the escrow (it leads to ${computedRoot}): ` +
        (receipt.leaf === undefined ? "the receipt or its proof is not what the batch settled." : "the proof is not this batch's."),
      callId,
    );

  // Proven. Where the batch was posted, when the chain confirms the receipt's transaction posted it.
  let blockNumber: bigint | null = null;
  let confirmations: bigint | null = null;
  if (receipt.tx_hash) {
    try {
      const [tx, head] = await Promise.all([
        client.getTransactionReceipt({ hash: receipt.tx_hash as `0x${string}` }),
        client.getBlockNumber({ cacheTime: 0 }),
      ]);
      const topic = viem.keccak256(viem.toHex(BATCH_SETTLED_TOPIC_SIGNATURE));
      const posted = tx.logs.some(
        (log) =>
          log.address.toLowerCase() === escrow.toLowerCase() &&
          log.topics[0] === topic &&
          log.topics[1] !== undefined &&
          BigInt(log.topics[1]) === BigInt(receipt.batch_number) &&
          log.data.slice(0, 66).toLowerCase() === root.toLowerCase(),
      );
      if (posted && tx.status === "success") {
        blockNumber = tx.blockNumber;
        confirmations = head - tx.blockNumber + 1n;
      }
    } catch {
      // The proof stands on the root alone; the block is a detail the chain may not say (a pruned or unknown tx).
    }
  }
  return {
    ok: true,
    callId,
    account: viem.getAddress(r.account),
    seller: viem.getAddress(r.seller),
    amountMicros: amount,
    sellerShareMicros: amount - fee,
    platformFeeMicros: fee,
    batchNumber: receipt.batch_number,
    receiptsRoot: root,
    leaf,
    escrow: viem.getAddress(escrow),
    chainId,
    blockNumber,
    txHash: blockNumber === null ? null : receipt.tx_hash,
    confirmations,
  };
}

/** viem, or an error saying to install it (an optional peer dependency: only receipts need it). */
async function loadViem(): Promise<typeof import("viem")> {
  try {
    return await import("viem");
  } catch (cause) {
    throw new Error("verifyReceipt needs viem: install it beside the SDK (npm install viem).", { cause });
  }
}

/** The first line of an error's own words, without viem's "Request body: ..." and version lines. */
function shortReason(cause: unknown): string {
  const e = cause as { shortMessage?: unknown; message?: unknown; details?: unknown };
  const text = typeof e?.shortMessage === "string" ? e.shortMessage : typeof e?.message === "string" ? e.message : String(cause);
  const details = typeof e?.details === "string" && e.details && !text.includes(e.details) ? ` (${e.details})` : "";
  return `${text.split("\n")[0].replace(/\.$/, "")}${details}`;
}

/** micro-USDC as a USD decimal string: 2000n → "0.002", exact. */
export function microsToUsdText(micros: bigint): string {
  const negative = micros < 0n;
  const abs = negative ? -micros : micros;
  const whole = abs / 1_000_000n;
  const fraction = (abs % 1_000_000n).toString().padStart(6, "0").replace(/0+$/, "");
  return `${negative ? "-" : ""}${whole}${fraction ? `.${fraction}` : ""}`;
}
