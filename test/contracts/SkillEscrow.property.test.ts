import { loadFixture } from "@nomicfoundation/hardhat-network-helpers";
import { expect } from "chai";
import fc from "fast-check";
import { USDC, deployEscrowFixture } from "./helpers/fixtures";
import { commandArbitraries, outcomeCounts } from "./helpers/commands";
import { checkInvariants, setUp } from "./helpers/model";

/**
 * Seeded property test: random sequences of deposits, settlements (some overdrawing, some replayed), x402
 * payments collected from the payers' wallets (some replayed, expired, with a fee above the value or under a call
 * id already pending) and later completed, refunded or reclaimed (some too early, with altered fields or already
 * ended), claims, vouchers (some expired, forged, reused or too large), exit requests, completions,
 * cancellations and clock jumps. After every step the contract must match the model exactly, hold exactly the
 * sum of balances plus unclaimed earnings plus pending x402 payments, and no user may have taken out more than
 * deposited minus spent.
 *
 * Deterministic by default. Replay a failure with the seed, path and replayPath it prints:
 *   FC_SEED=<seed> FC_PATH=<path> FC_REPLAY_PATH=<replayPath> npx hardhat test test/contracts/SkillEscrow.property.test.ts
 * Explore further with e.g. FC_SEED=$RANDOM FC_RUNS=300.
 */
const SEED = Number(process.env.FC_SEED ?? 20_250_101);
const RUNS = Number(process.env.FC_RUNS ?? 50);
const PATH = process.env.FC_PATH;
/** fc.commands needs its own replay path (the `replayPath` fast-check prints beside the counterexample). */
const REPLAY_PATH = process.env.FC_REPLAY_PATH;
const MAX_STEPS = 50;

/** The paths the default run must take at least once; checked so the generators cannot silently degrade. */
const REQUIRED_OUTCOMES = [
  "deposit:ok",
  "deposit:EscrowDepositBelowMinimum",
  "settle:ok",
  "settle:EscrowInsufficientBalance",
  "settle:EscrowBatchOutOfOrder",
  "x402Collect:ok",
  "x402Collect:ERC3009UsedAuthorization",
  "x402Collect:ERC3009InvalidAuthorizationTime",
  "x402Collect:EscrowFeeExceedsAmount",
  "x402Collect:EscrowX402PaymentExists",
  "x402Complete:ok",
  "x402Complete:late",
  "x402Complete:EscrowX402PaymentNotPending",
  "x402Refund:ok",
  "x402Refund:EscrowX402PaymentNotPending",
  "x402Reclaim:ok",
  "x402Reclaim:EscrowX402NotReclaimable",
  "x402Reclaim:EscrowX402PaymentNotPending",
  "claim:ok",
  "claim:EscrowNothingToClaim",
  "voucher:ok",
  "voucher:EscrowInsufficientBalance",
  "voucher:EscrowVoucherNonceUsed",
  "voucher:EscrowVoucherExpired",
  "voucher:EscrowInvalidVoucherSigner",
  "requestExit:ok",
  "requestExit:EscrowInsufficientBalance",
  "completeExit:ok",
  "completeExit:paid-less",
  "completeExit:EscrowExitNotReady",
  "completeExit:EscrowNoPendingExit",
  "cancelExit:ok",
];

/** Three users who start with 25 USDC escrowed each, so most generated operations have money to act on. */
async function propertyFixture() {
  const fixture = await deployEscrowFixture();
  const users = fixture.users.slice(0, 3);
  for (const user of users) await (await fixture.escrowAs(user)).write.deposit([25n * USDC]);
  return { ...fixture, users };
}

describe("SkillEscrow properties", function () {
  this.timeout(10 * 60_000);

  it("conserves money and never pays an account more than it is owed, over random operation sequences", async () => {
    const fixture = await loadFixture(propertyFixture);
    const arbitraries = commandArbitraries(fixture.users.length, fixture.sellers.length);
    const commands = fc.commands(arbitraries, {
      maxCommands: MAX_STEPS,
      size: "max",
      ...(REPLAY_PATH ? { replayPath: REPLAY_PATH } : {}),
    });
    const property = fc.asyncProperty(commands, async (sequence) => {
      const { model, real } = await setUp(await loadFixture(propertyFixture));
      await checkInvariants(model, real);
      await fc.asyncModelRun(() => ({ model, real }), sequence);
    });
    outcomeCounts.clear();
    try {
      await fc.assert(property, {
        seed: SEED,
        numRuns: RUNS,
        includeErrorInReport: true,
        ...(PATH ? { path: PATH, endOnFailure: true } : {}),
      });
    } catch (error) {
      // fast-check's message carries the shrunk counterexample and its { seed, path }; say how to replay it.
      const message = error instanceof Error ? error.message : String(error);
      throw new Error(`property failed; replay with FC_SEED=${SEED} FC_PATH=<path> FC_REPLAY_PATH=<replayPath> (both below)\n${message}`);
    }
    if (!process.env.FC_SEED && !process.env.FC_RUNS && !PATH) {
      const missing = REQUIRED_OUTCOMES.filter((outcome) => !outcomeCounts.has(outcome));
      expect(missing, `outcomes never reached (seed ${SEED}): ${[...outcomeCounts].join(", ")}`).to.deep.equal([]);
    }
    if (process.env.FC_VERBOSE) console.log(Object.fromEntries([...outcomeCounts].sort()));
  });
});
