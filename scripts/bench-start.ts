/**
 * `npm run bench:start`: the gateway as a new user meets it (issue 25's last two targets). It runs `npm start`
 * (scripts/start-local.ts: the local chain, the bundler, the demo backend, the gateway with its background loops and
 * its log on stdout, all on this machine's cores), funds the demo buyer with an on-chain deposit large enough for
 * the run, and measures with wrk (Debian's load generator in C, an independent process), in the same run:
 *   - a bare Node proxy in front of a plain echo server (./bench/servers.ts), the baseline;
 *   - paid calls of the demo `echo` skill through `npm start`'s gateway with the key it printed;
 * each at BENCH_CONNECTIONS (50) connections, then one call at a time (one connection): the latency the gateway
 * adds at p50. It prints both ratios against issue 25's targets, then stops `npm start` with SIGTERM and says how
 * long it took.
 *
 *   BENCH_SECONDS (default 8)  BENCH_CONNECTIONS (default 50)  BENCH_PROFILE (a folder: a CPU profile of npm start's process)
 * Needs `wrk` (apt-get install wrk). `npm start`'s per-key rate limit is raised for the run (RATE_LIMIT_PER_MIN),
 * as a user measuring it would; every other setting is the embedded default.
 */
import { type ChildProcess, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { type Address, createPublicClient, createWalletClient, http, parseAbi } from "viem";
import { DEV_ACCOUNT_INDEX, devAccount, localChain } from "../server/devstack/local-node";
import { startLocalProcess } from "../server/devstack/start-local-process";
import { microsToUsd } from "../server/ledger/money";
import { fundPayer } from "./fund";
import { CLOCK_TICKS, CONNECTIONS, SECONDS, procStatFields, start, stopAll } from "./bench/common";

/** What the run deposits for the demo buyer: 200 USDC, 200,000 calls of the $0.001 echo. */
const DEPOSIT_MICROS = 200_000_000n;
const ESCROW_ABI = parseAbi(["function deposit(uint256 amount)"]);
const TOKEN_ABI = parseAbi(["function approve(address spender, uint256 amount) returns (bool)"]);

interface Wrk {
  requestsPerSec: number;
  /** Requests wrk completed in the window. */
  requests: number;
  p50Ms: number;
  p99Ms: number;
  non2xx: number;
  errors: number;
}

/** Converts one of wrk's latency figures ("512.00us", "1.23ms", "2.00s") to milliseconds. */
function wrkMs(figure: string): number {
  const m = /^([\d.]+)(us|ms|s|m)$/.exec(figure);
  if (!m) return Number.NaN;
  const n = Number(m[1]);
  return m[2] === "us" ? n / 1000 : m[2] === "ms" ? n : m[2] === "s" ? n * 1000 : n * 60_000;
}

/** Runs wrk POSTing `body` to `url` with `headers` and reads its summary. */
function wrk(url: string, body: string, headers: Record<string, string>, connections: number, seconds: number, dir: string): Wrk {
  const script = path.join(dir, "post.lua");
  fs.writeFileSync(
    script,
    [
      'wrk.method = "POST"',
      `wrk.body = ${JSON.stringify(body)}`,
      ...Object.entries({ "Content-Type": "application/json", ...headers }).map(
        ([k, v]) => `wrk.headers[${JSON.stringify(k)}] = ${JSON.stringify(v)}`,
      ),
      "",
    ].join("\n"),
  );
  const threads = Math.max(1, Math.min(2, connections));
  const result = spawnSync("wrk", [`-t${threads}`, `-c${connections}`, `-d${seconds}s`, "--latency", "-s", script, url], {
    encoding: "utf8",
  });
  if (result.status !== 0) throw new Error(`wrk failed: ${result.stderr || result.stdout}`);
  const out = result.stdout;
  const latency = (p: string) => wrkMs(new RegExp(`^\\s+${p}%\\s+(\\S+)`, "m").exec(out)?.[1] ?? "");
  const errors = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
  return {
    requestsPerSec: Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? Number.NaN),
    requests: Number(/(\d+) requests in/.exec(out)?.[1] ?? Number.NaN),
    p50Ms: latency("50"),
    p99Ms: latency("99"),
    non2xx: Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0),
    errors: errors ? errors.slice(1).reduce((a, b) => a + Number(b), 0) : 0,
  };
}

/**
 * CPU time (µs) a process has used, and its main thread alone (Linux's /proc: user and system clock ticks), so that a
 * run's CPU a call can be read beside its req/s: the host's neighbours move the second, much less the first.
 */
function cpuOf(pid: number): { processMicros: number; mainThreadMicros: number } {
  const micros = (file: string) => {
    const fields = procStatFields(file);
    if (!fields) throw new Error(`${file} is gone: npm start stopped during the run`);
    return ((Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS) * 1e6;
  };
  return { processMicros: micros(`/proc/${pid}/stat`), mainThreadMicros: micros(`/proc/${pid}/task/${pid}/stat`) };
}

/** Starts `npm start` on free ports and a fresh database in `dir`, and resolves with what its banner says. */
async function startLocal(
  dir: string,
): Promise<{ child: ChildProcess; url: string; key: string; rpcUrl: string; escrow: Address; usdc: Address; chainId: number }> {
  // BENCH_PROFILE=<dir>: a V8 CPU profile of the npm start process (the gateway, the demo backend), written as it stops.
  const profile = process.env.BENCH_PROFILE ? ["--cpu-prof", `--cpu-prof-dir=${path.resolve(process.env.BENCH_PROFILE)}`] : [];
  const { child, output } = await startLocalProcess(path.join(dir, "gateway.db"), { RATE_LIMIT_PER_MIN: "10000000" }, profile);
  const field = (name: string) => new RegExp(`^${name}:\\s+(\\S+)`, "m").exec(output)?.[1] ?? "";
  return {
    child,
    url: field("Gateway"),
    key: /^API key: (atom_\S+)$/m.exec(output)?.[1] ?? "",
    rpcUrl: field("Chain RPC"),
    escrow: field("Escrow") as Address,
    usdc: field("USDC") as Address,
    chainId: Number(/chain id (\d+)/.exec(output)?.[1]),
  };
}

/** Deposits DEPOSIT_MICROS into the escrow from the demo buyer's wallet and waits for the gateway to credit it. */
async function fundDemoBuyer(local: Awaited<ReturnType<typeof startLocal>>): Promise<bigint> {
  const chain = localChain(local.rpcUrl, local.chainId);
  const publicClient = createPublicClient({ chain, transport: http(local.rpcUrl) });
  const owner = createWalletClient({ account: devAccount(DEV_ACCOUNT_INDEX.deployer), chain, transport: http(local.rpcUrl) });
  const buyer = createWalletClient({ account: devAccount(DEV_ACCOUNT_INDEX.demoBuyer), chain, transport: http(local.rpcUrl) });
  await fundPayer({ publicClient, walletClient: owner, usdc: local.usdc, to: buyer.account.address, amountMicros: DEPOSIT_MICROS });
  for (const [address, abi, functionName, args] of [
    [local.usdc, TOKEN_ABI, "approve", [local.escrow, DEPOSIT_MICROS]],
    [local.escrow, ESCROW_ABI, "deposit", [DEPOSIT_MICROS]],
  ] as const) {
    const hash = await buyer.writeContract({ address, abi, functionName, args } as never);
    const receipt = await publicClient.waitForTransactionReceipt({ hash });
    if (receipt.status !== "success") throw new Error(`${functionName} reverted (${hash})`);
  }
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    const answer = await fetch(`${local.url}/v1/balance`, { headers: { authorization: `Bearer ${local.key}` } });
    const body = (await answer.json()) as { data?: { available_base_units?: string } };
    const available = BigInt(body.data?.available_base_units ?? 0);
    if (available >= DEPOSIT_MICROS) return available;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error("the gateway did not credit the deposit within a minute");
}

async function main(): Promise<void> {
  if (spawnSync("wrk", ["--version"]).error) throw new Error("wrk is not installed (apt-get install wrk)");
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "skill-gw-bench-start-"));
  const children: ChildProcess[] = [];
  let local: Awaited<ReturnType<typeof startLocal>> | undefined;
  try {
    const backend = await start("backend");
    children.push(backend.child);
    const proxy = await start("proxy", backend.msg.url);
    children.push(proxy.child);
    local = await startLocal(dir);
    const available = await fundDemoBuyer(local);
    console.log(
      `npm start benchmark: wrk, ${CONNECTIONS} connections then 1, ${SECONDS} s each after a 2 s warm-up, ${os.cpus().length} cores, ` +
        `load average ${os
          .loadavg()
          .map((n) => n.toFixed(1))
          .join(" ")}; the demo buyer holds $${microsToUsd(available)}\n`,
    );
    const input = JSON.stringify({ hello: "world" });
    const callBody = JSON.stringify({ skill_id: "echo", input: { hello: "world" } });
    const auth = { Authorization: `Bearer ${local.key}` };
    const runs: { name: string; run: Wrk }[] = [];
    const cpu: { connections: number; processMicros: number; mainThreadMicros: number }[] = [];
    const pid = local.child.pid!;
    for (const connections of [CONNECTIONS, 1]) {
      wrk(`${proxy.msg.url}/echo`, input, {}, connections, 2, dir);
      runs.push({ name: `bare Node proxy, ${connections} conn.`, run: wrk(`${proxy.msg.url}/echo`, input, {}, connections, SECONDS, dir) });
      wrk(`${local.url}/v1/call`, callBody, auth, connections, 2, dir);
      const before = cpuOf(pid);
      const run = wrk(`${local.url}/v1/call`, callBody, auth, connections, SECONDS, dir);
      const after = cpuOf(pid);
      runs.push({ name: `npm start, paid echo calls, ${connections} conn.`, run });
      // Per request answered (the table says how many were not 200); no figure from a run wrk reported no count for.
      if (Number.isFinite(run.requests) && run.requests > 0)
        cpu.push({
          connections,
          processMicros: (after.processMicros - before.processMicros) / run.requests,
          mainThreadMicros: (after.mainThreadMicros - before.mainThreadMicros) / run.requests,
        });
    }
    console.log("| scenario | req/s | p50 ms | p99 ms | non-2xx | socket errors |");
    console.log("| --- | ---: | ---: | ---: | ---: | ---: |");
    for (const { name, run } of runs)
      console.log(
        `| ${name} | ${run.requestsPerSec.toFixed(0)} | ${run.p50Ms.toFixed(3)} | ${run.p99Ms.toFixed(3)} | ${run.non2xx} | ${run.errors} |`,
      );
    const [bareMany, gatewayMany, bareOne, gatewayOne] = runs.map((r) => r.run);
    console.log("\nratios (issue 25's targets in brackets):");
    console.log(
      `  under npm start, paid calls / bare proxy (wrk, ${CONNECTIONS} connections): ${(gatewayMany.requestsPerSec / bareMany.requestsPerSec).toFixed(2)} [>= 0.35]`,
    );
    console.log(`  latency added at one call at a time, p50: ${(gatewayOne.p50Ms - bareOne.p50Ms).toFixed(3)} ms [<= 0.3 ms]`);
    console.log("\nnpm start's process, CPU µs a paid call (the chain and the bundler, processes of their own, not counted):");
    for (const c of cpu)
      console.log(
        `  ${c.connections} conn.: ${c.processMicros.toFixed(0)} in all, ${c.mainThreadMicros.toFixed(0)} on the gateway's main thread (its event loop)`,
      );
    if (gatewayMany.non2xx + gatewayOne.non2xx > 0) console.log("  (some calls were not 200: the ratios count them; see the table)");
  } finally {
    if (local) {
      const t0 = Date.now();
      const child = local.child;
      const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
      child.kill("SIGTERM");
      const code = await Promise.race([exited, new Promise<"timeout">((r) => setTimeout(() => r("timeout"), 30_000))]);
      if (code === "timeout") {
        child.kill("SIGKILL");
        console.log("npm start did not stop within 30 s of SIGTERM: killed");
      } else console.log(`npm start stopped ${Date.now() - t0} ms after SIGTERM (exit code ${code})`);
    }
    stopAll(children);
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
