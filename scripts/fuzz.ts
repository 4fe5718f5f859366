/**
 * The fuzz harness of issue 10 at full size (`npm run fuzz`): a seeded generator of hostile
 * requests against a real gateway on loopback (test/fuzz/). It prints the figures of the
 * run and every violation with the command that replays it; it exits 1 on any violation.
 *
 *   FUZZ_REQUESTS (default 10000)  cases to run; each is one to a few HTTP requests
 *   FUZZ_SEED                      replay a run (random by default, printed either way)
 *   FUZZ_CASE                      only these case indexes, comma-separated (a replay)
 *   FUZZ_CONCURRENCY (default 8)   cases in flight at once
 */
import { runFuzz } from "../test/fuzz/harness";
import { failed, formatReport, formatViolations } from "../test/fuzz/report";
import { randomSeed } from "../test/helpers/random";

function positiveInt(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return fallback;
  if (!/^\d+$/.test(raw) || Number(raw) < 1) throw new Error(`${name} must be a positive integer, got "${raw}"`);
  return Number(raw);
}

async function main(): Promise<void> {
  const seed = positiveInt("FUZZ_SEED", randomSeed());
  const cases = positiveInt("FUZZ_REQUESTS", 10_000);
  const only = process.env.FUZZ_CASE ? process.env.FUZZ_CASE.split(",").map((s) => Number(s.trim())) : undefined;
  console.log(`fuzzing with FUZZ_SEED=${seed}${only ? ` FUZZ_CASE=${only.join(",")}` : ` FUZZ_REQUESTS=${cases}`}`);
  const report = await runFuzz({ seed, cases, only, concurrency: positiveInt("FUZZ_CONCURRENCY", 8) });
  console.log(formatReport(report));
  if (failed(report)) {
    console.log(`\nFAILED (seed ${seed}):\n${formatViolations(report)}`);
    process.exitCode = 1;
  } else {
    console.log(`\npassed (seed ${seed})`);
  }
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
