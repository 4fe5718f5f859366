/**
 * One skill: what it costs and who sells it, then "try it" (a real, paid call with one of the
 * person's keys), then its input schema and example curl commands for both call endpoints.
 * A skeleton holds the page's shape while the skill and the keys load.
 */

import { describeError, get } from "../api";
import { card, copyButton, h, muted } from "../dom";
import { curlForCall, curlForSkillCall } from "../curl";
import { formatUsd } from "../format";
import { inlineMarkdown } from "../rich-text";
import type { PageContext } from "../page";
import { exampleInput } from "../schema";
import { formatRate } from "../quality";
import type { ApiKey, Skill } from "../types";
import { type TryKeys, tryCard } from "./try-it";

export async function skillPage(ctx: PageContext): Promise<void> {
  const slug = ctx.params.slug;
  const back = h("p", { class: "crumbs" }, h("a", { href: "/marketplace" }, "← Marketplace"));
  const skeleton = skillSkeleton();
  ctx.root.append(back, skeleton);

  // The keys load beside the skill: the page waits for the slower of the two, not their sum.
  const keys: Promise<TryKeys> = ctx.me
    ? get<ApiKey[]>("/v1/keys").then(
        (list): TryKeys => ({ kind: "loaded", keys: list }),
        (error): TryKeys => ({ kind: "failed", message: describeError(error) }),
      )
    : Promise.resolve({ kind: "signed_out" });
  let skill: Skill;
  try {
    skill = await get<Skill>(`/v1/skills/${encodeURIComponent(slug)}`);
  } catch (error) {
    skeleton.replaceWith(
      h("div", { class: "page-head" }, h("h1", {}, slug)),
      h("p", { class: "field-error", role: "alert", testid: "skill-error" }, `This skill could not be loaded: ${describeError(error)}`),
    );
    return;
  }
  const tryIt = tryCard(skill, await keys);

  const input = exampleInput(skill.input_schema);
  const origin = location.origin;
  skeleton.replaceWith(
    skillHead(skill),
    tryIt,
    card(
      "Input schema",
      h("pre", { class: "code", testid: "skill-schema" }, JSON.stringify(skill.input_schema ?? { type: "object" }, null, 2)),
    ),
    card(
      "Call it",
      h("p", {}, "Set ATOM_KEY to one of your API keys, then call either endpoint:"),
      codeBlock("POST /v1/call", curlForCall(origin, skill.slug, input), "curl-call"),
      codeBlock(`POST /v1/skills/${skill.slug}/call`, curlForSkillCall(origin, skill.slug, input), "curl-skill-call"),
    ),
  );
}

/** The name, the description (its `code` rendered), and the facts a buyer weighs: price first, then seller, slug, limit. */
function skillHead(skill: Skill): HTMLElement {
  const usage = skill.pricing === "usage";
  const sellerPrice = skill.price ?? skill.max_price;
  const feeNote =
    sellerPrice !== undefined && skill.price_per_call !== undefined && skill.price_per_call !== sellerPrice
      ? muted(`Seller's price ${usage ? "up to " : ""}${formatUsd(sellerPrice)}; the rest is the gateway's fee.`, { class: "muted small" })
      : usage
        ? muted("Charged for what each call used, never more than this.", { class: "muted small" })
        : null;
  return h(
    "div",
    { class: "page-head skill-head" },
    h("h1", {}, skill.name),
    skill.description ? h("p", { class: "lead", testid: "skill-description" }, ...inlineMarkdown(skill.description)) : null,
    h(
      "div",
      { class: "skill-facts" },
      h(
        "p",
        { class: "price-big", testid: "skill-price" },
        usage ? h("small", {}, "up to ") : null,
        formatUsd(skill.price_per_call ?? sellerPrice ?? 0),
        h("small", {}, " per call"),
      ),
      h("p", { class: "skill-fact" }, "by ", h("strong", { testid: "skill-seller" }, skill.seller?.name ?? "an unknown seller")),
      h("p", { class: "skill-fact" }, h("code", { class: "mono" }, skill.slug)),
      skill.rate_limit_per_min ? h("p", { class: "skill-fact muted" }, `Up to ${skill.rate_limit_per_min} calls a minute per key`) : null,
    ),
    qualityFacts(skill),
    feeNote,
  );
}

/** What the gateway measured this week: success rate, calls, p50 and p95; or that there are too few calls to say. */
function qualityFacts(skill: Skill): HTMLElement {
  const q = skill.quality;
  if (!q)
    return h("p", { class: "muted small", testid: "skill-quality" }, "Too few calls this week to measure its success rate and latency.");
  const fact = (label: string, value: string) => h("p", { class: "skill-fact" }, h("strong", {}, value), ` ${label}`);
  return h(
    "div",
    { class: "skill-facts", testid: "skill-quality", title: "Measured by the gateway from its own calls over the last 7 days" },
    fact(`succeeded of ${q.calls_7d.toLocaleString("en-US")} calls this week`, formatRate(q.success_rate_7d)),
    fact("p50", `${q.p50_ms_7d.toLocaleString("en-US")} ms`),
    fact("p95", `${q.p95_ms_7d.toLocaleString("en-US")} ms`),
  );
}

/** Grey blocks in the page's shape (title, description, facts, the try-it card), announced as loading. */
function skillSkeleton(): HTMLElement {
  const bar = (size: string) => h("span", { class: `skeleton skeleton-${size}` });
  return h(
    "div",
    { class: "skill-skeleton", role: "status", "aria-label": "Loading the skill", "aria-busy": "true", testid: "skill-skeleton" },
    h("div", { class: "page-head" }, bar("title"), bar("line"), bar("short")),
    h("section", { class: "card", "aria-hidden": "true" }, bar("heading"), bar("field"), bar("field"), bar("button")),
  );
}

function codeBlock(title: string, text: string, testid: string): HTMLElement {
  return h(
    "div",
    { class: "code-block" },
    h("div", { class: "code-head" }, h("span", { class: "mono" }, title), copyButton(text)),
    h("pre", { class: "code", testid }, text),
  );
}
