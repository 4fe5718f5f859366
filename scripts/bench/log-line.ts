/**
 * The per-request log line and request counter alone (`npm run bench:log-line`): the CPU each costs on the event loop,
 * written as the gateway writes it (JSON, pino's asynchronous destination), to /dev/null so that the disk is not measured.
 * Prints µs of CPU per request line for the logger as configured and for each piece of the line's cost; then, to a real
 * file with a turn of the event loop between lines (as a server writes them), the destination as configured
 * (logDestination: lines gathered) against one write(2) a line, in CPU of every thread of the process.
 *
 *   LOG_BENCH_LINES (default 200000)
 */
import { performance } from "node:perf_hooks";
import pino from "pino";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { createLogger, logDestination } from "../../server/ops/log";
import { GatewayMetrics } from "../../server/ops/metrics";
import { runInRequest } from "../../server/ops/request-context";

const LINES = Number(process.env.LOG_BENCH_LINES ?? 200_000);

function measure(name: string, each: (i: number) => void): number {
  for (let i = 0; i < 20_000; i++) each(i);
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < LINES; i++) each(i);
  const cpu = process.cpuUsage(cpu0);
  const micros = (cpu.user + cpu.system) / LINES;
  console.log(`| ${name} | ${micros.toFixed(2)} | ${(((performance.now() - t0) * 1000) / LINES).toFixed(2)} |`);
  return micros;
}

const destination = () => logDestination("/dev/null");
const line = (i: number) => ({
  request_id: "8c3d2d63-3c0b-4a8e-9a53-0f5e1c7c9a10",
  method: "POST",
  route: "/v1/call",
  status: 200,
  latency_ms: 1.23 + (i % 7),
  skill: "echo",
  outcome: "success",
  charged_micros: "1000",
});

console.log("| what | CPU µs/line | wall µs/line |");
console.log("| --- | ---: | ---: |");
const gateway = createLogger({ level: "info", destination: destination() });
measure("the gateway's logger, request line (outside a request)", (i) => gateway.info(line(i), "request"));
measure("the gateway's logger, request line (inside a request)", (i) => runInRequest({ id: "x" }, () => gateway.info(line(i), "request")));
const bare = pino({ level: "info", timestamp: pino.stdTimeFunctions.isoTime }, destination());
measure("pino without redaction or mixin", (i) => bare.info(line(i), "request"));
const metrics = new GatewayMetrics({ openHolds: () => 0 });
measure("the requests counter", () => metrics.observeRequest("POST", "/v1/call", 200));
measure("the call's metrics", (i) =>
  metrics.observeCall({ skill: "echo", outcome: "success", chargedMicros: 1000n, latencyMs: 1 + (i % 5) }),
);

/** CPU of every thread (the thread pool's writes too) and event-loop wall time a line, with a turn of the loop after every second line. */
async function measureServed(name: string, destination: pino.DestinationStream): Promise<void> {
  const logger = createLogger({ level: "info", destination });
  const lines = LINES / 2;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < lines; i++) {
    logger.info(line(i), "request");
    if (i % 2 === 1) await new Promise((resolve) => setImmediate(resolve));
  }
  const cpu = process.cpuUsage(cpu0);
  console.log(`| ${name} | ${((cpu.user + cpu.system) / lines).toFixed(2)} | ${(((performance.now() - t0) * 1000) / lines).toFixed(2)} |`);
}

void (async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "log-line-bench-"));
  try {
    console.log("\n| to a file, a turn of the event loop between lines | CPU µs/line, all threads | wall µs/line |");
    console.log("| --- | ---: | ---: |");
    for (let round = 1; round <= 2; round++) {
      await measureServed(
        "one write(2) a line (pino.destination, sync: false)",
        pino.destination({ dest: path.join(dir, `a${round}.log`), sync: false }),
      );
      await measureServed("the gateway's destination (logDestination: lines gathered)", logDestination(path.join(dir, `b${round}.log`)));
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
})();
