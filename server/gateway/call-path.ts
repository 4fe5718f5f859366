import type { Config } from "../config";
import type { Database } from "../db/sql";
import type { HousekeepingTask } from "../housekeeping";
import type { Ledger } from "../ledger/ledger";
import type { SkillRegistry } from "../catalog/skills";
import { CallService } from "./call-service";
import { CallsStore } from "./calls-store";
import type { HoldBook } from "./ledger-payment";
import { EgressPolicy, type HostResolver } from "./egress";
import { Forwarder } from "./forward";
import type { IdempotencyKeys } from "./idempotency";
import type { CallAnswers } from "./call-result";
import { CallPipeline, type PipelineDeps } from "./pipeline";
import { QualityRecorder } from "./quality-recorder";
import { QualityStore } from "./quality-store";
import { type CallDailyCap, type CallLimiter, DailyCap, RateLimiter } from "./rate-limit";
import { RefusalCounter } from "./refusal-counter";
import { RefusalsStore } from "./refusals-store";

/** How often idempotency keys past IDEMPOTENCY_TTL are deleted. */
export const IDEMPOTENCY_PURGE_INTERVAL_MS = 3_600_000;

/** The settings the call path reads: the fee, the default limits, the largest backend answer. */
export type CallPathConfig = Pick<
  Config,
  "feeMode" | "feeBps" | "rateLimitPerMin" | "dailyCallCap" | "maxResponseBytes" | "skillBackendAllowlist" | "skillBackendPorts"
>;

/** A call the pipeline finished, as its onCall hears it. */
export type FinishedCall = Parameters<NonNullable<PipelineDeps["onCall"]>>[0];

export interface CallPathParts {
  /** The database of the books (the calls log and idempotency keys are written in the payments' transactions). */
  db: Database;
  ledger: Ledger;
  /** Where keyed calls' holds are written: the SQLite ledger writer's thread, or (by default) the ledger's connection. */
  holds?: HoldBook;
  skills: SkillRegistry;
  /** Opened with the books, so that startup recovery could release the keys a crash left in progress. */
  idempotency: IdempotencyKeys;
  /** Which backends may be called; by default the policy of the config (SKILL_BACKEND_ALLOWLIST, SKILL_BACKEND_PORTS). */
  egress?: EgressPolicy;
  /** Resolves backends' host names for the default policy; the system resolver by default. */
  resolveHost?: HostResolver;
  /** The HTTP layer's rendering of answers. */
  answers: CallAnswers;
  /** Every replica's limits (Redis); this process's own when absent. */
  sharedLimits?: { limiter: CallLimiter; dailyCap: CallDailyCap };
  /** Told about every finished call, after the skills' quality roll-up counted it (metrics, the request's log line). */
  onCall?: (call: FinishedCall) => void;
  log: (message: string, error?: unknown) => void;
  /** The clock keys' spending periods are read by; Date.now by default. */
  now?: () => number;
}

/** The call path's services: the pipeline every way to pay runs, the keyed calls on it, and what calls are counted in. */
export interface CallPath {
  /** The calls log. */
  calls: CallsStore;
  /** Which skill backends may be listed and called (a listing checks it too, for a clear 400). */
  egress: EgressPolicy;
  /** The counts of calls a key's own limits refused. */
  refusals: RefusalCounter;
  /** The skills' quality roll-up: counted per call, flushed to skill_quality. */
  quality: QualityRecorder;
  idempotency: IdempotencyKeys;
  pipeline: CallPipeline;
  /** Calls made with an API key. */
  callService: CallService;
  /** Its timers: purging expired idempotency keys. */
  housekeeping: HousekeepingTask[];
  /** Closes the backends' connection pools and writes the counters it still holds. */
  close(): Promise<void>;
}

/** The call path on the books: limits (this process's or shared), forwarding under `egress`, the pipeline. */
export function createCallPath(config: CallPathConfig, parts: CallPathParts): CallPath {
  const { db, log } = parts;
  const calls = new CallsStore(db);
  const limiter = parts.sharedLimits?.limiter ?? new RateLimiter();
  const dailyCap = parts.sharedLimits?.dailyCap ?? new DailyCap((accountId, sinceMs) => calls.countSince(accountId, sinceMs));
  const egress =
    parts.egress ??
    new EgressPolicy({ allowlist: config.skillBackendAllowlist, allowedPorts: config.skillBackendPorts }, parts.resolveHost);
  const forwarder = new Forwarder({ maxResponseBytes: config.maxResponseBytes, egress });
  const refusals = new RefusalCounter(new RefusalsStore(db), { log });
  const quality = new QualityRecorder(new QualityStore(db), { log });
  const pipeline = new CallPipeline({
    config,
    db,
    refusals,
    skills: parts.skills,
    calls,
    idempotency: parts.idempotency,
    limiter,
    dailyCap,
    forwarder,
    answers: parts.answers,
    onCall: (call) => {
      quality.count({
        skillId: call.skillId,
        result: call.code ?? "success",
        latencyMs: call.latencyMs,
        chargedMicros: call.chargedMicros,
      });
      parts.onCall?.(call);
    },
  });
  const callService = new CallService({ config, ledger: parts.ledger, holds: parts.holds, pipeline, now: parts.now });
  return {
    calls,
    egress,
    refusals,
    quality,
    idempotency: parts.idempotency,
    pipeline,
    callService,
    housekeeping: [
      { name: "purging expired idempotency keys", everyMs: IDEMPOTENCY_PURGE_INTERVAL_MS, run: () => parts.idempotency.purgeExpired() },
    ],
    async close() {
      await forwarder.close();
      await refusals.close();
      await quality.close();
    },
  };
}
