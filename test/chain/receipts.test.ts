import { expect } from "chai";
import { concat, encodeAbiParameters, getAddress, keccak256, pad, parseAbiParameters, toHex, type Hex } from "viem";
import { type CallReceipt, buildMerkleTree, keccak256Bytes, keccakReady, receiptLeaf, receiptsTree } from "../../server/chain/receipts";
import { Rng, randomSeed } from "../helpers/random";

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
    expect(() => receiptsTree([])).to.throw("at least one leaf");
  });

  it("refuses what abi.encode could not hold: amounts out of uint256, ids and addresses of the wrong size or not hex", () => {
    const good = buildReceipt(0);
    for (const bad of [
      { amount: -1n },
      { platformFee: 1n << 256n },
      { callId: "0x01" as Hex },
      { callId: `0x${"zz".repeat(32)}` as Hex },
      { account: `0x${"1".repeat(42)}` as Hex },
      { seller: "0x00000000000000000000000000000000000000a" as Hex },
    ]) {
      expect(
        () => receiptLeaf({ ...good, ...bad } as CallReceipt),
        JSON.stringify(bad, (_k, v) => (typeof v === "bigint" ? String(v) : v)),
      ).to.throw(RangeError);
    }
  });

  describe("the same digests as viem's ABI encoder and keccak (seeded)", () => {
    const seed = process.env.RECEIPTS_SEED ? Number(process.env.RECEIPTS_SEED) : randomSeed();
    const rng = new Rng(seed);
    const hex = (bytes: number): Hex => `0x${rng.bytes(bytes).toString("hex")}`;
    const amount = () =>
      rng.pick([0n, 1n, (1n << 256n) - 1n, BigInt(rng.uint32()), BigInt(`0x${rng.bytes(rng.int(1, 32)).toString("hex")}`)]);
    const randomReceipt = (): CallReceipt => ({
      callId: hex(32),
      // Checksummed addresses (as the ledger stores them) and lower-case ones alike.
      account: rng.chance(0.5) ? getAddress(hex(20)) : hex(20),
      seller: rng.chance(0.5) ? getAddress(hex(20)) : hex(20),
      amount: amount(),
      platformFee: amount(),
    });
    /** The leaf as it was first written: viem's encodeAbiParameters and keccak256 over hex. */
    const referenceLeaf = (r: CallReceipt): Hex =>
      keccak256(
        keccak256(
          encodeAbiParameters(parseAbiParameters("bytes32, address, address, uint256, uint256"), [
            r.callId,
            r.account,
            r.seller,
            r.amount,
            r.platformFee,
          ]),
        ),
      );
    const referencePair = (a: Hex, b: Hex): Hex => (BigInt(a) < BigInt(b) ? keccak256(concat([a, b])) : keccak256(concat([b, a])));

    before(async () => expect(await keccakReady, "hash-wasm's keccak did not instantiate").to.equal(true));

    it(`leaves (seed ${seed}; RECEIPTS_SEED=${seed} replays)`, () => {
      for (let i = 0; i < 300; i++) {
        const receipt = randomReceipt();
        expect(receiptLeaf(receipt), `receipt ${i}`).to.equal(referenceLeaf(receipt));
      }
    });

    it(`keccak-256 in WebAssembly and in JavaScript agree on inputs of every length around the rate (seed ${seed})`, () => {
      for (const length of [0, 1, 31, 32, 64, 135, 136, 137, 160, 272, 1_000]) {
        const bytes = rng.bytes(length);
        const expected = keccak256(bytes, "bytes");
        expect(Buffer.from(keccak256Bytes(bytes, "wasm")).equals(Buffer.from(expected)), `${length} bytes, wasm`).to.equal(true);
        expect(Buffer.from(keccak256Bytes(bytes, "js")).equals(Buffer.from(expected)), `${length} bytes, js`).to.equal(true);
      }
    });

    it(`trees: the root and every proof of sorted-pair hashing (seed ${seed})`, () => {
      for (const size of [1, 2, 3, rng.int(4, 40), rng.int(41, 300)]) {
        const receipts = Array.from({ length: size }, randomReceipt);
        const leaves = receipts.map(referenceLeaf);
        let layer = leaves;
        const layers = [layer];
        while (layer.length > 1) {
          const next: Hex[] = [];
          for (let i = 0; i < layer.length; i += 2) next.push(i + 1 < layer.length ? referencePair(layer[i], layer[i + 1]) : layer[i]);
          layers.push((layer = next));
        }
        const tree = receiptsTree(receipts);
        expect(tree.root, `root of ${size}`).to.equal(layer[0]);
        expect(buildMerkleTree(leaves).root).to.equal(layer[0]);
        for (let i = 0; i < size; i++) expect(verify(tree.proof(i), tree.root, leaves[i]), `proof ${i} of ${size}`).to.equal(true);
      }
    });
  });
});
