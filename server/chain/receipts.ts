import { concat, encodeAbiParameters, keccak256, parseAbiParameters, type Address, type Hex } from "viem";

/*
 * Call receipts and the Merkle tree a settlement batch commits to. The settler builds the
 * root it posts with SkillEscrow.settle, and a receipt endpoint hands out proofs that anyone
 * can check on-chain with SkillEscrow.verifyReceipt.
 */

/** One settled call, as committed to by a batch's receipts root. Amounts in USDC base units. */
export type CallReceipt = { callId: Hex; account: Address; seller: Address; amount: bigint; platformFee: bigint };

const RECEIPT_TYPES = parseAbiParameters("bytes32, address, address, uint256, uint256");

/** keccak256(keccak256(abi.encode(receipt))): the same leaf as SkillEscrow.receiptLeaf. */
export function receiptLeaf(receipt: CallReceipt): Hex {
  const encoded = encodeAbiParameters(RECEIPT_TYPES, [
    receipt.callId,
    receipt.account,
    receipt.seller,
    receipt.amount,
    receipt.platformFee,
  ]);
  return keccak256(keccak256(encoded));
}

/** Sorted-pair hashing, the commutative hash OpenZeppelin's MerkleProof expects. */
function hashPair(a: Hex, b: Hex): Hex {
  return BigInt(a) < BigInt(b) ? keccak256(concat([a, b])) : keccak256(concat([b, a]));
}

/** A Merkle tree over `leaves` (an odd node is carried up unchanged), with proofs for MerkleProof.verify. */
export function buildMerkleTree(leaves: readonly Hex[]): { root: Hex; proof: (index: number) => Hex[] } {
  if (leaves.length === 0) throw new Error("a Merkle tree needs at least one leaf");
  const layers: Hex[][] = [[...leaves]];
  while (layers[layers.length - 1].length > 1) {
    const layer = layers[layers.length - 1];
    const next: Hex[] = [];
    for (let i = 0; i < layer.length; i += 2) next.push(i + 1 < layer.length ? hashPair(layer[i], layer[i + 1]) : layer[i]);
    layers.push(next);
  }
  return {
    root: layers[layers.length - 1][0],
    proof(index: number): Hex[] {
      const proof: Hex[] = [];
      let position = index;
      for (const layer of layers.slice(0, -1)) {
        const sibling = position ^ 1;
        if (sibling < layer.length) proof.push(layer[sibling]);
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
