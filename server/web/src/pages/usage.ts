/**
 * Usage: the account's recent calls (what each cost, how long it took, which settlement
 * batch carried it on-chain) and a chart of spend per day.
 */

import { get } from "../api";
import { spendChart } from "../chart";
import { card, h, muted, replaceChildren, row, statusBadge, table } from "../dom";
import { formatDateTime, formatLatency, formatUsd } from "../format";
import { type PageContext, pageHeader, signInPrompt } from "../page";
import type { DailySpend, UsageCall } from "../types";

const DAYS = 30;

export async function usagePage(ctx: PageContext): Promise<void> {
  ctx.root.append(pageHeader("Usage", "Every call made with your keys, and where its payment is on the way to the chain."));
  if (!ctx.me) return void ctx.root.append(signInPrompt("see your usage"));
  const chart = h("div", { class: "chart-box" }, muted("Loading chart…"));
  const calls = h("div", {}, muted("Loading calls…"));
  ctx.root.append(card(`Spend per day (last ${DAYS} days)`, chart), card("Recent calls", calls));
  await Promise.all([loadChart(ctx, chart), loadCalls(ctx, calls)]);
}

async function loadChart(ctx: PageContext, box: HTMLElement): Promise<void> {
  try {
    const { days } = await get<DailySpend>(`/v1/usage/daily?days=${DAYS}`);
    const total = days.reduce((n, d) => n + (d.calls || 0), 0);
    replaceChildren(box, spendChart(days), total === 0 ? muted("No spend in this period.") : null);
  } catch (error) {
    replaceChildren(box, muted("The chart is unavailable right now."));
    ctx.fail(error);
  }
}

/** Where a call's payment is: not charged, waiting for a batch, in a batch being sent, or settled on-chain. */
function settlementCell(call: UsageCall): HTMLElement | string {
  if (!call.settlement) return call.batch_number ? `Batch #${call.batch_number}` : "—";
  if (call.settlement === "not_charged") return h("span", { class: "muted" }, "not charged");
  const label =
    call.batch_number !== null && call.batch_number !== undefined ? `#${call.batch_number} ${call.settlement}` : call.settlement;
  return statusBadge(label);
}

async function loadCalls(ctx: PageContext, box: HTMLElement): Promise<void> {
  try {
    const { calls } = await get<{ calls: UsageCall[] }>("/v1/usage?limit=100");
    if (calls.length === 0) {
      return replaceChildren(
        box,
        h("p", { class: "muted" }, "No calls yet — try a skill in the ", h("a", { href: "/marketplace" }, "Marketplace"), "."),
      );
    }
    const headers = ["Time", "Skill", "Status", "Cost", "Latency", "Settlement"];
    replaceChildren(
      box,
      table(
        { class: "table" },
        headers,
        calls.map((call) =>
          row({ testid: "usage-row", "data-call-id": call.id }, headers, [
            formatDateTime(call.created_at),
            h("span", { title: call.skill_id }, call.skill_name ?? call.skill_id),
            statusBadge(call.status === "success" ? "success" : (call.outcome ?? call.status)),
            formatUsd(call.cost, call.cost_base_units),
            formatLatency(call.response_time_ms),
            settlementCell(call),
          ]),
        ),
      ),
    );
  } catch (error) {
    replaceChildren(box, muted("Calls are unavailable right now."));
    ctx.fail(error);
  }
}
