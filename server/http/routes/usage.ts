import express, { type Response, type Router } from "express";
import type { RefusalCounter } from "../../gateway/refusal-counter";
import type { CallsStore, SpendTotal, UsageFilter, UsageRow } from "../../gateway/calls-store";
import type { ApiKeys } from "../../identity/api-keys";
import { parseMetadata } from "../../identity/key-metadata";
import type { Sessions } from "../../identity/sessions";
import { microsToUsd, usdText } from "../../ledger/money";
import { requireAccount, scopeMissing } from "../auth";
import {
  MAX_DAILY_DAYS,
  USAGE_CSV_COLUMNS,
  dailyQuery,
  dailyView,
  usageByKeyView,
  usageCallView,
  usageCsvQuery,
  usagePageView,
  usageQuery,
} from "../contract/account";
import type { z } from "zod";
import { UUID_PATTERN, parseRequest } from "../contract/common";
import { type CsvCell, csvLine } from "../csv";
import { dataEnvelopeOf } from "../envelope";
import { ApiError } from "../errors";

const DAY_MS = 86_400_000;
/** Calls read per query while a CSV is written: the file may be any length, the memory it takes is not. */
export const CSV_PAGE_CALLS = 500;

/**
 * An account's usage, for its agents (an API key) and its dashboard (a session), every read narrowed by the
 * same filters (a key of the account, a skill, a time range):
 *   GET /v1/usage        → a page of calls, newest first (`before` pages back)
 *   GET /v1/usage.csv    → every call the filters select, as a CSV file, streamed page by page
 *   GET /v1/usage/daily  → calls and spend per UTC day, with the range's total and this month's so far
 *   GET /v1/usage/keys   → calls and spend per key: today, this month, in total
 * A key filter that names no key of the account is answered 404, as GET /v1/keys/:id answers it.
 * `now` is the clock that says which day and month it is.
 */
export function usageRoutes(deps: {
  keys: ApiKeys;
  sessions: Sessions;
  calls: CallsStore;
  refusals: RefusalCounter;
  now?: () => number;
  log?: (message: string, error?: unknown) => void;
}): Router {
  const router = express.Router();
  /** The key-or-session check of a route, with the scope its declaration (server/http/contract/) names. */
  const auth = (route: string) => requireAccount(deps.keys, deps.sessions, route);
  const now = deps.now ?? Date.now;

  /**
   * The store's filter for a request's query, once its key is known to be the account's (revoked or not). A key that
   * may read its own calls only (`req.ownCallsOf`: it has `calls`, not `usage:read`) reads them with no api_key_id, or
   * its own; another key's id is refused with 403 scope_missing, as is every whole-account read for such a key.
   */
  const filterOf = async (
    req: { accountId?: string; ownCallsOf?: string },
    query: { api_key_id?: string; skill_id?: string; from?: number; to?: number },
  ): Promise<UsageFilter> => {
    const accountId = req.accountId!;
    const own = req.ownCallsOf;
    if (own !== undefined && query.api_key_id !== undefined && query.api_key_id !== own)
      throw scopeMissing("usage:read", "reading another key's calls");
    if (query.api_key_id !== undefined) {
      const key = await deps.keys.get(query.api_key_id);
      if (!key || key.accountId !== accountId) throw new ApiError("not_found", "No such key on this account.");
    }
    return {
      apiKeyId: query.api_key_id ?? own,
      // Skill UUIDs are stored in lowercase, as the catalogue resolves them.
      skill: query.skill_id !== undefined && UUID_PATTERN.test(query.skill_id) ? query.skill_id.toLowerCase() : query.skill_id,
      fromMs: query.from,
      untilMs: query.to,
    };
  };

  router.get("/v1/usage", auth("GET /v1/usage"), async (req, res) => {
    const query = parseRequest(usageQuery, req.query);
    const rows = await deps.calls.recent(req.accountId!, query.limit, query.before, await filterOf(req, query));
    res.json(
      dataEnvelopeOf(usagePageView, {
        calls: rows.map(callView),
        /** Pass as ?before= to read the next page. */
        // A page may run past `limit` to finish its last millisecond (CallsStore.recent).
        next_before: rows.length >= query.limit ? rows[rows.length - 1].createdAtMs : null,
      }),
    );
  });

  router.get("/v1/usage.csv", auth("GET /v1/usage.csv"), async (req, res) => {
    const query = parseRequest(usageCsvQuery, req.query);
    const accountId = req.accountId!;
    const filter = await filterOf(req, query);
    res.status(200).set({
      "content-type": "text/csv; charset=utf-8; header=present",
      "content-disposition": `attachment; filename="${csvFileName(filter)}"`,
      "cache-control": "no-store",
    });
    try {
      if (!(await write(res, csvLine(USAGE_CSV_COLUMNS)))) return;
      let before = Number.MAX_SAFE_INTEGER;
      for (;;) {
        const rows = await deps.calls.recent(accountId, CSV_PAGE_CALLS, before, filter);
        if (rows.length > 0 && !(await write(res, rows.map((row) => csvLine(csvRow(row))).join("")))) return;
        // A short page is the last; a full one ends with its last millisecond whole (CallsStore.recent).
        if (rows.length < CSV_PAGE_CALLS) break;
        before = rows[rows.length - 1].createdAtMs;
      }
      res.end();
    } catch (error) {
      if (!res.headersSent) throw error;
      // Half a file must not look like a whole one: the connection is cut instead of ended.
      deps.log?.("usage CSV failed mid-stream", error);
      res.destroy();
    }
  });

  router.get("/v1/usage/daily", auth("GET /v1/usage/daily"), async (req, res) => {
    const query = parseRequest(dailyQuery, req.query);
    if (query.from !== undefined && req.query.days !== undefined)
      throw new ApiError("invalid_request", "days goes without from: send days (counted back from to, or from today), or from and to.");
    const nowMs = now();
    const todayDay = Math.floor(nowMs / DAY_MS);
    // `to` is the first millisecond after its day (contract/common.ts timeQuery).
    const lastDay = query.to !== undefined ? query.to / DAY_MS - 1 : todayDay;
    const firstDay = query.from !== undefined ? query.from / DAY_MS : lastDay - query.days + 1;
    if (firstDay > lastDay) throw new ApiError("invalid_request", "from must not be after to (today, when to is left out).");
    if (lastDay - firstDay + 1 > MAX_DAILY_DAYS)
      throw new ApiError("invalid_request", `from and to must be at most ${MAX_DAILY_DAYS} days apart, both included.`);
    const filter = await filterOf(req, { ...query, from: undefined, to: undefined });
    const range = { ...filter, fromMs: firstDay * DAY_MS, untilMs: (lastDay + 1) * DAY_MS };
    const monthToDate = { ...filter, fromMs: monthStartMs(nowMs) };
    const [days, month, refusedByDay, refusedThisMonth] = await Promise.all([
      deps.calls.daily(req.accountId!, range),
      deps.calls.total(req.accountId!, monthToDate),
      deps.refusals.daily(req.accountId!, range),
      deps.refusals.total(req.accountId!, monthToDate),
    ]);
    const byDay = new Map(days.map((d) => [d.day, d]));
    const out = [];
    let total: SpendTotal = { spendMicros: 0n, calls: 0 };
    let refused = 0;
    for (let day = firstDay; day <= lastDay; day++) {
      const d = byDay.get(day) ?? { spendMicros: 0n, calls: 0 };
      total = { spendMicros: total.spendMicros + d.spendMicros, calls: total.calls + d.calls };
      refused += refusedByDay.get(day) ?? 0;
      out.push({ date: dayText(day * DAY_MS), ...spendView(d), refused: refusedByDay.get(day) ?? 0 });
    }
    res.json(
      dataEnvelopeOf(dailyView, {
        currency: "USDC",
        from: dayText(firstDay * DAY_MS),
        to: dayText(lastDay * DAY_MS),
        days: out,
        total: { ...spendView(total), refused },
        month_to_date: { month: dayText(nowMs).slice(0, 7), ...spendView(month), refused: refusedThisMonth },
      }),
    );
  });

  router.get("/v1/usage/keys", auth("GET /v1/usage/keys"), async (req, res) => {
    const nowMs = now();
    const all = await deps.calls.byKey(req.accountId!, Math.floor(nowMs / DAY_MS) * DAY_MS, monthStartMs(nowMs));
    // A key that reads its own calls only sees its own line.
    const rows = req.ownCallsOf === undefined ? all : all.filter((row) => row.apiKeyId === req.ownCallsOf);
    res.json(
      dataEnvelopeOf(usageByKeyView, {
        currency: "USDC",
        day: dayText(nowMs),
        month: dayText(nowMs).slice(0, 7),
        keys: rows.map((row) => ({
          api_key_id: row.apiKeyId,
          today: spendView(row.today),
          month: spendView(row.month),
          total: spendView(row.total),
        })),
      }),
    );
  });

  return router;
}

/** A call as GET /v1/usage lists it. */
function callView(r: UsageRow): z.input<typeof usageCallView> {
  return {
    id: r.id,
    api_key_id: r.apiKeyId,
    api_key_name: r.apiKeyName,
    api_key_prefix: r.apiKeyPrefix,
    // The key's metadata as it stands (what its maker says it is for: which agent, which end user).
    api_key_metadata: r.apiKeyPrefix === null ? null : parseMetadata(r.apiKeyMetadata),
    skill_id: r.skillSlug ?? r.skillId,
    skill_uuid: r.skillId,
    skill_name: r.skillName,
    endpoint: r.endpoint === "call" ? ("/v1/call" as const) : ("/v1/skills/:skillId/call" as const),
    status: r.outcome === "success" ? ("success" as const) : ("failed" as const),
    outcome: r.outcome,
    http_status: r.httpStatus,
    cost: microsToUsd(r.chargedMicros),
    cost_base_units: r.chargedMicros.toString(),
    response_time_ms: Math.round(r.latencyUs / 10) / 100,
    created_at: new Date(r.createdAtMs).toISOString(),
    batch_number: r.batchNumber,
    settlement: r.chargedMicros === 0n ? "not_charged" : (r.batchStatus ?? "unsettled"),
  };
}

/** A call as a row of GET /v1/usage.csv: the JSON view's values, in USAGE_CSV_COLUMNS's order, money as decimal text. */
function csvRow(r: UsageRow): CsvCell[] {
  const view = callView(r);
  const cells: Record<(typeof USAGE_CSV_COLUMNS)[number], CsvCell> = {
    created_at: view.created_at,
    call_id: view.id,
    skill_id: view.skill_id,
    skill_name: view.skill_name,
    api_key_id: view.api_key_id,
    api_key_name: view.api_key_name,
    api_key_metadata:
      view.api_key_metadata === null || Object.keys(view.api_key_metadata).length === 0 ? "" : JSON.stringify(view.api_key_metadata),
    endpoint: view.endpoint,
    status: view.status,
    outcome: view.outcome,
    http_status: view.http_status,
    cost_usd: usdText(r.chargedMicros),
    cost_base_units: view.cost_base_units,
    response_time_ms: view.response_time_ms,
    settlement: view.settlement,
    batch_number: view.batch_number,
  };
  return USAGE_CSV_COLUMNS.map((column) => cells[column]);
}

/** The file's name: usage.csv, with the range's days when it has them (usage-2026-11-01-to-2026-11-30.csv). */
function csvFileName(filter: UsageFilter): string {
  const from = filter.fromMs === undefined ? "" : `-from-${dayText(filter.fromMs)}`;
  const to = filter.untilMs === undefined ? "" : `-to-${dayText(filter.untilMs - 1)}`;
  return `usage${from}${to}.csv`;
}

/**
 * Writes a chunk, waiting for the client to take it when the socket's buffer is full (so a slow reader holds back
 * the reads from the database, instead of the file piling up in memory). False once the client has gone.
 */
function write(res: Response, chunk: string): Promise<boolean> {
  if (res.destroyed) return Promise.resolve(false);
  if (res.write(chunk)) return Promise.resolve(true);
  return new Promise((resolve) => {
    const done = () => {
      res.off("drain", done);
      res.off("close", done);
      resolve(!res.destroyed);
    };
    res.on("drain", done);
    res.on("close", done);
  });
}

const spendView = (total: SpendTotal) => ({
  spend: microsToUsd(total.spendMicros),
  spend_base_units: total.spendMicros.toString(),
  calls: total.calls,
});

/** The UTC day of a time, as 2026-11-21. */
const dayText = (ms: number) => new Date(ms).toISOString().slice(0, 10);

/** The first millisecond of the UTC month of a time. */
function monthStartMs(ms: number): number {
  const date = new Date(ms);
  return Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), 1);
}
