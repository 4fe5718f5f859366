import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { LoopHealth } from "../chain/retry-loop";

/** One call as the call path ended it: counted, charged and timed. */
export interface CallObservation {
  /** The skill's slug. */
  skill: string;
  /** The calls log's outcome: success, skill_error, rate_limited, insufficient_balance, ... */
  outcome: string;
  chargedMicros: bigint;
  latencyMs: number;
}

/** One group commit of the ledger: how many operations and waiting responses it made durable, and how long COMMIT (with its fsync) took. */
export interface CommitObservation {
  operations: number;
  waiters: number;
  durationMs: number;
}

export interface MetricsSources {
  /** Holds open in the ledger now (money reserved for calls in flight). */
  openHolds: () => number | Promise<number>;
  /** The money path's loops, when the gateway has a chain. */
  indexer?: () => LoopHealth;
  settler?: () => LoopHealth;
}

/**
 * The gateway's Prometheus metrics, in a registry of its own (several gateways may run in one
 * process, as in the tests; prom-client's global registry would mix them). GET /metrics
 * serves `registry` (server/http/routes/metrics.ts). Names carry their unit last.
 */
export class GatewayMetrics {
  readonly registry = new Registry();
  private readonly calls: Counter<"skill" | "outcome">;
  private readonly charged: Counter<"skill">;
  private readonly callDuration: Histogram<"outcome">;
  private readonly commits: Counter;
  private readonly commitOperations: Histogram;
  private readonly commitWaiters: Histogram;
  private readonly commitDuration: Histogram;
  private readonly requests: Counter<"method" | "route" | "status">;
  private readonly rateLimited: Counter<"route">;

  constructor(sources: MetricsSources, options: { processMetrics?: boolean } = {}) {
    const registers = [this.registry];
    this.calls = new Counter({
      name: "gateway_calls_total",
      help: "Paid-call attempts that reached a skill, by skill slug and outcome (success, skill_error, rate_limited, insufficient_balance, ...).",
      labelNames: ["skill", "outcome"],
      registers,
    });
    this.charged = new Counter({
      name: "gateway_charged_micros_total",
      help: "Money charged to callers for successful calls, in base units (micro-USDC), by skill slug.",
      labelNames: ["skill"],
      registers,
    });
    this.callDuration = new Histogram({
      name: "gateway_call_duration_seconds",
      help: "Time from a call's arrival to its answer being ready (the backend's time included), by outcome.",
      labelNames: ["outcome"],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });
    this.commits = new Counter({ name: "gateway_ledger_commits_total", help: "Group commits of the ledger (one fsync each).", registers });
    this.commitOperations = new Histogram({
      name: "gateway_ledger_commit_operations",
      help: "Ledger operations per group commit (a paid call is two: its hold, then its capture with its calls-log row).",
      buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024],
      registers,
    });
    this.commitWaiters = new Histogram({
      name: "gateway_ledger_commit_waiters",
      help: "Responses waiting on each group commit to be durable: the charged calls (and replays) it released.",
      buckets: [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512],
      registers,
    });
    this.commitDuration = new Histogram({
      name: "gateway_ledger_commit_duration_seconds",
      help: "Time SQLite's COMMIT took, its fsync included.",
      buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
      registers,
    });
    this.requests = new Counter({
      name: "gateway_http_requests_total",
      help: "HTTP requests answered, by method, route pattern and status.",
      labelNames: ["method", "route", "status"],
      registers,
    });
    this.rateLimited = new Counter({
      name: "gateway_rate_limit_refusals_total",
      help: "Requests refused 429 by a rate limit or a capacity bound, by route pattern.",
      labelNames: ["route"],
      registers,
    });
    new Gauge({
      name: "gateway_holds_open",
      help: "Holds open in the ledger (of every replica sharing it): money reserved for calls in flight.",
      registers,
      async collect() {
        this.set(await sources.openHolds());
      },
    });
    const lag = (name: string, loop: string, health: () => LoopHealth) =>
      new Gauge({
        name,
        help: `Seconds since the ${loop}'s last successful step (0 while it does not run in this process).`,
        registers,
        collect() {
          const h = health();
          const since = h.lastSuccessAtMs ?? h.startedAtMs;
          this.set(h.started && since !== undefined ? Math.max(0, Date.now() - since) / 1000 : 0);
        },
      });
    if (sources.indexer) lag("gateway_indexer_lag_seconds", "deposit indexer", sources.indexer);
    if (sources.settler) lag("gateway_settler_lag_seconds", "settler", sources.settler);
    // Node's own (CPU, memory, event-loop delay), under their usual names; each starts a sampler, hence opt-in.
    if (options.processMetrics) collectDefaultMetrics({ register: this.registry });
  }

  observeCall(call: CallObservation): void {
    this.calls.inc({ skill: call.skill, outcome: call.outcome });
    if (call.chargedMicros > 0n) this.charged.inc({ skill: call.skill }, Number(call.chargedMicros));
    this.callDuration.observe({ outcome: call.outcome }, call.latencyMs / 1000);
  }

  observeCommit(commit: CommitObservation): void {
    this.commits.inc();
    this.commitOperations.observe(commit.operations);
    this.commitWaiters.observe(commit.waiters);
    this.commitDuration.observe(commit.durationMs / 1000);
  }

  observeRequest(method: string, route: string, status: number): void {
    this.requests.inc({ method, route, status: String(status) });
    if (status === 429) this.rateLimited.inc({ route });
  }
}
