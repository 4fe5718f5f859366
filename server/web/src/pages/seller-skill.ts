/**
 * One of the seller's skills, as its seller sees it (GET /v1/seller/skills/:id/stats): calls, success rate and
 * latency over the chosen days, revenue per day, failures by code with whose doing each was, then the skill's output
 * contract and the latest answers that broke it (GET /v1/seller/skills/:id/output-failures).
 */

import { describeError, get } from "../api";
import { card, h, muted, replaceChildren, row, table } from "../dom";
import { spendChart } from "../chart";
import { formatCount, formatDateTime, formatLatency, formatUsd } from "../format";
import { type PageContext, pageHeader, signInPrompt } from "../page";
import { formatRate } from "../quality";
import { skillPath } from "../router";
import type { OutputFailure, SellerSkill, SellerSkillStats, StatsFigures } from "../types";

/** What a fault is called on the page. */
const FAULT_WORDS = { seller: "the skill's", buyer: "the caller's", gateway: "the gateway's" } as const;

export async function sellerSkillPage(ctx: PageContext): Promise<void> {
  const ref = ctx.params.slug;
  const back = h("p", { class: "crumbs" }, h("a", { href: "/seller" }, "← Seller"));
  if (!ctx.me) return void ctx.root.append(back, signInPrompt("see your skill's stats"));
  const path = `/v1/seller/skills/${encodeURIComponent(ref)}`;
  const days = h(
    "select",
    { "aria-label": "Days", testid: "stats-days" },
    ...[7, 14, 30].map((d) => h("option", { value: String(d) }, `Last ${d} days`)),
  );
  const body = h("div", { "aria-busy": "true" }, muted("Loading the skill's stats…", { class: "muted loading" }));
  ctx.root.append(back, pageHeader(ref, "What the gateway measured of this skill's calls: yours to fix, never your buyers' data."));
  ctx.root.append(h("div", { class: "toolbar" }, days), body);

  let skill: SellerSkill | undefined;
  let failures: OutputFailure[] = [];
  try {
    const [skills, listed] = await Promise.all([get<SellerSkill[]>("/v1/seller/skills"), get<OutputFailure[]>(`${path}/output-failures`)]);
    skill = skills.find((s) => s.slug === ref || s.id === ref);
    failures = listed;
  } catch (error) {
    replaceChildren(
      body,
      h("p", { class: "field-error", role: "alert", testid: "stats-error" }, `This skill could not be loaded: ${describeError(error)}`),
    );
    body.removeAttribute("aria-busy");
    return;
  }

  const load = async () => {
    body.setAttribute("aria-busy", "true");
    try {
      const stats = await get<SellerSkillStats>(`${path}/stats?days=${days.value}`);
      replaceChildren(body, ...statsCards(stats), contractCard(skill, failures));
    } catch (error) {
      replaceChildren(body, muted("The stats are unavailable right now."));
      ctx.fail(error);
    } finally {
      body.removeAttribute("aria-busy");
    }
  };
  days.addEventListener("change", () => void load());
  await load();
}

function statsCards(stats: SellerSkillStats): HTMLElement[] {
  const t = stats.totals;
  const stat = (label: string, value: string, testid: string, hint: string) =>
    h(
      "div",
      { class: "stat-cell" },
      h("span", { class: "field-label" }, label),
      h("span", { class: "stat-value stat-small", testid }, value),
      h("span", { class: "hint" }, hint),
    );
  const rate = (f: StatsFigures) => (f.success_rate === null ? "—" : formatRate(f.success_rate));
  const summary = card(
    `${stats.from} to ${stats.to} (UTC)`,
    h(
      "div",
      { class: "stats" },
      stat("Calls", t.calls.toLocaleString("en-US"), "stats-calls", "every call, whoever's doing its end"),
      stat("Success rate", rate(t), "stats-success-rate", `of ${formatCount(t.successes + t.seller_failures, "call")} it is judged on`),
      stat(
        "Latency",
        `${formatLatency(t.p50_ms)} / ${formatLatency(t.p95_ms)}`,
        "stats-latency",
        "p50 / p95 (p99 " + formatLatency(t.p99_ms) + ")",
      ),
      stat("Revenue", formatUsd(t.revenue, t.revenue_base_units), "stats-revenue", "captured, before the platform's fee"),
    ),
    stats.quality
      ? muted(
          `The marketplace shows: ${formatRate(stats.quality.success_rate_7d)} of ${stats.quality.calls_7d.toLocaleString("en-US")} calls this week, p95 ${stats.quality.p95_ms_7d} ms.`,
        )
      : muted("The marketplace shows no figures yet: too few calls this week."),
  );
  const chart = card(
    "Revenue and calls per day",
    spendChart(stats.days.map((d) => ({ date: d.date, spend: d.revenue, spend_base_units: d.revenue_base_units, calls: d.calls }))),
  );
  const dayHeaders = ["Day", "Calls", "Successes", "Skill's failures", "Callers' failures", "Success rate", "p95", "Revenue"];
  const perDay = card(
    "Day by day",
    table(
      { class: "table", testid: "stats-days-table" },
      dayHeaders,
      [...stats.days]
        .reverse()
        .map((d) =>
          row({ testid: "stats-day" }, dayHeaders, [
            d.date,
            String(d.calls),
            String(d.successes),
            String(d.seller_failures),
            String(d.buyer_failures),
            rate(d),
            formatLatency(d.p95_ms),
            formatUsd(d.revenue, d.revenue_base_units),
          ]),
        ),
    ),
  );
  const failureHeaders = ["Code", "Whose doing", "Calls"];
  const failures = card(
    "Failures by code",
    stats.failures.length === 0
      ? muted("No failed calls in these days.")
      : table(
          { class: "table", testid: "stats-failures" },
          failureHeaders,
          stats.failures.map((f) =>
            row({ testid: "stats-failure" }, failureHeaders, [h("code", { class: "mono" }, f.code), FAULT_WORDS[f.fault], String(f.calls)]),
          ),
        ),
    muted(
      `Output contract broken: ${formatCount(stats.output_contract_failures, "call")}; charge header refused: ${formatCount(stats.charge_header_failures, "call")}. Only the skill's own failures count against its success rate.`,
      { class: "muted small" },
    ),
  );
  return [summary, chart, perDay, failures];
}

/** The skill's output contract, and the latest answers that broke it with the first problem found. */
function contractCard(skill: SellerSkill | undefined, failures: OutputFailure[]): HTMLElement {
  const headers = ["When", "Call", "Endpoint", "First problem"];
  return card(
    "Output contract",
    skill?.listed ? h("p", {}, h("a", { href: skillPath(skill.slug) }, "See it in the marketplace")) : null,
    skill?.output_schema
      ? h("pre", { class: "code", testid: "stats-output-schema" }, JSON.stringify(skill.output_schema, null, 2))
      : muted("This skill makes no promise about its answers (no output schema): every 2xx is charged."),
    failures.length === 0
      ? muted("No answer has broken it lately.")
      : table(
          { class: "table", testid: "stats-output-failures" },
          headers,
          failures.map((f) =>
            row({ testid: "stats-output-failure" }, headers, [
              formatDateTime(f.created_at),
              h("code", { class: "mono" }, f.call_id),
              f.endpoint,
              f.problem,
            ]),
          ),
        ),
  );
}
