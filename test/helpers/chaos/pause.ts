import { setTimeout as sleep } from "node:timers/promises";
import { expect } from "chai";
import { SkillRegistry } from "../../../server/catalog/skills";
import { SkillsStore } from "../../../server/catalog/skills-store";
import { type Cluster, startCluster } from "../../../server/devstack/cluster";
import { PostgresDatabase } from "../../../server/db/postgres/database";
import { createPostgresPool } from "../../../server/db/postgres/pool";
import { ApiKeys } from "../../../server/identity/api-keys";
import { Ledger } from "../../../server/ledger/ledger";
import { type TestBackend, startTestBackend } from "../backend";
import { type Frozen, freezePostgres, freezeRedis } from "../freeze";
import { Rng } from "../random";
import {
  type ChaosParties,
  availableOf,
  capturedNonces,
  checkBooks,
  checkRetry,
  keysInProgress,
  noncesByCallId,
  openHolds,
} from "./checks";
import { LATENCY_BOUND_MS, PAUSE_CODES, type PauseAnswers, type PauseTarget, checkPauseAnswers, firstRecovered } from "./pause-checks";
import { CHAOS_SKILLS, type SentCall, Traffic, postCall } from "./traffic";

/*
 * The pause harness: a cluster (server/devstack/cluster.ts: gateway replicas sharing one PostgreSQL and one Redis)
 * under concurrent paid calls, whose PostgreSQL, then whose Redis, is frozen (SIGSTOP, ../freeze.ts) for `pauseMs`
 * and thawed (SIGCONT). A frozen server keeps its sockets open and answers nothing: the failure that leaves a
 * client waiting, where a crash would refuse it at once. Asserted for each:
 * - every call is answered, none later than LATENCY_BOUND_MS after it was sent (no request hangs);
 * - every answer is the skill's (200, or the failing skill's 502) or a clear 503 in the spec's envelope with the
 *   code of what was frozen (database_unavailable, limits_unavailable), saying nothing internal; every call sent
 *   and answered while the server was frozen got that 503;
 * - every replica serves 200s again within RECOVERY_BOUND_MS of the thaw (measured, and printed);
 * - then the checks of the crash harness (./checks.ts), on the shared database: the books balance, no hold is open
 *   and no idempotency key in progress, every 200 heard is a durable capture, a capture nobody heard of is a call
 *   answered `charge_unknown`, no call is captured twice, the balance moved by exactly the captures; and every
 *   idempotent call retried with its key replays its stored answer without a second charge, or runs once.
 */

/** Every replica answers 200 again within this of the thaw. */
export const RECOVERY_BOUND_MS = 5_000;
/** A client gives a call up after this (it then counts as lost, a failure): far past the bound, to see a hang as one. */
const CLIENT_TIMEOUT_MS = 30_000;
/** Every replica's ledger and Redis are ready (GET /readyz) again within this of the thaw. */
const READY_BOUND_MS = 30_000;
/** Holds open and keys in progress must be gone within this of the last answer. */
const SETTLE_BOUND_MS = 15_000;
/** Calls in flight at once during the retries. */
const RETRY_CONCURRENCY = 8;

export interface PauseChaosOptions {
  /** The run's seed: the clients, their calls, the warm-up. */
  seed: number;
  pauseMs: number;
  replicas: number;
  targets: readonly PauseTarget[];
  /** Gets the figures line after each pause. */
  log: (line: string) => void;
}

export interface PauseFigures extends PauseAnswers {
  target: PauseTarget;
  pauseMs: number;
  clients: number;
  callsSent: number;
  /** From the thaw to the first 200 of a call sent after it, on the first replica to recover and on the last. */
  firstRecoveryMs: number;
  recoveryMs: number;
  /** From the thaw until every replica's GET /readyz said its ledger commits and its Redis answers again. */
  readyMs: number;
  /** From the last answer until no hold was open and no key in progress. */
  settledMs: number;
  captures: number;
  unheardCaptures: number;
  retries: number;
  replays: number;
  replaysOfUnknownCharges: number;
  retriesRanOnce: number;
}

export function formatPauseFigures(f: PauseFigures, seed: number): string {
  const answers = Object.entries(f.answers)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, n]) => `${k}: ${n}`)
    .join(", ");
  const s = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
  return (
    `${f.target} frozen ${s(f.pauseMs)} under ${f.clients} clients: calls ${f.callsSent} (${answers}; charge_unknown ${f.chargeUnknown}), ` +
    `during the pause ${f.duringPause} all ${PAUSE_CODES[f.target]} (slowest ${s(f.duringPauseLatencyMaxMs)}), slowest call ${s(f.latencyMaxMs)} ` +
    `(bound ${s(LATENCY_BOUND_MS)}); 200s again ${s(f.firstRecoveryMs)} after SIGCONT, on every replica ${s(f.recoveryMs)}, ` +
    `ledger and Redis ready on every replica ${s(f.readyMs)}; ` +
    `no hold open nor key in progress ${s(f.settledMs)} after the last answer; captures ${f.captures} (retries included), unheard ${f.unheardCaptures}; ` +
    `idempotent retries ${f.retries} (replays ${f.replays}, of a charge_unknown ${f.replaysOfUnknownCharges}; ran once ${f.retriesRanOnce}), seed ${seed}`
  );
}

const PARTIES: ChaosParties = { buyerId: "pause-buyer", sellerId: "pause-seller", creditMicros: 1_000_000_000n };

/** Starts a cluster of `options.replicas`, freezes each target in turn under load, and checks each (see above). */
export async function runPauseChaos(options: PauseChaosOptions): Promise<PauseFigures[]> {
  const backend = await startTestBackend();
  let cluster: Cluster | undefined;
  let db: PostgresDatabase | undefined;
  let registry: SkillRegistry | undefined;
  try {
    cluster = await startCluster({
      replicas: options.replicas,
      settings: {
        SKILL_BACKEND_ALLOWLIST: backend.url,
        // The default 100 calls a minute per key would answer most of the load 429.
        RATE_LIMIT_PER_MIN: "10000000",
      },
    });
    // The harness's own look at the shared database: unwatched, it waits out a freeze (it reads only after the thaw).
    db = new PostgresDatabase(createPostgresPool({ url: cluster.postgres.url, applicationName: "pause-chaos", max: 4 }));
    const ledger = await Ledger.open(db);
    await ledger.ensureAccount({ id: PARTIES.buyerId, kind: "user", name: PARTIES.buyerId });
    await ledger.ensureAccount({ id: PARTIES.sellerId, kind: "seller", name: PARTIES.sellerId });
    await ledger.credit(PARTIES.buyerId, PARTIES.creditMicros, "dev_credit", "pause chaos");
    const { key } = await new ApiKeys(db, 0).create(PARTIES.buyerId, { name: "pause chaos", rateLimitPerMin: 10_000_000 });
    registry = await SkillRegistry.open(new SkillsStore(db), { pollMs: 0 });
    for (const s of CHAOS_SKILLS) {
      await registry.upsert({
        slug: s.slug,
        name: s.slug,
        priceMicros: s.priceMicros,
        sellerAccountId: PARTIES.sellerId,
        backendUrl: backend.url + s.backendPath,
        timeoutMs: 10_000,
      });
    }
    // Every replica lists the skills (a catalogue poll: 2 s), and the leader has indexed the demo deposit, so that
    // the cluster is at rest before the first freeze.
    await until("every replica to list the skills", 30_000, async () => {
      const listed = await Promise.all(
        cluster!.replicas.map(async (r) => (await fetch(`${r.url}/v1/skills/${CHAOS_SKILLS[0].slug}`)).status),
      );
      return listed.every((status) => status === 200);
    });
    await until("the demo deposit to be indexed", 60_000, async () => (await ledger.balance(cluster!.buyerId)).availableMicros > 0n);

    const calls: SentCall[] = [];
    const figures: PauseFigures[] = [];
    const before = { captures: 0, unheardCaptures: 0 };
    for (const [run, target] of options.targets.entries()) {
      const f = await pauseRun(run, target, options, cluster, db, backend, key, calls);
      // The books count every run's captures, the retries' included: this run's are the difference.
      const after = { captures: f.captures, unheardCaptures: f.unheardCaptures };
      f.captures -= before.captures;
      f.unheardCaptures -= before.unheardCaptures;
      Object.assign(before, after);
      figures.push(f);
      options.log(`[chaos pause] ${formatPauseFigures(f, options.seed)}`);
    }
    return figures;
  } catch (error) {
    // What the replicas said that went wrong (their error lines): the failure's other half.
    for (const replica of cluster?.replicas ?? []) {
      const errors = replica
        .output()
        .split("\n")
        .filter(
          (line) => /"level":(50|60)/.test(line) && !/database_unavailable|limits_unavailable|did not answer|Command timed out/.test(line),
        );
      if (errors.length > 0) options.log(`[chaos pause] ${replica.id}'s last errors:\n${errors.slice(-5).join("\n")}`);
    }
    throw error;
  } finally {
    await registry?.close();
    await db?.close();
    await cluster?.stop();
    await backend.close();
  }
}

async function pauseRun(
  run: number,
  target: PauseTarget,
  options: PauseChaosOptions,
  cluster: Cluster,
  db: PostgresDatabase,
  backend: TestBackend,
  key: string,
  calls: SentCall[],
): Promise<PauseFigures> {
  const random = new Rng((options.seed + run) >>> 0);
  const clients = random.int(6, 12);
  const urls = cluster.replicas.map((r) => r.url);
  const traffic = new Traffic(urls, key, run, 0, random.int(0, 2 ** 31), clients, CLIENT_TIMEOUT_MS);
  let frozen: Frozen | undefined;
  let pausedAtMs = 0;
  let thawedAtMs = 0;
  try {
    const warmUp = random.int(20, 80);
    await until(`${warmUp} answers before the freeze`, 60_000, async () => traffic.answered >= warmUp);
    frozen = target === "postgres" ? freezePostgres(cluster.postgres) : await freezeRedis(cluster.redis);
    pausedAtMs = Date.now();
    await sleep(options.pauseMs);
    thawedAtMs = Date.now();
    frozen.thaw();
    // Every replica serves a 200 to a call sent after the thaw; then a little more load, to see it last.
    await until("every replica to answer 200 again", RECOVERY_BOUND_MS + 10_000, async () =>
      urls.every((url) => firstRecovered(traffic.calls, url, thawedAtMs) !== undefined),
    );
    await sleep(3_000);
  } finally {
    frozen?.thaw();
    traffic.stop();
    await traffic.settled();
  }
  calls.push(...traffic.calls);
  const lastAnswerMs = Math.max(...traffic.calls.map((c) => c.answeredAtMs!));

  const answered = checkPauseAnswers(traffic.calls, target, pausedAtMs, thawedAtMs);
  const recoveries = urls.map((url) => firstRecovered(traffic.calls, url, thawedAtMs)!.answeredAtMs! - thawedAtMs);
  const recoveryMs = Math.max(...recoveries);
  expect(recoveryMs, `every replica answers 200 again within ${RECOVERY_BOUND_MS} ms of the thaw`).to.be.at.most(RECOVERY_BOUND_MS);

  // Readiness comes back too, for what was frozen: every replica's ledger commits and its Redis answers (GET /readyz's
  // `ledger` and `redis` checks). The money path's loops are not asked: they are the leader's, not the pause's.
  let unready: string[] = [];
  await until(
    () => `every replica's ledger and Redis to be ready again (${unready.join("; ")})`,
    READY_BOUND_MS,
    async () => {
      const answers = await Promise.all(
        urls.map(async (url) => {
          const body = await (await fetch(`${url}/readyz`)).text();
          const parsed = JSON.parse(body) as { data?: { checks?: ReadyChecks }; checks?: ReadyChecks };
          const checks = parsed.data?.checks ?? parsed.checks;
          return { url, body, ready: checks?.ledger?.ok === true && checks.redis?.ok === true };
        }),
      );
      unready = answers.filter((a) => !a.ready).map((a) => `${a.url}: ${a.body.slice(0, 500)}`);
      return unready.length === 0;
    },
    // Well inside the per-address budget of the health probes (HEALTH_RATE_LIMIT_PER_MIN, 1,200), shared by the replicas.
    250,
  );
  const readyMs = Date.now() - thawedAtMs;

  // The releases the database did not take are done once it answers: wait for them, bounded.
  await until(
    "no hold open and no idempotency key in progress",
    SETTLE_BOUND_MS,
    async () => (await openHolds(db)) + (await keysInProgress(db)) === 0,
  );
  const settledMs = Math.max(0, Date.now() - lastAnswerMs);
  await checkBooks(db, PARTIES, calls, noncesByCallId(backend.received));
  const retried = await retryIdempotentCalls(db, backend, key, traffic.calls, calls);

  return {
    target,
    pauseMs: thawedAtMs - pausedAtMs,
    clients,
    callsSent: traffic.calls.length,
    ...answered,
    firstRecoveryMs: Math.min(...recoveries),
    recoveryMs,
    readyMs,
    settledMs,
    ...retried,
  };
}

/** GET /readyz's checks, in its 200 (`data.checks`) or its 503 (`checks`). */
type ReadyChecks = Record<string, { ok: boolean; detail: string } | undefined>;

/**
 * Sends each idempotent call of the run again (same key, same bytes, same replica) and checks its answer (checkRetry):
 * the balance moves by exactly the price of the retries that ran and succeeded, not at all for a replay.
 */
async function retryIdempotentCalls(
  db: PostgresDatabase,
  backend: TestBackend,
  key: string,
  runCalls: SentCall[],
  calls: SentCall[],
): Promise<Pick<PauseFigures, "retries" | "replays" | "replaysOfUnknownCharges" | "retriesRanOnce" | "captures" | "unheardCaptures">> {
  const idempotent = runCalls.filter((c) => c.idempotencyKey !== undefined);
  const captured = await capturedNonces(db, noncesByCallId(backend.received));
  const availableBefore = await availableOf(db, PARTIES.buyerId);
  for (let i = 0; i < idempotent.length; i += RETRY_CONCURRENCY) {
    await Promise.all(
      idempotent.slice(i, i + RETRY_CONCURRENCY).map(async (call) => {
        call.retry = await postCall(call.gatewayUrl, key, call, CLIENT_TIMEOUT_MS);
      }),
    );
  }
  const figures = { retries: 0, replays: 0, replaysOfUnknownCharges: 0, retriesRanOnce: 0 };
  let chargedMicros = 0n;
  for (const call of idempotent) {
    const outcome = checkRetry(call, captured);
    figures.retries++;
    if (outcome === "replayed_answer" || outcome === "replayed_lost") figures.replays++;
    if (outcome === "replayed_lost") figures.replaysOfUnknownCharges++;
    if (outcome === "ran_once") figures.retriesRanOnce++;
    if ((outcome === "ran_once" || outcome === "ran_again") && call.retry!.status === 200) chargedMicros += call.skill.priceMicros;
  }
  await until("the retries' holds to close", SETTLE_BOUND_MS, async () => (await openHolds(db)) === 0);
  const books = await checkBooks(db, PARTIES, calls, noncesByCallId(backend.received));
  const availableAfter = await availableOf(db, PARTIES.buyerId);
  expect(availableBefore - availableAfter, "what the retries charged: the price of those that ran, nothing for a replay").to.equal(
    chargedMicros,
  );
  return { ...figures, captures: books.captures, unheardCaptures: books.unheardCaptures };
}

async function until(
  what: string | (() => string),
  timeoutMs: number,
  check: () => boolean | Promise<boolean>,
  pollMs = 25,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${typeof what === "string" ? what : what()}`);
    await sleep(pollMs);
  }
}
