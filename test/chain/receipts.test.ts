import { expect } from "chai";
import { concat, keccak256, pad, toHex, type Hex } from "viem";
import { type CallReceipt, buildMerkleTree, receiptLeaf } from "../../server/chain/receipts";

/** What OpenZeppelin's MerkleProof.verify computes: fold the proof with sorted-pair hashing. */
function verify(proof: Hex[], root: Hex, leaf: Hex): boolean {
  let node = leaf;
  for (const sibling of proof)
    node = BigInt(node) < BigInt(sibling) ? keccak256(concat([node, sibling])) : keccak256(concat([sibling, node]));
  return node === root;
}

function buildReceipt(i: number): CallReceipt {
  return {
    callId: pad(toHex(i + 1), { size: 32 }),
    account: `0x${(i + 1).toString(16).padStart(40, "0")}`,
    seller: "0x00000000000000000000000000000000000000aa",
    amount: 1_000n * BigInt(i + 1),
    platformFee: 100n * BigInt(i + 1),
  };
}

describe("call receipts", () => {
  it("hashes a receipt twice, so a leaf can never pass for an inner node", () => {
    const leaf = receiptLeaf(buildReceipt(0));
    expect(leaf).to.match(/^0x[0-9a-f]{64}$/);
    expect(receiptLeaf(buildReceipt(0))).to.equal(leaf);
    expect(receiptLeaf({ ...buildReceipt(0), amount: 1_001n })).to.not.equal(leaf);
  });

  it("makes the single leaf the root of a one-call batch", () => {
    const leaf = receiptLeaf(buildReceipt(0));
    const tree = buildMerkleTree([leaf]);
    expect(tree.root).to.equal(leaf);
    expect(tree.proof(0)).to.deep.equal([]);
  });

  for (const size of [2, 3, 4, 5, 7, 8, 9, 16, 17, 100]) {
    it(`gives every call of a ${size}-call batch a proof that verifies, and no other leaf passes`, () => {
      const leaves = Array.from({ length: size }, (_, i) => receiptLeaf(buildReceipt(i)));
      const tree = buildMerkleTree(leaves);
      leaves.forEach((leaf, i) => expect(verify(tree.proof(i), tree.root, leaf), `leaf ${i}`).to.equal(true));
      const stranger = receiptLeaf(buildReceipt(size));
      expect(verify(tree.proof(0), tree.root, stranger)).to.equal(false);
    });
  }

  it("refuses an empty batch", () => {
    expect(() => buildMerkleTree([])).to.throw("at least one leaf");
  });
});
