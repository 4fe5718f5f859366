import { expect } from "chai";
import { runChaos } from "../helpers/chaos/harness";

/*
 * The chaos harness (test/helpers/chaos/harness.ts): a gateway process killed with SIGKILL at seeded
 * moments under concurrent load, restarted on the same ledger file, and checked after every restart.
 *
 * `npm test` runs a few runs. `npm run chaos` runs this same file with CHAOS_RUNS (default 20). The seed is
 * random unless CHAOS_SEED is set; it is printed in the title and in the figures, and a failure prints the
 * command that replays its run alone (CHAOS_SEED=<run seed> CHAOS_RUNS=1 npm run chaos).
 */

function envInteger(name: string): number | undefined {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return undefined;
  if (!/^\d+$/.test(raw)) throw new Error(`${name} must be a non-negative integer, got "${raw}"`);
  return Number(raw);
}

const seed = envInteger("CHAOS_SEED") ?? Math.floor(Math.random() * 2 ** 31);
const requestedRuns = envInteger("CHAOS_RUNS");
const runs = requestedRuns ?? 3;
// Every kill costs a start of the gateway process (a few seconds): npm test kills once per run.
const maxKillsPerRun = requestedRuns === undefined ? 1 : 3;

describe("a gateway killed at random moments under load", () => {
  it(`keeps every charge it answered, charges no call twice and keeps its books balanced (${runs} runs, seed ${seed})`, async function () {
    // Each run starts the gateway process once per kill, plus once; a long run asked for takes its time.
    this.timeout(requestedRuns === undefined ? 120_000 : 0);
    const figures = await runChaos({ runs, seed, maxKillsPerRun, log: (line) => console.log(line) });
    expect(figures.runs).to.equal(runs);
    expect(figures.kills).to.be.at.least(runs);
    expect(figures.answered200).to.be.greaterThan(0);
  });
});
