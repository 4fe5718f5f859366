/**
 * Gas benchmark of batched settlement against paying every call on-chain the way x402's `exact` scheme does
 * (one EIP-3009 transferWithAuthorization per call, submitted by a facilitator), and of the gateway's own x402
 * settlement: SkillEscrow.collectX402 (the same authorization, paid into the escrow before the call runs, held
 * pending) then completeX402 (the call succeeded: the seller and the treasury are credited) or refundX402 (it
 * failed: the payer gets the value back), two transactions per call.
 *
 *   npx hardhat run scripts/bench-gas.ts        (or: npm run bench:gas)
 *
 * Runs on Hardhat's in-process network (chain id 8453, cancun rules, solc 0.8.28 with the optimizer), so the
 * figures are L2 execution gas as the EVM charges it; Base adds an L1 data fee that grows with calldata, which
 * is why calldata bytes per call are printed too. Everything is seeded: the same command prints the same table.
 *
 * Conditions, chosen so that the comparison flatters x402 rather than the escrow:
 *  - every settle row starts from the same snapshot: accounts hold escrowed balances, sellers have never been
 *    credited (their earnings slots go from zero to non-zero, the most expensive case), the batch records a
 *    new receipts root;
 *  - every transferWithAuthorization pays a seller that already holds USDC (the cheapest case for x402);
 *  - every completeX402 in the means credits a seller and a treasury that already hold earnings (the same
 *    cheapest case, on the escrow's side); the first credit of a seller is printed apart. Calls one after
 *    another (x402PendingTotal from zero to non-zero and back in each, the dearer case) and calls overlapping
 *    another pending payment are printed apart too;
 *  - TestUSDC is a plain OpenZeppelin token; Circle's USDC adds a proxy and blacklist checks, so real x402
 *    payments cost more than measured here.
 */
import { takeSnapshot } from "@nomicfoundation/hardhat-network-helpers";
import hre from "hardhat";
import { getAddress, keccak256, maxUint256, slice, toHex, type Address, type Hash, type Hex } from "viem";
import { deployContracts } from "../server/devstack/deploy";
import { batchFromReceipts, buildReceipt } from "../test/contracts/helpers/batch";
import type { CallReceipt } from "../server/chain/receipts";
import { signAuthorization, splitSignature, signVoucher } from "../test/contracts/helpers/signatures";
import { buildX402Payment, pendingOf, signX402Payment } from "../test/contracts/helpers/x402";

const USDC = 1_000_000n;
const SEED = 20_250_101;
const CALLS_PER_ACCOUNT = 20;
const SELLER_COUNT = 5;
const X402_SAMPLE_CALLS = 50;
/** The target: settling a call costs at most 1/100 of paying it on-chain, at 1,000 calls per batch. */
const TARGET_RATIO = 100;

/** mulberry32: a tiny seeded PRNG, so the generated calls are the same on every run. */
function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** A deterministic address per label (these accounts never sign; they only hold escrowed balances). */
const addressOf = (label: string): Address => getAddress(slice(keccak256(toHex(label)), 12));

/** `calls` calls round-robin over the first `accountCount` users (so each is touched), random sellers and prices. */
function generateCalls(random: () => number, users: Address[], sellers: Address[], accountCount: number, calls: number) {
  const receipts: CallReceipt[] = [];
  for (let i = 0; i < calls; i++) {
    const seller = sellers[Math.floor(random() * sellers.length)];
    // The spec's price range: 0.001 to 0.50 USD per call.
    const priceMicros = 1_000n + BigInt(Math.floor(random() * 499_001));
    receipts.push(buildReceipt(i, users[i % accountCount], seller, priceMicros));
  }
  return receipts;
}

type Row = {
  label: string;
  calls: number;
  accounts: number;
  sellers: number;
  gasUsed: bigint;
  calldataBytes: number;
};

/** Per x402 call through the escrow: the gas of its collectX402, of the completeX402 or refundX402 that ended it, and both calldatas. */
type X402Samples = { collect: bigint[]; end: bigint[]; calldataBytes: number[] };

/**
 * The report's lines on x402 through the escrow: per call, the mean gas of collectX402 plus completeX402 (a call
 * that succeeded) and of collectX402 plus refundX402 (a call that failed), alone and overlapping another payment,
 * against the bare bytes-signature transfer.
 */
function x402EscrowLines(
  fmt: (n: bigint | number) => string,
  mean: (values: bigint[]) => bigint,
  bareTransferGas: bigint,
  alone: { completed: X402Samples; refunded: X402Samples },
  overlapping: { completed: X402Samples; refunded: X402Samples },
  first: X402Samples,
): string[] {
  const perCall = (sample: X402Samples) => {
    const collect = mean(sample.collect);
    const end = mean(sample.end);
    const calldataBytes = Math.round(sample.calldataBytes.reduce((a, b) => a + b, 0) / sample.calldataBytes.length);
    return { collect, end, total: collect + end, calldataBytes };
  };
  const summarize = (sample: X402Samples, endName: string) => {
    const { collect, end, total } = perCall(sample);
    return `${fmt(total)} gas (collect ${fmt(collect)} + ${endName} ${fmt(end)}; ${fmt(total - bareTransferGas)} more than the bare bytes-signature transfer)`;
  };
  const completed = perCall(alone.completed);
  const refunded = perCall(alone.refunded);
  return [
    `x402 through the escrow, a call that succeeded (collectX402 with a bytes signature, then completeX402: seller and treasury credited): mean of ${alone.completed.collect.length} calls one after another, to sellers already holding earnings: ${summarize(alone.completed, "complete")}; overlapping another pending payment: ${summarize(overlapping.completed, "complete")}; a seller's first credit: ${summarize(first, "complete")} (mean of ${first.collect.length}); ${fmt(completed.calldataBytes)} calldata bytes per call.`,
    "",
    `x402 through the escrow, a call that failed (collectX402, then refundX402: the value back to the payer): mean of ${alone.refunded.collect.length} calls one after another: ${summarize(alone.refunded, "refund")}; overlapping another pending payment: ${summarize(overlapping.refunded, "refund")}; ${fmt(refunded.calldataBytes)} calldata bytes per call.`,
  ];
}

async function main(): Promise<void> {
  const [deployer, settler, voucherSigner, treasury, relayer, ...payers] = await hre.viem.getWalletClients();
  const publicClient = await hre.viem.getPublicClient();
  const random = seededRandom(SEED);

  const deployment = await deployContracts({
    network: "hardhat",
    publicClient,
    walletClient: deployer,
    settler: settler.account.address,
    voucherSigner: voucherSigner.account.address,
    treasury: treasury.account.address,
    mint: [{ to: deployer.account.address, amountMicros: 1_000_000n * USDC }],
  });
  const usdc = await hre.viem.getContractAt("TestUSDC", deployment.usdc);
  const escrow = await hre.viem.getContractAt("SkillEscrow", deployment.escrow);
  const asSettler = await hre.viem.getContractAt("SkillEscrow", deployment.escrow, { client: { wallet: settler } });
  const gasOf = async (hash: Hash) => {
    const [receipt, transaction] = await Promise.all([
      publicClient.waitForTransactionReceipt({ hash }),
      publicClient.getTransaction({ hash }),
    ]);
    if (receipt.status !== "success") throw new Error(`transaction ${hash} failed`);
    return { gasUsed: receipt.gasUsed, calldataBytes: (transaction.input.length - 2) / 2 };
  };

  // 500 users with 100 USDC escrowed each, funded by the deployer; 5 sellers who have never been credited.
  const users = Array.from({ length: 500 }, (_, i) => addressOf(`bench user ${i}`));
  const sellers = Array.from({ length: SELLER_COUNT }, (_, i) => addressOf(`bench seller ${i}`));
  await usdc.write.approve([escrow.address, maxUint256]);
  for (const user of users) await escrow.write.depositFor([user, 100n * USDC]);
  const funded = await takeSnapshot();

  const settleOnce = async (receipts: CallReceipt[], batchNumber: bigint) => {
    const { batch } = batchFromReceipts(batchNumber, receipts);
    const gas = await gasOf(await asSettler.write.settle([batch]));
    return { ...gas, accounts: batch.debits.length, sellers: batch.credits.length };
  };

  const rows: Row[] = [];
  const headline = generateCalls(random, users, sellers, 50, 1_000);
  const first = await settleOnce(headline, 1n);
  rows.push({ label: "1,000 calls, 50 users → 5 sellers", calls: 1_000, ...first });
  // Steady state: a second batch of the same shape, now that the sellers hold unclaimed earnings.
  const steady = await settleOnce(generateCalls(random, users, sellers, 50, 1_000), 2n);
  rows.push({ label: "same, sellers already hold earnings", calls: 1_000, ...steady });
  await funded.restore();

  for (const accountCount of [1, 10, 100, 500]) {
    const calls = accountCount * CALLS_PER_ACCOUNT;
    const result = await settleOnce(generateCalls(random, users, sellers, accountCount, calls), 1n);
    rows.push({ label: `${accountCount} account${accountCount === 1 ? "" : "s"}`, calls, ...result });
    await funded.restore();
  }

  // x402 `exact`: each call is one transferWithAuthorization from the payer to the seller, sent by a relayer.
  const x402Payers = payers.slice(0, 5);
  const payees = sellers.slice(0, 5);
  const chainId = await publicClient.getChainId();
  for (const payer of x402Payers) await usdc.write.mint([payer.account.address, 1_000n * USDC]);
  for (const payee of payees) await usdc.write.mint([payee, USDC]);
  const asRelayer = await hre.viem.getContractAt("TestUSDC", deployment.usdc, { client: { wallet: relayer } });
  // A fixed far-future expiry (2100-01-01) keeps the calldata, and so the gas, identical from run to run.
  const validBefore = 4_102_444_800n;
  const x402 = { vrs: [] as bigint[], bytes: [] as bigint[], calldataBytes: [] as number[] };
  for (let i = 0; i < X402_SAMPLE_CALLS; i++) {
    const payer = x402Payers[i % x402Payers.length];
    const authorization = {
      from: payer.account.address,
      to: payees[Math.floor(random() * payees.length)],
      value: 1_000n + BigInt(Math.floor(random() * 499_001)),
      validAfter: 0n,
      validBefore,
      nonce: keccak256(toHex(`x402 nonce ${i}`)),
    };
    const signature: Hex = await signAuthorization(payer, usdc.address, chainId, "TransferWithAuthorization", authorization);
    const { from, to, value, validAfter, nonce } = authorization;
    // Alternate the two overloads USDC offers: (v, r, s) for EOAs, bytes for contract wallets.
    const hash =
      i % 2 === 0
        ? await asRelayer.write.transferWithAuthorization([
            from,
            to,
            value,
            validAfter,
            validBefore,
            nonce,
            ...Object.values(splitSignature(signature)),
          ])
        : await asRelayer.write.transferWithAuthorization([from, to, value, validAfter, validBefore, nonce, signature]);
    const { gasUsed, calldataBytes } = await gasOf(hash);
    (i % 2 === 0 ? x402.vrs : x402.bytes).push(gasUsed);
    x402.calldataBytes.push(calldataBytes);
  }
  const mean = (values: bigint[]) => values.reduce((a, b) => a + b, 0n) / BigInt(values.length);
  const x402GasPerCall = mean(x402.vrs);
  const x402BytesGas = mean(x402.bytes);
  const x402CalldataBytes = Math.round(x402.calldataBytes.reduce((a, b) => a + b, 0) / x402.calldataBytes.length);

  // x402 through the escrow: the same kind of authorization, signed for payTo = the escrow, collected by the settler
  // before the call runs (collectX402), then completed when the call succeeded (completeX402) or refunded to the
  // payer when it failed (refundX402). A call's cost is the sum of its two transactions.
  const collectOnce = async (index: number, seller: Address, value: bigint) => {
    const payer = x402Payers[index % x402Payers.length];
    const payment = buildX402Payment({ from: payer.account.address, seller, value, validBefore }, `bench x402 ${index}`);
    const signature = await signX402Payment(payer, usdc.address, chainId, escrow.address, payment);
    const hash = await asSettler.write.collectX402([payment, signature]);
    const { blockNumber } = await publicClient.waitForTransactionReceipt({ hash });
    const { timestamp } = await publicClient.getBlock({ blockNumber });
    return { ...(await gasOf(hash)), callId: payment.callId, pending: pendingOf(payment, timestamp) };
  };
  const twoStep = (): X402Samples => ({ collect: [], end: [], calldataBytes: [] });
  /** Collects one payment, ends it the `end` way, and records both transactions' gas and calldata in `into`. */
  const x402Call = async (
    into: X402Samples | undefined,
    end: "completeX402" | "refundX402",
    index: number,
    seller: Address,
    value: bigint,
  ) => {
    const collected = await collectOnce(index, seller, value);
    const ended = await gasOf(await asSettler.write[end]([collected.callId, collected.pending]));
    into?.collect.push(collected.gasUsed);
    into?.end.push(ended.gasUsed);
    into?.calldataBytes.push(collected.calldataBytes + ended.calldataBytes);
  };
  // One warm-up call per seller first (the first credit of a seller, zero to non-zero earnings; the very first one
  // also credits the treasury for the first time, so it is left out of that mean), then the samples: calls one
  // after the other, so x402PendingTotal goes from zero to non-zero and back in each (a gateway with one call in
  // flight at a time), then the same with another payment pending throughout (calls that overlap).
  const x402First = twoStep();
  for (const [i, seller] of payees.entries()) await x402Call(i > 0 ? x402First : undefined, "completeX402", i, seller, 250_000n);
  let x402Index = payees.length;
  const x402Sample = async (end: "completeX402" | "refundX402") => {
    const sample = twoStep();
    for (let i = 0; i < X402_SAMPLE_CALLS; i++) {
      const seller = payees[Math.floor(random() * payees.length)];
      await x402Call(sample, end, x402Index++, seller, 1_000n + BigInt(Math.floor(random() * 499_001)));
    }
    return sample;
  };
  const x402Completed = await x402Sample("completeX402");
  const x402Refunded = await x402Sample("refundX402");
  await collectOnce(x402Index++, payees[0], 250_000n); // stays pending: x402PendingTotal is non-zero from here on
  const x402CompletedOverlapping = await x402Sample("completeX402");
  const x402RefundedOverlapping = await x402Sample("refundX402");

  // Single operations, for reference (from the funded snapshot; sellers earn in batch 1 first).
  await funded.restore();
  await settleOnce(headline, 1n);
  const asUser = await hre.viem.getContractAt("SkillEscrow", deployment.escrow, { client: { wallet: payers[5] } });
  const userAddress = payers[5].account.address;
  await usdc.write.mint([userAddress, 100n * USDC]);
  const usdcAsUser = await hre.viem.getContractAt("TestUSDC", deployment.usdc, { client: { wallet: payers[5] } });
  await usdcAsUser.write.approve([escrow.address, maxUint256]);
  const ops: [string, bigint][] = [];
  ops.push(["deposit (first)", (await gasOf(await asUser.write.deposit([50n * USDC]))).gasUsed]);
  ops.push(["deposit (top-up)", (await gasOf(await asUser.write.deposit([10n * USDC]))).gasUsed]);
  const voucher = { account: userAddress, amount: 5n * USDC, nonce: 1n, deadline: validBefore };
  const voucherSignature = await signVoucher(voucherSigner, escrow.address, chainId, voucher);
  ops.push(["withdrawWithVoucher", (await gasOf(await asUser.write.withdrawWithVoucher([voucher, voucherSignature]))).gasUsed]);
  ops.push(["requestExit", (await gasOf(await asUser.write.requestExit([10n * USDC]))).gasUsed]);
  await hre.network.provider.send("evm_increaseTime", [24 * 3600]);
  ops.push(["completeExit", (await gasOf(await asUser.write.completeExit())).gasUsed]);
  const asTreasury = await hre.viem.getContractAt("SkillEscrow", deployment.escrow, { client: { wallet: treasury } });
  ops.push(["claim (treasury)", (await gasOf(await asTreasury.write.claim())).gasUsed]);

  // Report.
  const fmt = (n: bigint | number) => n.toLocaleString("en-US");
  const lines = [
    `Gas: batched settlement vs x402 \`exact\` (one transferWithAuthorization per call). Seed ${SEED}, chain ${chainId}, ${CALLS_PER_ACCOUNT} calls per account, prices 0.001-0.50 USDC.`,
    "",
    "| batch | calls | accounts debited | sellers credited | settle gas | gas per call | calldata bytes per call | x402 gas per call | settle / x402 |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
  ];
  for (const row of rows) {
    const perCall = row.gasUsed / BigInt(row.calls);
    const ratio = (Number(x402GasPerCall) / Number(row.gasUsed)) * row.calls;
    lines.push(
      `| ${row.label} | ${fmt(row.calls)} | ${fmt(row.accounts)} | ${fmt(row.sellers)} | ${fmt(row.gasUsed)} | ${fmt(perCall)} | ${(row.calldataBytes / row.calls).toFixed(1)} | ${fmt(x402GasPerCall)} | 1/${Math.floor(ratio)} |`,
    );
  }
  lines.push(
    "",
    `x402 gas per call: mean of ${x402.vrs.length} transferWithAuthorization(v, r, s) calls to sellers already holding USDC: ${fmt(x402GasPerCall)} gas; the bytes-signature overload: ${fmt(x402BytesGas)} gas; ${fmt(x402CalldataBytes)} calldata bytes per call.`,
    "",
    ...x402EscrowLines(
      fmt,
      mean,
      x402BytesGas,
      { completed: x402Completed, refunded: x402Refunded },
      { completed: x402CompletedOverlapping, refunded: x402RefundedOverlapping },
      x402First,
    ),
    "",
    "| single operation | gas |",
    "|---|---:|",
    ...ops.map(([name, gas]) => `| ${name} | ${fmt(gas)} |`),
  );
  const headlineRatio = (Number(x402GasPerCall) * 1_000) / Number(rows[0].gasUsed);
  const met = headlineRatio >= TARGET_RATIO;
  lines.push(
    "",
    `Target: settling 1,000 calls costs at most 1/${TARGET_RATIO} of paying them on-chain per call: ${met ? "met" : "NOT MET"} (1/${Math.floor(headlineRatio)}).`,
  );
  console.log(lines.join("\n"));
  if (!met) process.exitCode = 1;
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
