/**
 * Usage: the account's calls (what each cost, how long it took, which key made it, which settlement batch
 * carried it on-chain) and its spend per day on a chart with axes, with the range's total and this month's
 * spend so far. Narrowed by key, by skill and by a range of UTC days; the filters live in the page's URL
 * (the API Keys page links to each key's usage), and the same calls download as a CSV file.
 */

import { ApiFailure, describeError, get } from "../api";
import { spendChart } from "../chart";
import { card, field, h, muted, replaceChildren, row, statusBadge, table } from "../dom";
import { formatCount, formatDateTime, formatDay, formatLatency, formatUsd } from "../format";
import { metadataSummary } from "../key-fields";
import { type PageContext, pageHeader, signInPrompt } from "../page";
import type { ApiKey, DailySpend, Skill, UsageCall, UsagePage } from "../types";

const DEFAULT_DAYS = 30;
/** The most days the gateway draws at once (GET /v1/usage/daily). */
const MAX_DAYS = 366;
const PAGE_CALLS = 50;
const DAY_MS = 86_400_000;
const DATE = /^\d{4}-\d{2}-\d{2}$/;

/** What the page shows: a range of UTC days (from and to, both included), and optionally one key and one skill. */
interface Filters {
  from: string;
  to: string;
  api_key_id: string;
  skill_id: string;
}

const utcDay = (ms: number) => new Date(ms).toISOString().slice(0, 10);
const dayMs = (date: string) => (DATE.test(date) ? Date.parse(`${date}T00:00:00Z`) : Number.NaN);

/** The filters a URL's query names; the last 30 days (UTC) when it names no range. */
function filtersOf(search: string): Filters {
  const params = new URLSearchParams(search);
  const to = params.get("to") ?? utcDay(Date.now());
  const toMs = dayMs(to);
  const from = params.get("from") ?? (Number.isNaN(toMs) ? "" : utcDay(toMs - (DEFAULT_DAYS - 1) * DAY_MS));
  return { from, to, api_key_id: params.get("api_key_id") ?? "", skill_id: params.get("skill_id") ?? "" };
}

/** The query string of the filters that are set, for the page's URL and the API alike. */
function queryOf(filters: Filters, extra: Record<string, string> = {}): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries({ ...filters, ...extra })) if (value !== "") params.set(name, value);
  return params.toString();
}

/** What is wrong with a range, in words for the field it concerns; undefined when the gateway can draw it. */
function rangeProblem(filters: Filters): { field: "from" | "to"; message: string } | undefined {
  const from = dayMs(filters.from);
  const to = dayMs(filters.to);
  if (Number.isNaN(from)) return { field: "from", message: "Pick the first day to show." };
  if (Number.isNaN(to)) return { field: "to", message: "Pick the last day to show." };
  if (to < from) return { field: "to", message: "The last day is before the first: pick a later one." };
  if ((to - from) / DAY_MS + 1 > MAX_DAYS) return { field: "to", message: `Pick at most ${MAX_DAYS} days.` };
  return undefined;
}

export async function usagePage(ctx: PageContext): Promise<void> {
  ctx.root.append(pageHeader("Usage", "Every call made with your keys, what it cost, and where its payment is on the way to the chain."));
  if (!ctx.me) return void ctx.root.append(signInPrompt("see your usage"));

  const initial = filtersOf(location.search);
  const from = h("input", { type: "date", testid: "usage-from", "aria-describedby": "usage-filter-error" });
  const to = h("input", { type: "date", testid: "usage-to", "aria-describedby": "usage-filter-error" });
  from.value = initial.from;
  to.value = initial.to;
  const key = h("select", { testid: "usage-key" }, h("option", { value: "" }, "All keys"));
  const skill = h("select", { testid: "usage-skill" }, h("option", { value: "" }, "All skills"));
  const problem = h("p", { class: "field-error", id: "usage-filter-error", role: "alert", testid: "usage-filter-error", hidden: true });
  const csv = h("a", { class: "btn btn-small", download: "", testid: "usage-csv" }, "Download CSV");
  const preset = (label: string, range: () => [string, string]) =>
    h(
      "button",
      {
        type: "button",
        class: "btn btn-small btn-ghost",
        onclick: () => {
          [from.value, to.value] = range();
          void apply();
        },
      },
      label,
    );
  const lastDays = (n: number) => (): [string, string] => [utcDay(Date.now() - (n - 1) * DAY_MS), utcDay(Date.now())];
  const form = h(
    "form",
    { class: "filters", "aria-label": "Which calls to show", testid: "usage-filters" },
    field("From (UTC)", from),
    field("To (UTC)", to),
    field("Key", key),
    field("Skill", skill),
  );
  const actions = h(
    "div",
    { class: "filters-actions" },
    preset("7 days", lastDays(7)),
    preset("30 days", lastDays(30)),
    preset("90 days", lastDays(90)),
    preset("This month", () => [`${utcDay(Date.now()).slice(0, 7)}-01`, utcDay(Date.now())]),
    h("span", { class: "spacer" }),
    csv,
  );

  const stats = h("div", { class: "stats usage-stats" });
  const chart = h("div", { class: "chart-box" }, muted("Loading chart…"));
  const calls = h("div", {}, muted("Loading calls…"));
  ctx.root.append(card(null, form, problem, actions), card("Spend per day (UTC)", stats, chart), card("Calls", calls));

  /** Shows a problem with the filters under them, marking the field it concerns; none clears it. */
  const showProblem = (found?: { field?: "from" | "to"; message: string }) => {
    problem.hidden = found === undefined;
    problem.textContent = found?.message ?? "";
    for (const [name, input] of [
      ["from", from],
      ["to", to],
    ] as const) {
      if (found?.field === name) input.setAttribute("aria-invalid", "true");
      else input.removeAttribute("aria-invalid");
    }
    if (found) {
      csv.removeAttribute("href");
      csv.setAttribute("aria-disabled", "true");
    }
  };
  /** Where a failed read is told: a refusal of the filters under them, anything else in the box that was loading. */
  const failed = (error: unknown, box: HTMLElement) => {
    if (error instanceof ApiFailure && (error.status === 400 || error.status === 404)) {
      showProblem({ message: error.message });
      replaceChildren(box, muted("Nothing to show for these filters."));
    } else {
      replaceChildren(box, h("p", { class: "field-error", role: "alert" }, describeError(error)));
    }
  };

  let generation = 0;
  const current = (): Filters => ({ from: from.value, to: to.value, api_key_id: key.value, skill_id: skill.value });
  /** Shows the calls `filters` select (by default what the fields say), and puts them in the URL. */
  const apply = async (filters = current()): Promise<void> => {
    const found = rangeProblem(filters);
    showProblem(found);
    if (found || !ctx.isCurrent()) return;
    const query = queryOf(filters);
    history.replaceState(null, "", `${location.pathname}?${query}`);
    csv.setAttribute("href", `/v1/usage.csv?${query}`);
    csv.removeAttribute("aria-disabled");
    const mine = ++generation;
    const live = () => mine === generation && ctx.isCurrent();
    await Promise.all([loadSummary(filters, live), loadCalls(filters, live)]);
  };

  const loadSummary = async (filters: Filters, live: () => boolean) => {
    try {
      const daily = await get<DailySpend>(`/v1/usage/daily?${queryOf(filters)}`);
      if (!live()) return;
      replaceChildren(stats, ...summaryStats(daily));
      replaceChildren(chart, spendChart(daily.days), daily.total.calls === 0 ? muted("No calls in these days.") : null);
    } catch (error) {
      if (!live()) return;
      replaceChildren(stats);
      failed(error, chart);
    }
  };

  const loadCalls = async (filters: Filters, live: () => boolean) => {
    try {
      const page = await get<UsagePage>(`/v1/usage?${queryOf(filters, { limit: String(PAGE_CALLS) })}`);
      if (!live()) return;
      if (page.calls.length === 0) {
        const narrowed = filters.api_key_id !== "" || filters.skill_id !== "";
        return replaceChildren(
          calls,
          narrowed
            ? muted("No calls match these filters.", { testid: "usage-empty" })
            : h(
                "p",
                { class: "muted", testid: "usage-empty" },
                "No calls in these days. Try a skill in the ",
                h("a", { href: "/marketplace" }, "Marketplace"),
                ".",
              ),
        );
      }
      const listed = callsTable(page.calls);
      const body = listed.querySelector("tbody")!;
      replaceChildren(calls, listed, moreButton(filters, page.next_before, body, live));
    } catch (error) {
      if (live()) failed(error, calls);
    }
  };

  /** A button that appends the next page of calls, or nothing on the last page. */
  const moreButton = (filters: Filters, before: number | null, body: HTMLElement, live: () => boolean): HTMLElement | null => {
    if (before === null) return null;
    const button = h("button", { type: "button", class: "btn btn-small show-more", testid: "usage-more" }, "Show more");
    button.addEventListener("click", async () => {
      button.disabled = true;
      try {
        const page = await get<UsagePage>(`/v1/usage?${queryOf(filters, { limit: String(PAGE_CALLS), before: String(before) })}`);
        if (!live()) return;
        body.append(...page.calls.map(callRow));
        button.replaceWith(moreButton(filters, page.next_before, body, live) ?? "");
      } catch (error) {
        button.disabled = false;
        button.after(h("p", { class: "field-error", role: "alert" }, describeError(error)));
      }
    });
    return button;
  };

  form.addEventListener("change", () => void apply());
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    void apply();
  });
  // The key and skill choices load alongside: until they are there, the URL's key and skill are the filters.
  await Promise.all([
    loadChoices(key, skill, initial),
    apply({ ...current(), api_key_id: initial.api_key_id, skill_id: initial.skill_id }),
  ]);
}

/** The range's spend and calls, and this month's spend so far. */
function summaryStats(daily: DailySpend): HTMLElement[] {
  const stat = (label: string, value: string, testid: string, hint: string) =>
    h(
      "div",
      { class: "stat-cell" },
      h("span", { class: "field-label" }, label),
      h("span", { class: "stat-value stat-small", testid }, value),
      h("span", { class: "hint" }, hint),
    );
  const range = `${formatDay(daily.from)} – ${formatDay(daily.to, { year: true })}`;
  return [
    stat("Spent", formatUsd(daily.total.spend, daily.total.spend_base_units), "usage-total", range),
    stat("Calls", daily.total.calls.toLocaleString("en-US"), "usage-calls", "that reached a skill"),
    stat(
      "This month (UTC)",
      formatUsd(daily.month_to_date.spend, daily.month_to_date.spend_base_units),
      "usage-month",
      `${formatCount(daily.month_to_date.calls, "call")} since ${formatDay(`${daily.month_to_date.month}-01`)}`,
    ),
  ];
}

/**
 * Fills the key and skill choices: the account's live keys and the listed skills. A key or skill the URL names
 * that is not among them (a revoked key, a skill no longer listed) is added as it is named.
 */
async function loadChoices(key: HTMLSelectElement, skill: HTMLSelectElement, initial: Filters): Promise<void> {
  const [keys, skills] = await Promise.all([get<ApiKey[]>("/v1/keys").catch(() => []), get<Skill[]>("/v1/skills").catch(() => [])]);
  // A key's metadata says which agent it is for: shown beside its name, so the choice can be made by agent.
  const keyLabel = (k: ApiKey) => {
    const metadata = metadataSummary(k.metadata);
    return `${k.name || `${k.prefix}…`}${metadata === "" ? "" : ` (${metadata})`}`;
  };
  key.append(...keys.map((k) => h("option", { value: k.id }, keyLabel(k))));
  if (initial.api_key_id !== "" && !keys.some((k) => k.id === initial.api_key_id))
    key.append(h("option", { value: initial.api_key_id }, `Key ${initial.api_key_id.slice(0, 8)}…`));
  key.value = initial.api_key_id;
  const sorted = [...skills].sort((a, b) => a.name.localeCompare(b.name));
  skill.append(...sorted.map((s) => h("option", { value: s.slug }, s.name)));
  if (initial.skill_id !== "" && !skills.some((s) => s.slug === initial.skill_id || s.id === initial.skill_id))
    skill.append(h("option", { value: initial.skill_id }, initial.skill_id));
  skill.value = skills.find((s) => s.id === initial.skill_id)?.slug ?? initial.skill_id;
}

const HEADERS = ["Time", "Skill", "Key", "Status", "Cost", "Latency", "Settlement"];

function callsTable(calls: UsageCall[]): HTMLElement {
  return table({ class: "table", testid: "usage-table" }, HEADERS, calls.map(callRow));
}

/**
 * The key a call was made with: its name, else its prefix; x402 for a call paid with x402. Under it, the key's
 * metadata (which agent, which end user it is for), when it has any.
 */
function keyCell(call: UsageCall): HTMLElement | string {
  const metadata = metadataSummary(call.api_key_metadata);
  const label = call.api_key_name
    ? call.api_key_name
    : call.api_key_prefix
      ? h("code", { class: "mono" }, `${call.api_key_prefix}…`)
      : call.api_key_id === "x402"
        ? "x402"
        : "—";
  if (metadata === "") return label;
  return h("div", {}, label, h("div", { class: "muted small key-metadata", testid: "usage-key-metadata" }, metadata));
}

function callRow(call: UsageCall): HTMLTableRowElement {
  return row({ testid: "usage-row", "data-call-id": call.id }, HEADERS, [
    formatDateTime(call.created_at),
    h("span", { title: call.skill_id }, call.skill_name ?? call.skill_id),
    keyCell(call),
    statusBadge(call.status === "success" ? "success" : (call.outcome ?? call.status)),
    formatUsd(call.cost, call.cost_base_units),
    formatLatency(call.response_time_ms),
    settlementCell(call),
  ]);
}

/** Where a call's payment is: not charged, waiting for a batch, in a batch being sent, or settled on-chain. */
function settlementCell(call: UsageCall): HTMLElement | string {
  if (!call.settlement) return call.batch_number ? `Batch #${call.batch_number}` : "—";
  if (call.settlement === "not_charged") return h("span", { class: "muted" }, "not charged");
  const label =
    call.batch_number !== null && call.batch_number !== undefined ? `#${call.batch_number} ${call.settlement}` : call.settlement;
  return statusBadge(label);
}
