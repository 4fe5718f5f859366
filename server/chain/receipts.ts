import { type IHasher, createKeccak } from "hash-wasm";
import { bytesToHex, hexToBytes, keccak256 as viemKeccak256, type Address, type Hex } from "viem";

/*
 * Call receipts and the Merkle tree a settlement batch commits to. The settler builds the
 * root it posts with SkillEscrow.settle, and a receipt endpoint hands out proofs that anyone
 * can check on-chain with SkillEscrow.verifyReceipt.
 */

/** One settled call, as committed to by a batch's receipts root. Amounts in USDC base units. */
export type CallReceipt = { callId: Hex; account: Address; seller: Address; amount: bigint; platformFee: bigint };

const WORD_BYTES = 32;

/**
 * Keccak-256 in WebAssembly (hash-wasm): 1.4 µs of CPU for a receipt's 160 bytes where @noble/hashes, viem's, took
 * 24 µs (`npm run bench:receipts`, docs/benchmarks.md), and a batch hashes three times a call on the gateway's event
 * loop. Instantiated when this module loads (a few milliseconds, asynchronously); until then, or if WebAssembly is
 * refused, viem's keccak256 gives the same digests. Safe to share: each digest runs init, update and digest in one
 * synchronous stretch.
 */
let wasmKeccak: IHasher | undefined;
export const keccakReady: Promise<boolean> = createKeccak(256).then(
  (hasher) => {
    wasmKeccak = hasher;
    return true;
  },
  () => false,
);

/**
 * Keccak-256 of `bytes` (bytes only: a hex string would be hashed as its text by one path and as its bytes by the
 * other): the WebAssembly hasher once it is ready, viem's before.
 */
export function keccak256Bytes(bytes: Uint8Array, use: "wasm" | "js" = "wasm"): Uint8Array {
  if (!(bytes instanceof Uint8Array)) throw new TypeError("keccak256Bytes hashes a Uint8Array");
  if (use === "js" || wasmKeccak === undefined) return viemKeccak256(bytes, "bytes");
  wasmKeccak.init();
  wasmKeccak.update(bytes);
  return wasmKeccak.digest("binary");
}

const UINT256_LIMIT = 1n << 256n;

/**
 * abi.encode(bytes32, address, address, uint256, uint256) of a receipt, written straight into its five 32-byte words
 * (what viem's encodeAbiParameters gives, at a fraction of its cost: the settler hashes every call of a batch on the
 * gateway's event loop). A value the encoding cannot hold is refused, as the ABI encoder refuses it.
 */
function encodeReceipt(receipt: CallReceipt): Uint8Array {
  const out = new Uint8Array(5 * WORD_BYTES);
  writeHex(out, 0, receipt.callId, 32, "callId");
  writeHex(out, WORD_BYTES + 12, receipt.account, 20, "account");
  writeHex(out, 2 * WORD_BYTES + 12, receipt.seller, 20, "seller");
  writeUint256(out, 3 * WORD_BYTES, receipt.amount, "amount");
  writeUint256(out, 4 * WORD_BYTES, receipt.platformFee, "platformFee");
  return out;
}

/**
 * Hex of exactly `bytes` bytes, in any case: the bytes are what abi.encode writes. Unlike viem's encoder, an address's
 * mixed-case checksum is not checked here (its keccak would cost more than the rest of the receipt); the addresses
 * come from the gateway's own ledger, which stores them checksummed.
 */
function writeHex(out: Uint8Array, offset: number, value: string, bytes: number, field: string): void {
  if (typeof value !== "string" || value.length !== 2 + 2 * bytes || !/^0x[0-9a-fA-F]*$/.test(value)) {
    throw new RangeError(`a receipt's ${field} must be ${bytes} bytes of hex, got "${String(value).slice(0, 80)}"`);
  }
  out.set(Buffer.from(value.slice(2), "hex"), offset);
}

function writeUint256(out: Uint8Array, offset: number, value: bigint, field: string): void {
  if (typeof value !== "bigint" || value < 0n || value >= UINT256_LIMIT) {
    throw new RangeError(`a receipt's ${field} must be a uint256, got ${String(value)}`);
  }
  let rest = value;
  for (let i = offset + WORD_BYTES - 1; i >= offset && rest > 0n; i--) {
    out[i] = Number(rest & 0xffn);
    rest >>= 8n;
  }
}

/** keccak256(keccak256(abi.encode(receipt))): the same leaf as SkillEscrow.receiptLeaf. */
export function receiptLeaf(receipt: CallReceipt): Hex {
  return bytesToHex(receiptLeafBytes(receipt));
}

function receiptLeafBytes(receipt: CallReceipt): Uint8Array {
  return keccak256Bytes(keccak256Bytes(encodeReceipt(receipt)));
}

/** Sorted-pair hashing, the commutative hash OpenZeppelin's MerkleProof expects (both nodes 32 bytes, compared as numbers). */
function hashPair(a: Uint8Array, b: Uint8Array): Uint8Array {
  const pair = new Uint8Array(2 * WORD_BYTES);
  const [low, high] = Buffer.compare(a, b) < 0 ? [a, b] : [b, a];
  pair.set(low, 0);
  pair.set(high, WORD_BYTES);
  return keccak256Bytes(pair);
}

/** A batch's Merkle tree: its root, and each leaf's proof for MerkleProof.verify. */
export interface MerkleTree {
  root: Hex;
  proof(index: number): Hex[];
}

/** A Merkle tree over `leaves` (an odd node is carried up unchanged), with proofs for MerkleProof.verify. */
export function buildMerkleTree(leaves: readonly Hex[]): MerkleTree {
  return merkleTreeOf(leaves.map((leaf) => hexToBytes(leaf)));
}

/** The tree over a batch's receipts, each hashed into its leaf. */
export function receiptsTree(receipts: readonly CallReceipt[]): MerkleTree {
  return merkleTreeOf(receipts.map(receiptLeafBytes));
}

function merkleTreeOf(leaves: Uint8Array[]): MerkleTree {
  if (leaves.length === 0) throw new Error("a Merkle tree needs at least one leaf");
  for (const leaf of leaves) if (leaf.length !== WORD_BYTES) throw new RangeError(`a Merkle leaf must be 32 bytes, got ${leaf.length}`);
  const layers: Uint8Array[][] = [leaves];
  while (layers[layers.length - 1].length > 1) {
    const layer = layers[layers.length - 1];
    const next: Uint8Array[] = [];
    for (let i = 0; i < layer.length; i += 2) next.push(i + 1 < layer.length ? hashPair(layer[i], layer[i + 1]) : layer[i]);
    layers.push(next);
  }
  return {
    root: bytesToHex(layers[layers.length - 1][0]),
    proof(index: number): Hex[] {
      const proof: Hex[] = [];
      let position = index;
      for (const layer of layers.slice(0, -1)) {
        const sibling = position ^ 1;
        if (sibling < layer.length) proof.push(bytesToHex(layer[sibling]));
        position >>= 1;
      }
      return proof;
    },
  };
}

/** A call id (a UUID) as the bytes32 a receipt carries (and the escrow's X402Settled event): its 16 bytes, left-padded with zeros. */
export function callIdToBytes32(callId: string): Hex {
  if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(callId)) {
    throw new RangeError(`a call id must be a UUID, got "${callId}"`);
  }
  return `0x${"0".repeat(32)}${callId.replace(/-/g, "").toLowerCase()}`;
}
