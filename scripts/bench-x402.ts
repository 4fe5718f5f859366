/**
 * The peer, measured side by side (`npm run bench:x402`). In one run, against the same echo backend and on the
 * same local chain (a real `hardhat node`, chain id 8453, with the escrow and test USDC deployed as `npm start`
 * deploys them), at the same number of connections, it measures:
 *   a. a bare Node HTTP proxy in front of the backend (the baseline: no payment at all);
 *   b. x402 per call, the peer a user would pick instead: the real `@x402/express` payment middleware in front of
 *      the backend, its facilitator (`@x402/core` + `@x402/evm`'s `exact` scheme) in the same process, verifying
 *      each call and settling it on-chain (one `transferWithAuthorization`, payer to seller) before the answer is
 *      released; paid by the real `@x402/fetch` client, one payer account per connection;
 *   c. this gateway with keyed calls: an `atom_` key, a prepaid balance (the buyer's deposit in the escrow),
 *      every charge durable before its 200, and the settler posting batches as in production; what is left
 *      unsettled when the run ends is settled right after, and the gas of every `settle()` is divided by the
 *      calls it settled;
 *   d. this gateway's own x402 endpoint, `POST /x402/skills/:skillId/call`, paid by the same `@x402/fetch`
 *      client code as (b): each payment collected into the escrow before the call (collectX402, the transaction
 *      its PAYMENT-RESPONSE names) and completed after it (completeX402); its gas per paid call is the two
 *      together. Skipped, saying so, while the gateway answers it 404.
 * For each: paid calls per second, p50 and p99 latency of a paid call (for x402, both of its requests: the
 * 402 and the paid one, as `@x402/fetch` makes them), the p50 again with one call at a time (the latency
 * without queueing), and the gas spent on-chain per paid call, with the throughput as a ratio of the bare
 * proxy's and of the x402 peer's. Every answer that is not a paid 200 is counted as failed and its reason
 * printed. The money is checked too: the x402 payers' USDC must fall, and the peer's seller's rise, by exactly
 * price × payments, and the batches must settle exactly the charges the gateway captured; the run exits
 * non-zero if not. Each server runs in its own process (./bench/servers.ts); the load generator and the x402
 * clients run in this one; the chain is a further process.
 *
 *   BENCH_SECONDS (default 8)  BENCH_CONNECTIONS (default 50: also the number of x402 payer accounts)
 */
import { spawnSync } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { decodePaymentResponseHeader } from "@x402/fetch";
import { type Address, type Hash, type LocalAccount, erc20Abi, getAbiItem, keccak256, toHex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { skillEscrowAbi } from "../server/chain/abi";
import { testUsdcAbi } from "../server/chain/abi";
import { serializeDeployment } from "../server/chain/deployment";
import { deployDemoChain } from "../server/devstack/chain-seed";
import { DEV_ACCOUNT_INDEX, type LocalNode, devAccount, devPrivateKey, startLocalNode } from "../server/devstack/local-node";
import { BATCH_SETTLED_EVENT } from "../server/settlement/reconcile";
import { CONNECTIONS, type MeasureOptions, type Run, SECONDS, WARMUP_MS, ask, load, measure, start, stopAll } from "./bench/common";
import type { GatewaySpec, X402PeerSpec } from "./bench/servers";
import { x402Fetch } from "./bench/x402-peer";

const ROOT = path.resolve(__dirname, "..");
/** One call's price on every paid path, in USDC base units (0.001 USDC). */
const PRICE_MICROS = 1_000n;
/** The gateway buyer's deposit: enough for far more calls than a run makes. */
const GATEWAY_DEPOSIT_MICROS = 10_000_000_000n;
/** Each x402 payer's test USDC. */
const PAYER_FUNDS_MICROS = 1_000_000_000n;
/** Development accounts of the local node given roles here (npm start uses 0-4, and 10-11 for its bundler). */
const FACILITATOR_INDEX = 5;
const PEER_SELLER_INDEX = 6;

/** The unloaded latency: one call at a time, briefly. */
const SOLO: MeasureOptions = { connections: 1, seconds: Math.min(2, SECONDS), warmupMs: 300 };

/** A scenario's row: its run at CONNECTIONS, its run at one connection, and the gas its paid calls cost on-chain. */
interface Row {
  run: Run;
  solo: Run;
  /** Mean gas per paid call; undefined where nothing is paid on-chain. */
  gasPerCall?: number;
}

/** Compiles the contracts if they changed (a no-op otherwise), as npm start does. */
function compileContracts(): void {
  const result = spawnSync(path.join(ROOT, "node_modules/.bin/hardhat"), ["compile", "--quiet"], { cwd: ROOT, stdio: "inherit" });
  if (result.status !== 0) throw new Error("hardhat compile failed");
}

/** A deterministic payer per connection: they sign only EIP-3009 authorizations, so they need USDC and no gas. */
const payerAccount = (i: number): LocalAccount => privateKeyToAccount(keccak256(toHex(`bench x402 payer ${i}`)));

/** What an x402 run saw besides its measurement. */
interface X402Tally {
  /** The settlement transactions of the recorded paid calls (for their gas). */
  transactions: Hash[];
  /** Payments settled, warm-up included: what the payers paid in all. */
  settled: number;
  /** Why recorded calls failed, and how many times each. */
  failures: Map<string, number>;
}

const newTally = (): X402Tally => ({ transactions: [], settled: 0, failures: new Map() });

/**
 * Runs the x402 load against `url`: each connection pays from its own account through `@x402/fetch`. A paid
 * call is a 200 whose PAYMENT-RESPONSE says the payment settled; its transaction is kept for the gas.
 */
function x402Load(
  name: string,
  url: string,
  body: string,
  pay: (connection: number) => typeof fetch,
  tally: X402Tally,
  options: MeasureOptions = {},
): Promise<Run> {
  const fail = (reason: string, recorded: boolean) => {
    if (recorded) tally.failures.set(reason, (tally.failures.get(reason) ?? 0) + 1);
  };
  const fetchers = Array.from({ length: options.connections ?? CONNECTIONS }, (_, i) => pay(i));
  return measure(
    name,
    async (connection, recorded) => {
      let res: Response;
      try {
        res = await fetchers[connection](url, { method: "POST", headers: { "content-type": "application/json" }, body });
      } catch (error) {
        fail(`threw: ${(error as Error).message.slice(0, 160)}`, recorded);
        throw error;
      }
      await res.text();
      const header = res.headers.get("payment-response");
      const settlement = header ? decodePaymentResponseHeader(header) : undefined;
      if (settlement?.success) tally.settled++;
      if (res.status !== 200) {
        fail(`HTTP ${res.status}${settlement && !settlement.success ? ` (${settlementFailure(settlement)})` : ""}`, recorded);
        return false;
      }
      if (!settlement?.success || !settlement.transaction) {
        fail("200 without a settled PAYMENT-RESPONSE", recorded);
        return false;
      }
      if (recorded) tally.transactions.push(settlement.transaction as Hash);
      return true;
    },
    options,
  );
}

/** A failed settlement's reason, and the line of its message that says what the chain answered. */
function settlementFailure(settlement: { errorReason?: string; errorMessage?: string }): string {
  const details = settlement.errorMessage?.match(/Details: ([^\n]*)/)?.[1];
  return [settlement.errorReason, details?.slice(0, 160)].filter(Boolean).join(": ");
}

/** Mean gas used by the transactions (their receipts, read a few at a time). */
async function meanGas(node: LocalNode, hashes: Hash[]): Promise<number | undefined> {
  if (hashes.length === 0) return undefined;
  let total = 0n;
  for (let i = 0; i < hashes.length; i += 32) {
    const receipts = await Promise.all(hashes.slice(i, i + 32).map((hash) => node.publicClient.getTransactionReceipt({ hash })));
    for (const receipt of receipts) total += receipt.gasUsed;
  }
  return Number(total) / hashes.length;
}

/** The mean gas of the escrow's x402 completions (X402Settled) from `fromBlock` on, and how many there were. */
async function completionGas(node: LocalNode, escrow: Address, fromBlock: bigint): Promise<{ count: number; mean: number | undefined }> {
  const event = getAbiItem({ abi: skillEscrowAbi, name: "X402Settled" });
  const logs = await node.publicClient.getLogs({ address: escrow, event, fromBlock, strict: true });
  return { count: logs.length, mean: await meanGas(node, [...new Set(logs.map((log) => log.transactionHash))]) };
}

/** Every BatchSettled so far: the calls they settled and the gas their transactions used. */
async function batchSettlement(node: LocalNode, escrow: Address, fromBlock: bigint) {
  const logs = await node.publicClient.getLogs({ address: escrow, event: BATCH_SETTLED_EVENT, fromBlock, strict: true });
  let calls = 0n;
  let gas = 0n;
  for (const log of logs) {
    calls += log.args.callCount;
    gas += (await node.publicClient.getTransactionReceipt({ hash: log.transactionHash })).gasUsed;
  }
  return { batches: logs.length, calls: Number(calls), gas: Number(gas) };
}

const describeFailures = (name: string, failures: Map<string, number>) =>
  [...failures].map(([reason, count]) => `${name}: ${count} calls failed (loaded and one-connection runs), ${reason}`);

async function main(): Promise<void> {
  compileContracts();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "skill-gw-bench-x402-"));
  const children: ChildProcess[] = [];
  let node: LocalNode | undefined;
  try {
    // Its blocks follow the wall clock, however many it mines a second: see hardhat.config.ts.
    node = await startLocalNode({ sameSecondBlocks: true });
    // The node would print every RPC call it answers; that printing is not part of any scenario's cost.
    await node.publicClient.request({ method: "hardhat_setLoggingEnabled" as never, params: [false] as never });
    const chain = await deployDemoChain(node, GATEWAY_DEPOSIT_MICROS);
    const { deployment } = chain;
    const deployer = node.walletFor(devAccount(DEV_ACCOUNT_INDEX.deployer));
    const payers = Array.from({ length: CONNECTIONS }, (_, i) => payerAccount(i));
    for (const payer of payers) {
      const hash = await deployer.writeContract({
        address: deployment.usdc,
        abi: testUsdcAbi,
        functionName: "mint",
        args: [payer.address, PAYER_FUNDS_MICROS],
      });
      await node.publicClient.waitForTransactionReceipt({ hash });
    }
    const balanceOf = (address: Address) =>
      node!.publicClient.readContract({ address: deployment.usdc, abi: erc20Abi, functionName: "balanceOf", args: [address] });
    const payersHold = async () => (await Promise.all(payers.map((p) => balanceOf(p.address)))).reduce((a, b) => a + b, 0n);
    /** Whether `amount` is exactly price × `payments`, said in words (and remembered: a mismatch fails the run). */
    const exactly = (amount: bigint, payments: number) => {
      if (amount === PRICE_MICROS * BigInt(payments)) return "exactly price × payments";
      process.exitCode = 1;
      return `NOT price × payments (${PRICE_MICROS * BigInt(payments)})`;
    };

    const backend = await start("backend");
    children.push(backend.child);
    const proxy = await start("proxy", backend.msg.url);
    children.push(proxy.child);
    const peerSeller = devAccount(PEER_SELLER_INDEX).address;
    const peerSpec: X402PeerSpec = {
      rpcUrl: node.rpcUrl,
      usdc: deployment.usdc,
      payTo: peerSeller,
      priceMicros: PRICE_MICROS.toString(),
      facilitatorKey: devPrivateKey(FACILITATOR_INDEX),
      backendUrl: backend.msg.url,
    };
    const peer = await start("x402-peer", JSON.stringify(peerSpec));
    children.push(peer.child);
    const gatewaySpec: GatewaySpec = {
      backendUrl: backend.msg.url,
      dbPath: path.join(dir, "bench.db"),
      chain: { rpcUrl: node.rpcUrl, deployment: serializeDeployment(deployment), buyer: chain.buyerAddress, seller: chain.sellerAddress },
    };
    const gateway = await start("gateway", JSON.stringify(gatewaySpec));
    children.push(gateway.child);

    const network = `eip155:${deployment.chainId}` as const;
    const pay = (connection: number) =>
      x402Fetch(payers[connection], { allow: { network, asset: deployment.usdc, maxAmountPerPaymentMicros: PRICE_MICROS } });
    const input = { hello: "world", n: 42 };
    console.log(
      `x402 peer benchmark: ${CONNECTIONS} connections (and x402 payer accounts), ${SECONDS} s per scenario after ${WARMUP_MS} ms warm-up, ` +
        `${os.cpus().length} cores, Node ${process.version}, local hardhat node (chain ${deployment.chainId}, automine), price ${PRICE_MICROS} base units per call\n`,
    );
    const notes: string[] = [];
    const body = JSON.stringify(input);

    // a. The baseline.
    const bareUrl = `${proxy.msg.url}/echo`;
    const bare: Row = {
      run: await load("bare Node proxy (no payment)", bareUrl, body, {}),
      solo: await load("", bareUrl, body, {}, SOLO),
    };

    // b. x402 per call, through the real packages.
    const peerTally = newTally();
    const [sellerBefore, payersBefore] = [await balanceOf(peerSeller), await payersHold()];
    const peerUrl = `${peer.msg.url}/echo`;
    const peerRun = await x402Load("x402 per call (@x402/express, in-process facilitator; @x402/fetch)", peerUrl, body, pay, peerTally);
    const peerSolo = await x402Load("", peerUrl, body, pay, peerTally, SOLO);
    const peerGas = await meanGas(node, peerTally.transactions);
    const [sellerGained, payersPaid] = [(await balanceOf(peerSeller)) - sellerBefore, payersBefore - (await payersHold())];
    notes.push(
      `x402 peer: ${peerTally.settled} payments settled on-chain (warm-up and one-connection runs included), one transferWithAuthorization each, ` +
        `sent by the facilitator ${peer.msg.facilitator}; the payers' USDC fell by ${payersPaid} base units, ${exactly(payersPaid, peerTally.settled)}; ` +
        `the seller's rose by ${sellerGained}, ${exactly(sellerGained, peerTally.settled)}`,
      ...describeFailures("x402 peer", peerTally.failures),
    );
    const peerRow: Row = { run: peerRun, solo: peerSolo, gasPerCall: peerGas };

    // c. The gateway, keyed calls; then whatever the settler has not settled yet is settled, and measured.
    const keyedUrl = `${gateway.msg.url}/v1/call`;
    const keyedBody = JSON.stringify({ skill_id: "echo", input });
    const authorization = { authorization: `Bearer ${gateway.msg.keys[0]}` };
    const keyed = await load("gateway, keyed calls (atom_ key, prepaid, batch settlement)", keyedUrl, keyedBody, authorization);
    const keyedSolo = await load("", keyedUrl, keyedBody, authorization, SOLO);
    const { settleMs } = await ask<{ settleMs: number }>(gateway.child, "settle");
    const stats = await ask<{ captured: number }>(gateway.child, "stats");
    const settled = await batchSettlement(node, deployment.escrow, deployment.deployBlock);
    if (settled.calls !== stats.captured) process.exitCode = 1;
    notes.push(
      `gateway keyed: ${stats.captured} charges (warm-up and one-connection runs included) settled in ${settled.batches} settle() batches ` +
        `(${settled.calls} calls in their BatchSettled events${settled.calls === stats.captured ? "" : ", NOT the charges captured"}), ` +
        `${settled.gas.toLocaleString("en-US")} gas in all, sent by the gateway's settler; what was left unsettled when the runs ended settled ${settleMs.toFixed(0)} ms later`,
    );
    const keyedRow: Row = { run: keyed, solo: keyedSolo, gasPerCall: settled.calls > 0 ? settled.gas / settled.calls : undefined };
    const rows: Row[] = [bare, peerRow, keyedRow];

    // d. The gateway's own x402 endpoint, once it exists.
    const gatewayX402Url = `${gateway.msg.url}/x402/skills/echo/call`;
    const probe = await fetch(gatewayX402Url, { method: "POST", headers: { "content-type": "application/json" }, body });
    await probe.text();
    if (probe.status === 402 && probe.headers.has("payment-required")) {
      const tally = newTally();
      const before = await payersHold();
      const fromBlock = await node.publicClient.getBlockNumber({ cacheTime: 0 });
      const run = await x402Load(
        "gateway, x402 endpoint (@x402/fetch; collect, then complete, per call)",
        gatewayX402Url,
        body,
        pay,
        tally,
      );
      const solo = await x402Load("", gatewayX402Url, body, pay, tally, SOLO);
      const paid = before - (await payersHold());
      const collectGas = await meanGas(node, tally.transactions);
      const completions = await completionGas(node, deployment.escrow, fromBlock);
      notes.push(
        `gateway x402: ${tally.settled} payments collected on-chain (warm-up and one-connection runs included), ` +
          `${completions.count} completed; the payers' USDC fell by ${paid} base units, ${exactly(paid, tally.settled)}; ` +
          `gas per paid call: collectX402 ${collectGas?.toFixed(0) ?? "?"} + completeX402 ${completions.mean?.toFixed(0) ?? "?"}`,
        ...describeFailures("gateway x402", tally.failures),
      );
      rows.push({
        run,
        solo,
        gasPerCall: collectGas === undefined || completions.mean === undefined ? undefined : collectGas + completions.mean,
      });
    } else {
      notes.push(
        `gateway x402 endpoint: skipped, POST /x402/skills/echo/call answered ${probe.status}` +
          (probe.status === 404 ? " (the endpoint is not there yet)" : " without a PAYMENT-REQUIRED header"),
      );
    }
    // The x402 rows' failures are described above, by reason.
    for (const r of [bare, keyedRow]) {
      if (r.run.failed > 0) notes.push(`${r.run.name}: ${r.run.failed} calls not answered 200`);
      if (r.solo.failed > 0) notes.push(`${r.run.name}, one connection: ${r.solo.failed} calls not answered 200`);
    }

    const fmt = (n: number, d = 2) => n.toFixed(d);
    const perSec = (r: Row) => r.run.ok / r.run.elapsedSec;
    // Two significant digits below 0.1, so a ratio of 0.005 does not print as 0.00.
    const ratio = (r: Row, to: Row) => {
      if (perSec(to) === 0) return "n/a";
      const x = perSec(r) / perSec(to);
      return x < 0.1 ? x.toPrecision(2) : fmt(x);
    };
    const gas = (r: Row) => (r.gasPerCall === undefined ? "none" : Math.round(r.gasPerCall).toLocaleString("en-US"));
    console.log(
      `| scenario | paid calls/s | × bare proxy | × x402 peer | p50 ms | p99 ms | p50 ms, one connection | gas per paid call | failed |`,
    );
    console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (const r of rows)
      console.log(
        `| ${r.run.name} | ${fmt(perSec(r), 0)} | ${ratio(r, bare)} | ${ratio(r, peerRow)} | ${fmt(r.run.p50Ms)} | ${fmt(r.run.p99Ms)} | ` +
          `${fmt(r.solo.p50Ms)} | ${gas(r)} | ${r.run.failed} |`,
      );
    console.log("");
    if (peerRow.gasPerCall && keyedRow.gasPerCall)
      console.log(
        `on-chain gas per paid call: the gateway's batch settlement costs 1/${Math.floor(peerRow.gasPerCall / keyedRow.gasPerCall)} of x402's per-call settlement`,
      );
    for (const line of notes) console.log(line);
  } finally {
    stopAll(children);
    await node?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
