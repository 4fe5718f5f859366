/**
 * One skill: what it costs, who sells it, its input schema, example curl commands for both
 * call endpoints, and a "try it" form that makes a real, paid call with one of the person's
 * keys (POST /v1/skills/:slug/try answers exactly what the call endpoint would).
 */

import { get, request } from "../api";
import { busy, card, copyButton, field, h, muted, replaceChildren } from "../dom";
import { curlForCall, curlForSkillCall } from "../curl";
import { formatUsd } from "../format";
import { walletLink } from "../forms";
import { type PageContext, pageHeader } from "../page";
import { exampleInput } from "../schema";
import { refreshMe } from "../session";
import type { ApiKey, Skill } from "../types";

export async function skillPage(ctx: PageContext): Promise<void> {
  const slug = ctx.params.slug;
  const back = h("p", { class: "crumbs" }, h("a", { href: "/marketplace" }, "← Marketplace"));
  let skill: Skill;
  try {
    skill = await get<Skill>(`/v1/skills/${encodeURIComponent(slug)}`);
  } catch (error) {
    ctx.root.append(back, pageHeader(slug), muted("This skill could not be loaded."));
    return ctx.fail(error);
  }

  const input = exampleInput(skill.input_schema);
  const origin = location.origin;
  const price = h(
    "p",
    { class: "price-big", testid: "skill-price" },
    formatUsd(skill.price_per_call ?? skill.price),
    h("small", {}, " per call"),
  );
  const feeNote =
    skill.price_per_call !== undefined && skill.price_per_call !== skill.price
      ? muted(`Seller's price ${formatUsd(skill.price)}; the rest is the gateway's fee.`)
      : null;

  ctx.root.append(
    back,
    pageHeader(skill.name, skill.description || undefined),
    h(
      "div",
      { class: "grid grid-3" },
      card("Price", price, feeNote),
      card("Seller", h("p", { class: "stat-value stat-small stat-text", testid: "skill-seller" }, skill.seller?.name ?? "Unknown seller")),
      card(
        "Slug",
        h("code", { class: "mono" }, skill.slug),
        skill.rate_limit_per_min ? muted(`Up to ${skill.rate_limit_per_min} calls a minute per key.`) : null,
      ),
    ),
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
    await tryCard(ctx, skill, input),
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

async function tryCard(ctx: PageContext, skill: Skill, input: Record<string, unknown>): Promise<HTMLElement> {
  if (!ctx.me) return card("Try it", h("p", {}, h("a", { href: "/signin" }, "Sign in"), " to try this skill with one of your keys."));
  let keys: ApiKey[];
  try {
    keys = await get<ApiKey[]>("/v1/keys");
  } catch (error) {
    ctx.fail(error);
    return card("Try it", muted("Your keys could not be loaded."));
  }
  if (keys.length === 0)
    return card(
      "Try it",
      h("p", {}, "You need an API key to try a skill. ", h("a", { href: "/keys" }, "Create one on the API Keys page"), "."),
    );

  const select = h(
    "select",
    { testid: "try-key" },
    ...keys.map((key) => h("option", { value: key.id }, `${key.name || "(unnamed)"} — ${key.prefix}…`)),
  );
  const textarea = h("textarea", { rows: 8, spellcheck: false, class: "mono", testid: "try-input" });
  textarea.value = JSON.stringify(input, null, 2);
  const submit = h(
    "button",
    { type: "submit", class: "btn btn-primary", testid: "try-submit" },
    `Call for ${formatUsd(skill.price_per_call ?? skill.price)}`,
  );
  const status = h("span", { class: "badge", testid: "try-status" });
  const result = h("pre", { class: "code", testid: "try-result" });
  const walletHint = h("p", { class: "wallet-hint" });
  const output = h("div", { class: "try-output" }, h("div", { class: "code-head" }, h("span", {}, "Response"), status), result, walletHint);
  output.hidden = true;

  const form = h(
    "form",
    { class: "stack" },
    field("Key", select),
    field("Input (JSON)", textarea),
    h("div", { class: "actions" }, submit),
    output,
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    let parsed: unknown;
    try {
      parsed = JSON.parse(textarea.value);
    } catch {
      return ctx.fail("The input is not valid JSON.");
    }
    void busy(submit, async () => {
      try {
        const answer = await request("POST", `/v1/skills/${encodeURIComponent(skill.slug)}/try`, { key_id: select.value, input: parsed });
        status.textContent = `HTTP ${answer.status}`;
        status.className = `badge ${answer.status >= 200 && answer.status < 300 ? "badge-ok" : "badge-bad"}`;
        result.textContent = typeof answer.body === "string" ? answer.body : JSON.stringify(answer.body, null, 2);
        output.hidden = false;
        // A 402 (the balance or the key's limit does not cover the call) shows the way to the Wallet.
        replaceChildren(walletHint, answer.status === 402 ? walletLink() : null);
        // A paid call moved the balance: the header pill follows.
        await refreshMe();
      } catch (error) {
        ctx.fail(error);
      }
    });
  });
  return card("Try it", h("p", { class: "muted" }, "A real call, billed to your balance like any other."), form);
}
