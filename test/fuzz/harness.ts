import { monitorEventLoopDelay, performance } from "node:perf_hooks";
import { assertBalanced } from "../../server/ledger/invariants";
import { CATEGORIES, type FetchRequest, type FuzzCase, type RawRequest } from "./cases";
import { type Answer, BACKEND_FAILURE_CODES, parseJson, pricePaid, violation } from "./checks";
import { generateCase } from "./generator";
import { rawExchange } from "./raw-http";
import { type FuzzReport, describeAnswer, describeRequest, emptyReport, noteSlow, tally } from "./report";
import { type FuzzStack, startFuzzStack } from "./stack";

/**
 * Runs a seeded fuzz campaign against a real gateway and checks every answer (./checks.ts),
 * then the books: exactly the 200s were charged, once each, and nothing else; the ledger
 * balances; the canary heard nothing; the gateway still answers. Failures carry the seed
 * and the case index, which replay them.
 */

export interface FuzzOptions {
  seed: number;
  /** How many cases to run (a case is one to four requests). */
  cases: number;
  /** Only these case indexes (a replay). */
  only?: number[];
  concurrency?: number;
  /** A request unanswered this long is a hang. */
  deadlineMs?: number;
}

const MAX_VIOLATIONS_KEPT = 40;
const CALL_PATH = /^\/v1\/(call|skills\/[^/]+\/(call|try))$/;

export async function runFuzz(options: FuzzOptions): Promise<FuzzReport> {
  const fuzz = await startFuzzStack();
  try {
    return await campaign(fuzz, options);
  } finally {
    await fuzz.close();
  }
}

async function campaign(fuzz: FuzzStack, options: FuzzOptions): Promise<FuzzReport> {
  const { seed } = options;
  const deadlineMs = options.deadlineMs ?? 30_000;
  const indexes = options.only ?? Array.from({ length: options.cases }, (_, i) => i);
  const report = emptyReport(seed, CATEGORIES);
  const gatewayPort = Number(new URL(fuzz.stack.url).port);
  const loop = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  const startedAt = performance.now();
  const restoreConsole = captureConsole(report.consoleLines);

  let next = 0;
  const worker = async () => {
    while (next < indexes.length) {
      const fuzzCase = generateCase(seed, indexes[next++], fuzz.target);
      await runCase(fuzzCase, fuzz, gatewayPort, deadlineMs, report);
    }
  };
  try {
    await Promise.all(Array.from({ length: options.concurrency ?? 8 }, worker));
    await endChecks(fuzz, report);
  } finally {
    restoreConsole();
  }
  loop.disable();
  report.durationMs = performance.now() - startedAt;
  report.eventLoopDelayMaxMs = loop.max / 1e6;
  report.eventLoopDelayP99Ms = loop.percentile(99) / 1e6;
  report.canaryHits = [...fuzz.canary.hits];
  report.gatewayInternalErrors = fuzz.gatewayLog.filter((line) => line.startsWith("internal error") && !line.includes(": ApiError: "));
  return report;
}

async function runCase(fuzzCase: FuzzCase, fuzz: FuzzStack, port: number, deadlineMs: number, report: FuzzReport): Promise<void> {
  report.cases++;
  report.byCategory[fuzzCase.category].cases++;
  if (fuzzCase.parallel) {
    await Promise.all(fuzzCase.steps.map((_step, i) => runStep(fuzzCase, i, fuzz, port, deadlineMs, report)));
    return;
  }
  const firstStatus: (number | undefined)[] = [];
  for (const [i, step] of fuzzCase.steps.entries()) {
    const required = step.requires === undefined ? 200 : firstStatus[step.requires];
    if (required === undefined || required < 200 || required >= 300) {
      firstStatus.push(undefined);
      continue;
    }
    firstStatus.push(await runStep(fuzzCase, i, fuzz, port, deadlineMs, report));
  }
}

/** Sends one step, checks each answer, and returns the first answer's status. */
async function runStep(
  fuzzCase: FuzzCase,
  i: number,
  fuzz: FuzzStack,
  port: number,
  deadlineMs: number,
  report: FuzzReport,
): Promise<number | undefined> {
  const step = fuzzCase.steps[i];
  const fail = (message: string, answer: string) => {
    report.violationCount++;
    if (report.violations.length < MAX_VIOLATIONS_KEPT) {
      report.violations.push({
        caseIndex: fuzzCase.index,
        category: fuzzCase.category,
        label: fuzzCase.label,
        step: i,
        request: describeRequest(step.request),
        answer,
        message,
      });
    }
  };
  const requests = step.request.transport === "raw" ? step.request.methods.length : 1;
  report.requests += requests;
  report.byCategory[fuzzCase.category].requests += requests;
  const started = performance.now();
  const answers =
    step.request.transport === "fetch"
      ? await viaFetch(fuzz.stack.url, step.request, deadlineMs)
      : await viaSocket(port, step.request, deadlineMs);
  const elapsedMs = performance.now() - started;
  report.slowestRequestMs = Math.max(report.slowestRequestMs, elapsedMs);
  noteSlow(report, elapsedMs, fuzzCase, i);

  if (answers.timedOut || elapsedMs > deadlineMs) {
    tally(report.statuses, "no answer");
    fail(
      `no answer within ${deadlineMs / 1000} s: the signature of a hang`,
      `after ${Math.round(elapsedMs)} ms, ${answers.answers.length} answers`,
    );
    return undefined;
  }
  const methods = step.request.transport === "raw" ? step.request.methods : [step.request.method];
  const paths = step.request.transport === "raw" ? step.request.paths : [step.request.path];
  for (const [k, answer] of answers.answers.entries()) {
    tally(report.statuses, String(answer.status));
    account(report, answer);
    // A pipelined GET among calls is held to the rules of a read.
    const role = step.request.transport === "raw" && !(methods[k] === "POST" && CALL_PATH.test(paths[k] ?? "")) ? "other" : step.role;
    const broken = violation({ ...step, role }, methods[k] ?? "GET", paths[k] ?? "", answer);
    if (broken) fail(broken, describeAnswer(answer));
  }
  const missing = requests - answers.answers.length;
  if (missing > 0) {
    const outcome = step.request.transport === "raw" && step.request.abort ? "aborted" : answers.error ? "reset" : "closed";
    tally(report.statuses, outcome, missing);
    if (outcome !== "aborted" && !step.mayReset)
      fail(`the connection ended with ${missing} of ${requests} requests unanswered (${answers.error ?? "closed"})`, "");
  }
  return answers.answers[0]?.status;
}

/** Counts a call's charge, as its answer states it. */
function account(report: FuzzReport, answer: Answer): void {
  if (answer.status === 502) {
    const code = (parseJson(answer.body) as { code?: unknown } | undefined)?.code;
    tally(report.codes502, typeof code === "string" && BACKEND_FAILURE_CODES.has(code) ? code : String(code));
  }
  if (answer.status !== 200) return;
  const paid = pricePaid(parseJson(answer.body));
  if (paid === undefined) return;
  report.ok200++;
  if (answer.headers["idempotent-replayed"] === "true") {
    report.replayed200++;
    return;
  }
  report.charges.count++;
  report.charges.micros += BigInt(Math.round(paid * 1e6));
}

interface Exchange {
  answers: Answer[];
  timedOut: boolean;
  error?: string;
}

async function viaFetch(base: string, request: FetchRequest, deadlineMs: number): Promise<Exchange> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), deadlineMs);
  try {
    const res = await fetch(base + request.path, {
      method: request.method,
      headers: request.headers,
      body: request.body,
      redirect: "manual",
      signal: controller.signal,
    });
    const body = Buffer.from(await res.arrayBuffer());
    const headers: Record<string, string> = {};
    res.headers.forEach((value, key) => {
      headers[key] = value;
    });
    return { answers: [{ status: res.status, headers, body }], timedOut: false };
  } catch (error) {
    if (controller.signal.aborted) return { answers: [], timedOut: true };
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    return { answers: [], timedOut: false, error: cause?.code ?? cause?.message ?? String(error) };
  } finally {
    clearTimeout(timer);
  }
}

async function viaSocket(port: number, request: RawRequest, deadlineMs: number): Promise<Exchange> {
  const outcome = await rawExchange(port, request, deadlineMs);
  return { answers: outcome.responses, timedOut: outcome.timedOut, error: outcome.error };
}

/** The whole-run checks: liveness and readiness, one good call, the books, the canary. */
async function endChecks(fuzz: FuzzStack, report: FuzzReport): Promise<void> {
  const { stack } = fuzz;
  const failures = report.endFailures;
  // With a key: the run has spent this address's allowance of unauthenticated requests.
  const keyed = { authorization: `Bearer ${fuzz.target.keys.rich}` };
  for (const path of ["/healthz", "/readyz"]) {
    const health = await viaFetch(stack.url, { transport: "fetch", method: "GET", path, headers: keyed }, 30_000);
    const answer = health.answers[0];
    if (answer?.status !== 200)
      failures.push(`GET ${path} after the run answered ${answer ? describeAnswer(answer) : (health.error ?? "nothing")}`);
  }
  const good = await viaFetch(
    stack.url,
    {
      transport: "fetch",
      method: "POST",
      path: "/v1/call",
      headers: { authorization: `Bearer ${fuzz.target.keys.rich}`, "content-type": "application/json" },
      body: Buffer.from('{"skill_id":"fz-echo","input":{"after":"the run"}}'),
    },
    30_000,
  );
  const goodAnswer = good.answers[0];
  if (goodAnswer?.status !== 200)
    failures.push(
      `a good call after the run answered ${goodAnswer?.status ?? good.error ?? "nothing"}: ${goodAnswer ? describeAnswer(goodAnswer) : ""}`,
    );
  else account(report, goodAnswer);

  await stack.gw.db.durable();
  const db = stack.gw.db;
  const paid = (await db.one<{ n: bigint | number; micros: bigint | number }>(
    "SELECT COUNT(*) AS n, COALESCE(SUM(charged_micros), 0) AS micros FROM calls WHERE http_status = 200",
  ))!;
  if (BigInt(paid.n) !== BigInt(report.charges.count) || BigInt(paid.micros) !== report.charges.micros) {
    failures.push(
      `the calls table holds ${paid.n} paid calls for ${paid.micros} base units; the clients saw ${report.charges.count} charged 200s for ${report.charges.micros}`,
    );
  }
  const chargedFailures = await db.value("SELECT COUNT(*) FROM calls WHERE http_status <> 200 AND charged_micros <> 0");
  if (Number(chargedFailures) !== 0) failures.push(`${chargedFailures} calls were charged without a 200`);
  const captures = Number(await db.value("SELECT COUNT(*) FROM holds WHERE status = 'captured'"));
  if (captures !== report.charges.count) failures.push(`${captures} holds were captured for ${report.charges.count} charged 200s`);
  const open = Number(await db.value("SELECT COUNT(*) FROM holds WHERE status = 'open'"));
  if (open !== 0) failures.push(`${open} holds are still open after the run`);
  for (const payer of fuzz.payers) {
    const spent = BigInt(
      (await db.value<bigint | number>("SELECT COALESCE(SUM(charged_micros), 0) FROM calls WHERE account_id = ? AND http_status = 200", [
        payer.accountId,
      ])) ?? 0,
    );
    const now = await stack.available(payer.accountId);
    if (payer.startMicros - now !== spent)
      failures.push(`${payer.accountId} lost ${payer.startMicros - now} base units but its paid calls cost ${spent}`);
  }
  try {
    await assertBalanced(stack.gw.ledger.db);
  } catch (error) {
    failures.push(`the ledger does not balance: ${(error as Error).message}`);
  }
  // The gateway runs in this process: a prototype polluted through its JSON handling would show here.
  for (const [name, proto] of [
    ["Object", Object.prototype],
    ["Array", Array.prototype],
  ] as const) {
    const polluted = Object.getOwnPropertyNames(proto).filter((key) => ["polluted", "admin", "skill_id", "input"].includes(key));
    if (polluted.length > 0) failures.push(`${name}.prototype was polluted: ${polluted.join(", ")}`);
  }
  if (fuzz.canary.hits.length > 0)
    failures.push(
      `the canary (an internal service on loopback) was reached ${fuzz.canary.hits.length} times: ${fuzz.canary.hits.slice(0, 5).join("; ")}`,
    );
}

/** Sends console.warn and console.error into `lines` until the returned function restores them. */
function captureConsole(lines: string[]): () => void {
  const saved = { warn: console.warn, error: console.error };
  const keep = (...args: unknown[]) => void lines.push(args.map(String).join(" "));
  console.warn = keep;
  console.error = keep;
  return () => {
    console.warn = saved.warn;
    console.error = saved.error;
  };
}
