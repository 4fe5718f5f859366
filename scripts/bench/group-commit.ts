/**
 * The group commit alone (`npm run bench:group-commit`): what a durable write costs the event loop with the COMMIT's
 * fsync on it (synchronous=FULL) and off it (synchronous=NORMAL and the -wal file's fsync on libuv's thread pool,
 * server/db/wal-sync.ts). 50 callers each write a row and wait for it to be durable, over and over, as the gateway's
 * captures do; the two modes take turns on fresh files in one run, so that a loaded machine weighs on both alike.
 * Per durable write it prints the event loop's busy time, the process's CPU (every thread) and the throughput.
 *
 *   GC_BENCH_SECONDS (default 3 a round)  GC_BENCH_ROUNDS (default 3 of each)  GC_BENCH_CALLERS (default 50)
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { openDatabase } from "../../server/db/db";
import { GroupCommit } from "../../server/db/group-commit";
import { WalFileSync } from "../../server/db/wal-sync";
import { SCHEMA } from "../../server/schema";

const SECONDS = Number(process.env.GC_BENCH_SECONDS ?? 3);
const ROUNDS = Number(process.env.GC_BENCH_ROUNDS ?? 3);
const CALLERS = Number(process.env.GC_BENCH_CALLERS ?? 50);

type Mode = "FULL" | "wal-fsync";
interface Round {
  mode: Mode;
  writes: number;
  loopBusyMicros: number;
  cpuMicros: number;
  writesPerSec: number;
  perCommit: number;
}

async function round(mode: Mode, dir: string, n: number): Promise<Round> {
  const file = path.join(dir, `${mode}-${n}.db`);
  const db = openDatabase(file, SCHEMA);
  db.exec("CREATE TABLE bench_calls (id INTEGER PRIMARY KEY, account TEXT NOT NULL, amount INTEGER NOT NULL, body TEXT NOT NULL)");
  const walSync = mode === "wal-fsync" ? new WalFileSync(`${fs.realpathSync(file)}-wal`) : undefined;
  const commit = new GroupCommit(db, 512, (error) => console.error("commit failed", error), 10, walSync);
  const insert = db.prepare("INSERT INTO bench_calls (account, amount, body) VALUES (?, ?, ?)");
  const body = JSON.stringify({ ok: true, echo: "x".repeat(200) });
  let writes = 0;
  let stop = false;
  const caller = async (i: number) => {
    while (!stop) {
      await commit.runDurable(() => insert.run(`buyer-${i}`, 1000n, body));
      writes++;
    }
  };
  const elu0 = performance.eventLoopUtilization();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const batches0 = commit.committedBatches;
  const callers = Array.from({ length: CALLERS }, (_, i) => caller(i));
  await new Promise((resolve) => setTimeout(resolve, SECONDS * 1000));
  stop = true;
  await Promise.all(callers);
  const elapsedMs = performance.now() - t0;
  const elu = performance.eventLoopUtilization(elu0);
  const cpu = process.cpuUsage(cpu0);
  const batches = commit.committedBatches - batches0;
  await commit.drain();
  db.close();
  return {
    mode,
    writes,
    loopBusyMicros: (elu.active * 1000) / writes,
    cpuMicros: (cpu.user + cpu.system) / writes,
    writesPerSec: writes / (elapsedMs / 1000),
    perCommit: writes / Math.max(1, batches),
  };
}

async function main(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "bench-group-commit-"));
  const rounds: Round[] = [];
  try {
    for (let n = 0; n < ROUNDS; n++) for (const mode of ["FULL", "wal-fsync"] as const) rounds.push(await round(mode, dir, n));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  const median = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  console.log(
    `group commit: ${CALLERS} callers, ${ROUNDS} rounds of ${SECONDS} s per mode, taking turns; load average ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(" ")}, ${os.cpus().length} cores`,
  );
  console.log("| mode | durable writes/s | event loop busy µs/write | process CPU µs/write | writes per commit |");
  console.log("| --- | ---: | ---: | ---: | ---: |");
  const medians: Record<string, Round> = {};
  for (const mode of ["FULL", "wal-fsync"] as const) {
    const mine = rounds.filter((r) => r.mode === mode);
    const m: Round = {
      mode,
      writes: 0,
      writesPerSec: median(mine.map((r) => r.writesPerSec)),
      loopBusyMicros: median(mine.map((r) => r.loopBusyMicros)),
      cpuMicros: median(mine.map((r) => r.cpuMicros)),
      perCommit: median(mine.map((r) => r.perCommit)),
    };
    medians[mode] = m;
    console.log(
      `| ${mode} (median) | ${m.writesPerSec.toFixed(0)} | ${m.loopBusyMicros.toFixed(1)} | ${m.cpuMicros.toFixed(1)} | ${m.perCommit.toFixed(1)} |`,
    );
  }
  const [full, wal] = [medians.FULL, medians["wal-fsync"]];
  console.log(
    `wal-fsync / FULL: throughput ${(wal.writesPerSec / full.writesPerSec).toFixed(2)}, event loop busy per write ${(wal.loopBusyMicros / full.loopBusyMicros).toFixed(2)}`,
  );
  for (const r of rounds)
    console.log(
      `  round ${r.mode}: ${r.writesPerSec.toFixed(0)} writes/s, loop ${r.loopBusyMicros.toFixed(1)} µs, CPU ${r.cpuMicros.toFixed(1)} µs, ${r.perCommit.toFixed(1)} per commit`,
    );
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
