import { expect } from "chai";
import { runFuzz } from "./harness";
import { failed, formatReport, formatViolations, replayCommand } from "./report";
import { randomSeed } from "../helpers/random";

/*
 * The fuzz harness in `npm test`: a thousand seeded hostile requests (a new seed every run) against a real
 * gateway (./generator.ts says what they are, ./checks.ts what every answer must be). The
 * seed is random unless FUZZ_SEED is set, and is printed in the title and with any failure;
 * FUZZ_SEED=<seed> FUZZ_CASE=<index> replays one case. `npm run fuzz` runs 10,000 or more.
 *
 * Nothing here is timed but the clear signature of a hang: a request with no answer after
 * 30 s. The event loop's longest stall is printed, not asserted.
 */
const seed = process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : randomSeed();
const cases = process.env.FUZZ_TEST_REQUESTS ? Number(process.env.FUZZ_TEST_REQUESTS) : 1_000;
const only = process.env.FUZZ_CASE ? process.env.FUZZ_CASE.split(",").map(Number) : undefined;

describe("fuzzing the gateway with hostile requests", () => {
  it(`answers ${only ? `cases ${only.join(",")}` : cases} of seed ${seed} with no 5xx but a backend's 502, no charge but for a 200, and no hang`, async function () {
    // The per-request deadline (30 s) finds a hang; this only stops a stuck run.
    this.timeout(600_000);
    const report = await runFuzz({ seed, cases, only });
    console.log(formatReport(report).replace(/^/gm, "      "));
    if (failed(report))
      expect.fail(`the fuzz run of seed ${seed} broke the rules (${replayCommand(seed)} runs it again):\n${formatViolations(report)}`);
  });
});
