/**
 * A settlement batch's receipts (`npm run bench:receipts`): the CPU the settler spends on the gateway's event loop to
 * hash each settled call into its leaf and the batch's Merkle tree (server/chain/receipts.ts), against the way it was
 * first written (viem's encodeAbiParameters and keccak256 over hex strings), in the same run. Prints µs of CPU a
 * receipt, and a keccak-256 of a receipt's 160 bytes in WebAssembly (hash-wasm) and in JavaScript (@noble/hashes).
 *
 *   RECEIPTS_BENCH_CALLS (default 2000)  receipts in the batch
 */
import { concat, encodeAbiParameters, keccak256 as viemKeccak256, parseAbiParameters, type Hex } from "viem";
import { type CallReceipt, keccak256Bytes, keccakReady, receiptsTree } from "../../server/chain/receipts";

const CALLS = Number(process.env.RECEIPTS_BENCH_CALLS ?? 2_000);
const ROUNDS = 7;

/** The receipts as the settler hashed them before: the ABI encoder and keccak over hex, pairs compared as numbers. */
function viemTreeRoot(receipts: readonly CallReceipt[]): Hex {
  const types = parseAbiParameters("bytes32, address, address, uint256, uint256");
  let layer = receipts.map((r) =>
    viemKeccak256(viemKeccak256(encodeAbiParameters(types, [r.callId, r.account, r.seller, r.amount, r.platformFee]))),
  );
  while (layer.length > 1) {
    const next: Hex[] = [];
    for (let i = 0; i < layer.length; i += 2) {
      const [a, b] = [layer[i], layer[i + 1]];
      next.push(b === undefined ? a : BigInt(a) < BigInt(b) ? viemKeccak256(concat([a, b])) : viemKeccak256(concat([b, a])));
    }
    layer = next;
  }
  return layer[0];
}

/** The median over rounds of µs of CPU an item. */
function cpuMicros(items: number, run: () => unknown): number {
  const rounds: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const start = process.cpuUsage();
    run();
    const used = process.cpuUsage(start);
    rounds.push((used.user + used.system) / items);
  }
  return rounds.sort((a, b) => a - b)[Math.floor(ROUNDS / 2)];
}

async function main(): Promise<void> {
  if (!(await keccakReady)) throw new Error("hash-wasm's keccak did not instantiate: the WebAssembly path cannot be measured");
  const receipts: CallReceipt[] = Array.from({ length: CALLS }, (_, i) => ({
    callId: `0x${(i + 1).toString(16).padStart(64, "0")}`,
    account: `0x${(i % 50).toString(16).padStart(40, "1")}`,
    seller: "0x00000000000000000000000000000000000000aa",
    amount: 1_000n,
    platformFee: 100n,
  }));
  if (receiptsTree(receipts).root !== viemTreeRoot(receipts)) throw new Error("the two ways gave different roots");
  const before = cpuMicros(CALLS, () => viemTreeRoot(receipts));
  const after = cpuMicros(CALLS, () => receiptsTree(receipts));
  const block = new Uint8Array(160);
  const wasm = cpuMicros(20_000, () => {
    for (let i = 0; i < 20_000; i++) keccak256Bytes(block, "wasm");
  });
  const js = cpuMicros(20_000, () => {
    for (let i = 0; i < 20_000; i++) keccak256Bytes(block, "js");
  });
  console.log(`receipts of a ${CALLS}-call batch, µs of CPU a call (median of ${ROUNDS} rounds), Node ${process.version}\n`);
  console.log("| what | µs a call |\n| --- | ---: |");
  console.log(`| leaves and tree, viem's ABI encoder and keccak over hex (before) | ${before.toFixed(1)} |`);
  console.log(`| leaves and tree, bytes and hash-wasm's keccak (receiptsTree) | ${after.toFixed(1)} |`);
  console.log(`| one keccak-256 of 160 bytes, hash-wasm | ${wasm.toFixed(2)} |`);
  console.log(`| one keccak-256 of 160 bytes, @noble/hashes (viem's) | ${js.toFixed(2)} |`);
  console.log(`\nreceiptsTree / before: ${(after / before).toFixed(2)}`);
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
