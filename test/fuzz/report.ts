import type { Category, FetchRequest, FuzzCase, RawRequest } from "./cases";
import type { Answer } from "./checks";

/** What a fuzz run found and how it went: the figures, and every rule it saw broken. */

export interface Violation {
  caseIndex: number;
  category: Category;
  label: string;
  step: number;
  request: string;
  answer: string;
  message: string;
}

export interface FuzzReport {
  seed: number;
  cases: number;
  requests: number;
  byCategory: Record<string, { cases: number; requests: number }>;
  /** HTTP statuses, and `reset` / `closed` / `aborted` / `no answer` for exchanges without one. */
  statuses: Record<string, number>;
  codes502: Record<string, number>;
  /** 200s from the call endpoints, charged ones and idempotent replays of earlier ones. */
  ok200: number;
  replayed200: number;
  charges: { count: number; micros: bigint };
  canaryHits: string[];
  eventLoopDelayMaxMs: number;
  eventLoopDelayP99Ms: number;
  slowestRequestMs: number;
  /** The slowest exchanges: where the time (and any blocked event loop) went. */
  slowest: { ms: number; caseIndex: number; what: string }[];
  durationMs: number;
  /** Internal errors the gateway logged (5xx it hid behind the envelope), ApiErrors it meant aside. */
  gatewayInternalErrors: string[];
  /** Lines written to the console during the run (a library's warnings, say): a seller must not be able to write there. */
  consoleLines: string[];
  violations: Violation[];
  violationCount: number;
  /** Whole-run checks that failed (books, health, canary). */
  endFailures: string[];
}

const EXCERPT = 300;

/** A new, empty report for a run of `seed`. */
export function emptyReport(seed: number, categories: readonly string[]): FuzzReport {
  return {
    seed,
    cases: 0,
    requests: 0,
    byCategory: Object.fromEntries(categories.map((c) => [c, { cases: 0, requests: 0 }])),
    statuses: {},
    codes502: {},
    ok200: 0,
    replayed200: 0,
    charges: { count: 0, micros: 0n },
    canaryHits: [],
    eventLoopDelayMaxMs: 0,
    eventLoopDelayP99Ms: 0,
    slowestRequestMs: 0,
    slowest: [],
    durationMs: 0,
    gatewayInternalErrors: [],
    consoleLines: [],
    violations: [],
    violationCount: 0,
    endFailures: [],
  };
}

export function noteSlow(report: FuzzReport, ms: number, fuzzCase: FuzzCase, step: number): void {
  const slowest = report.slowest;
  if (slowest.length === 5 && ms <= slowest[4].ms) return;
  slowest.push({ ms, caseIndex: fuzzCase.index, what: `${fuzzCase.category}: ${fuzzCase.label}, step ${step}` });
  slowest.sort((a, b) => b.ms - a.ms);
  slowest.length = Math.min(slowest.length, 5);
}

export function tally(counts: Record<string, number>, key: string, by = 1): void {
  counts[key] = (counts[key] ?? 0) + by;
}

function excerpt(bytes: Buffer): string {
  const text = bytes.toString("latin1");
  const shown = text.length > EXCERPT ? `${text.slice(0, EXCERPT)}… (${bytes.length} bytes)` : text;
  return JSON.stringify(shown);
}

export function describeRequest(request: FetchRequest | RawRequest): string {
  if (request.transport === "fetch") {
    const headers = Object.entries(request.headers).map(([k, v]) => `${k}: ${v.length > 80 ? `${v.slice(0, 80)}… (${v.length})` : v}`);
    return `fetch ${request.method} ${request.path.slice(0, 200)} [${headers.join("; ")}] body ${request.body ? excerpt(request.body) : "none"}`;
  }
  const bytes = Buffer.concat(request.segments.map((s) => s.bytes));
  return `socket (${request.segments.length} segments${request.abort ? ", then hung up" : ""}) ${excerpt(bytes)}`;
}

export function describeAnswer(answer: Answer): string {
  return `${answer.status} ${excerpt(answer.body)}`;
}

/** How to run one failing case again. */
export function replayCommand(seed: number, caseIndex?: number): string {
  return `FUZZ_SEED=${seed}${caseIndex === undefined ? "" : ` FUZZ_CASE=${caseIndex}`} npm run fuzz`;
}

export function formatViolations(report: FuzzReport): string {
  const lines = report.violations.map(
    (v) =>
      `  case ${v.caseIndex} (${v.category}: ${v.label}), step ${v.step}: ${v.message}\n    request: ${v.request}\n    answer:  ${v.answer}\n    replay:  ${replayCommand(report.seed, v.caseIndex)}`,
  );
  if (report.violationCount > report.violations.length) lines.push(`  … and ${report.violationCount - report.violations.length} more`);
  return [...lines, ...report.endFailures.map((f) => `  after the run: ${f}`)].join("\n");
}

export function formatReport(report: FuzzReport): string {
  const sorted = (counts: Record<string, number>) =>
    Object.entries(counts)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([k, n]) => `${k}: ${n}`)
      .join(", ");
  const usd = (micros: bigint) => (Number(micros) / 1e6).toFixed(6);
  const categories = Object.entries(report.byCategory)
    .filter(([, c]) => c.cases > 0)
    .map(([name, c]) => `    ${name.padEnd(16)} ${String(c.cases).padStart(6)} cases ${String(c.requests).padStart(6)} requests`);
  return [
    `fuzz seed ${report.seed}: ${report.cases} cases, ${report.requests} requests in ${(report.durationMs / 1000).toFixed(1)} s (${Math.round(report.requests / (report.durationMs / 1000))} requests/s)`,
    "  by category:",
    ...categories,
    `  statuses: ${sorted(report.statuses)}`,
    `  502 codes: ${sorted(report.codes502) || "none"}`,
    `  call 200s: ${report.ok200} (${report.replayed200} idempotent replays); charges: ${report.charges.count} for ${usd(report.charges.micros)} USD`,
    `  canary hits: ${report.canaryHits.length}`,
    `  event loop delay: max ${report.eventLoopDelayMaxMs.toFixed(1)} ms, p99 ${report.eventLoopDelayP99Ms.toFixed(1)} ms; slowest request ${(report.slowestRequestMs / 1000).toFixed(2)} s`,
    `  slowest: ${report.slowest.map((s) => `${(s.ms / 1000).toFixed(2)} s case ${s.caseIndex} (${s.what})`).join("; ")}`,
    `  internal errors the gateway logged (not shown to clients): ${report.gatewayInternalErrors.length}${report.gatewayInternalErrors.length ? ` (first: ${report.gatewayInternalErrors[0]})` : ""}`,
    `  console lines during the run: ${report.consoleLines.length}${report.consoleLines.length ? ` (first: ${JSON.stringify(report.consoleLines[0].slice(0, 120))})` : ""}`,
    `  violations: ${report.violationCount}; end-of-run failures: ${report.endFailures.length}`,
  ].join("\n");
}

export function failed(report: FuzzReport): boolean {
  return report.violationCount > 0 || report.endFailures.length > 0;
}
