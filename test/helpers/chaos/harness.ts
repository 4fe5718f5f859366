import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { expect } from "chai";
import { type TestBackend, startTestBackend } from "../backend";
import type { CrashChildOptions } from "../crash-child";
import { type CrashChild, startCrashChild } from "../crash-child-process";
import {
  type ChaosParties,
  availableOf,
  capturedNonces,
  checkAnswers,
  checkBooks,
  checkRetry,
  noncesByCallId,
  openHolds,
  readBooks,
} from "./checks";
import { Rng } from "../random";
import { CHAOS_SKILLS, type SentCall, Traffic, postCall } from "./traffic";

/*
 * The chaos harness: a gateway in its own process on its own ledger file (../crash-child.ts), called by
 * many concurrent clients (some calls with an Idempotency-Key, some without, on fast, slow and failing
 * skills of a real test backend), killed with SIGKILL at a seeded moment, restarted on the same file, and
 * checked; several times per run, each run on a fresh file. After each restart (./checks.ts): the books
 * balance, no hold is left open, every 200 a client heard is a durable capture, the captures nobody heard
 * of are calls that were in flight at the kill, the balance moved by the sum of the captures, and every
 * idempotent call retried with its key replays its stored answer without a second charge, or, if it never
 * completed, runs once.
 *
 * A run draws everything from its seed: how many kills, how many clients, each client's calls, what ends
 * the traffic (a number of answers, or of calls reaching the backend) and a short pause before the kill.
 * The moment itself also depends on the machine's scheduling, so a replayed seed draws the same schedule,
 * not the same interleaving.
 */

export interface ChaosOptions {
  runs: number;
  /** Run i uses seed + i. */
  seed: number;
  /** Each run kills the gateway between 1 and this many times. */
  maxKillsPerRun: number;
  /** Gets the figures line after each run. */
  log: (line: string) => void;
}

export interface ChaosFigures {
  runs: number;
  kills: number;
  /** Calls the clients sent (retries not included). */
  callsSent: number;
  /** 200s the clients heard (retries not included). */
  answered200: number;
  /** Calls captured in the books, all runs together. */
  captures: number;
  /** Captures whose x-call-id no client received. */
  unheardCaptures: number;
  /** Calls still waiting when the gateway was killed. */
  inFlightAtKills: number;
  /** Holds found open after a kill, released by the next start. */
  holdsReleasedAtRestart: number;
  /** Idempotent calls retried after a restart, those answered by a replay, those that ran (their first attempt had not completed). */
  retries: number;
  replays: number;
  /** Replays of a capture whose first answer was lost with the gateway. */
  replaysOfLostCalls: number;
  retriesRanOnce: number;
}

const PARTIES: ChaosParties = { buyerId: "chaos-buyer", sellerId: "chaos-seller", creditMicros: 1_000_000_000n };
/** Calls in flight at once during the retries. */
const RETRY_CONCURRENCY = 8;

/** The replay command for a seed. */
export function chaosReplayCommand(seed: number, runs: number): string {
  return `CHAOS_SEED=${seed} CHAOS_RUNS=${runs} npm run chaos`;
}

export function emptyFigures(): ChaosFigures {
  return {
    runs: 0,
    kills: 0,
    callsSent: 0,
    answered200: 0,
    captures: 0,
    unheardCaptures: 0,
    inFlightAtKills: 0,
    holdsReleasedAtRestart: 0,
    retries: 0,
    replays: 0,
    replaysOfLostCalls: 0,
    retriesRanOnce: 0,
  };
}

export function formatFigures(f: ChaosFigures, seed: number): string {
  return (
    `runs ${f.runs}, kills ${f.kills}, calls sent ${f.callsSent}, 200s ${f.answered200}, captures ${f.captures}, ` +
    `unheard captures ${f.unheardCaptures} (calls in flight at the kills ${f.inFlightAtKills}), holds released at restart ${f.holdsReleasedAtRestart}, ` +
    `idempotent retries ${f.retries} (replays ${f.replays}, of which of a lost answer ${f.replaysOfLostCalls}; ran once ${f.retriesRanOnce}), seed ${seed}`
  );
}

/** Runs `options.runs` chaos runs against one test backend; throws, naming the run's seed, on the first failed check. */
export async function runChaos(options: ChaosOptions): Promise<ChaosFigures> {
  const totals = emptyFigures();
  const backend = await startTestBackend();
  try {
    for (let run = 0; run < options.runs; run++) {
      const runSeed = (options.seed + run) >>> 0;
      try {
        await chaosRun(run, runSeed, backend, options.maxKillsPerRun, totals);
      } catch (error) {
        const message = error instanceof Error ? error.message : String(error);
        throw new Error(`chaos run ${run + 1} failed; replay it alone with: ${chaosReplayCommand(runSeed, 1)}\n${message}`, {
          cause: error,
        });
      }
      totals.runs++;
      options.log(`[chaos] ${formatFigures(totals, options.seed)}`);
    }
  } finally {
    await backend.close();
  }
  return totals;
}

async function chaosRun(run: number, runSeed: number, backend: TestBackend, maxKills: number, totals: ChaosFigures): Promise<void> {
  const random = new Rng(runSeed);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "skill-gw-chaos-"));
  const dbPath = path.join(dir, "gateway.db");
  const childOptions: CrashChildOptions = {
    dbPath,
    // The default 100 calls per minute per key would answer most of the load 429. Keyed calls' ledger writes run on
    // the event loop in runs of even seed, on the ledger writer thread in the others: `npm test`'s runs see both.
    env: { RATE_LIMIT_PER_MIN: "10000000", SQLITE_LEDGER_WRITER: runSeed % 2 === 0 ? "loop" : "thread" },
    buyer: { id: PARTIES.buyerId, creditMicros: String(PARTIES.creditMicros) },
    sellerId: PARTIES.sellerId,
    skills: CHAOS_SKILLS.map((s) => ({
      slug: s.slug,
      backendUrl: backend.url + s.backendPath,
      priceMicros: String(s.priceMicros),
      timeoutMs: 10_000,
    })),
  };
  const calls: SentCall[] = [];
  let gateway = await startCrashChild(childOptions);
  try {
    const kills = random.int(1, maxKills);
    for (let cycle = 0; cycle < kills; cycle++) {
      // Load, then the kill at a seeded moment.
      const traffic = new Traffic(gateway.url, gateway.key, run, cycle, random.int(0, 2 ** 31), random.int(2, 16));
      // Killed once enough calls were answered (often between a capture and its answer), or once enough reached
      // the backend (often with holds open, waiting on the slow skill).
      const trigger = random.weighted([
        ["answers", 1],
        ["arrivals", 1],
      ] as const);
      const count = random.int(1, 150);
      const pauseMs = random.weighted([
        [0, 3],
        [random.int(1, 25), 2],
      ] as const);
      const arrivalsBefore = backend.received.length;
      while (trigger === "answers" ? traffic.answered < count : backend.received.length - arrivalsBefore < count) {
        if (gateway.child.exitCode !== null || gateway.child.signalCode !== null) throw new Error("the gateway died by itself under load");
        await sleep(1);
      }
      if (pauseMs > 0) await sleep(pauseMs);
      const inFlight = traffic.halt();
      await gateway.kill();
      await traffic.settled();
      calls.push(...traffic.calls);
      totals.kills++;
      totals.callsSent += traffic.calls.length;
      totals.answered200 += traffic.calls.filter((c) => c.response?.status === 200).length;
      totals.inFlightAtKills += inFlight.length;
      checkAnswers(traffic.calls);

      // Restart on the same file: its recovery releases exactly the holds the kill left open.
      const openAtKill = await readBooks(dbPath, openHolds);
      gateway = await startCrashChild(childOptions);
      expect(gateway.recovered.holds, "holds the restart released").to.equal(openAtKill);
      totals.holdsReleasedAtRestart += openAtKill;
      await readBooks(dbPath, (db) => checkBooks(db, PARTIES, calls, noncesByCallId(backend.received)));

      await retryIdempotentCalls(gateway, dbPath, backend, traffic.calls, calls, totals);
    }
    const books = await readBooks(dbPath, (db) => checkBooks(db, PARTIES, calls, noncesByCallId(backend.received)));
    totals.captures += books.captures;
    totals.unheardCaptures += books.unheardCaptures;
  } finally {
    await gateway.stop();
  }
  // Closed cleanly at last: the file still passes every check.
  await readBooks(dbPath, (db) => checkBooks(db, PARTIES, calls, noncesByCallId(backend.received)));
  fs.rmSync(dir, { recursive: true, force: true });
}

/**
 * Sends each idempotent call of the last cycle again (same key, same bytes) to the restarted gateway and
 * checks its answer (checkRetry); the balance moves by exactly the price of the retries that ran and
 * succeeded, not at all for a replay.
 */
async function retryIdempotentCalls(
  gateway: CrashChild,
  dbPath: string,
  backend: TestBackend,
  cycleCalls: SentCall[],
  calls: SentCall[],
  totals: ChaosFigures,
): Promise<void> {
  const idempotent = cycleCalls.filter((c) => c.idempotencyKey !== undefined);
  const { captured, availableBefore } = await readBooks(dbPath, async (db) => ({
    captured: await capturedNonces(db, noncesByCallId(backend.received)),
    availableBefore: await availableOf(db, PARTIES.buyerId),
  }));
  for (let i = 0; i < idempotent.length; i += RETRY_CONCURRENCY) {
    await Promise.all(
      idempotent.slice(i, i + RETRY_CONCURRENCY).map(async (call) => {
        call.retry = await postCall(gateway.url, gateway.key, call);
      }),
    );
  }
  let chargedMicros = 0n;
  for (const call of idempotent) {
    const outcome = checkRetry(call, captured);
    totals.retries++;
    if (outcome === "replayed_answer" || outcome === "replayed_lost") totals.replays++;
    if (outcome === "replayed_lost") totals.replaysOfLostCalls++;
    if (outcome === "ran_once") totals.retriesRanOnce++;
    if ((outcome === "ran_once" || outcome === "ran_again") && call.retry!.status === 200) chargedMicros += call.skill.priceMicros;
  }
  // A failed call is answered before its release is on disk (a release rides along with the next commit:
  // losing it in a crash is harmless), so the books settle a moment after the last answer: wait for them.
  while ((await readBooks(dbPath, openHolds)) > 0) await sleep(5);
  const availableAfter = await readBooks(dbPath, async (db) => {
    await checkBooks(db, PARTIES, calls, noncesByCallId(backend.received));
    return availableOf(db, PARTIES.buyerId);
  });
  expect(availableBefore - availableAfter, "what the retries charged: the price of those that ran, nothing for a replay").to.equal(
    chargedMicros,
  );
}
