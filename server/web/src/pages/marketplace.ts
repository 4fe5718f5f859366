/**
 * Marketplace: every listed skill as a card (price, description, seller, measured quality), filtered in the
 * page as the person types, by name, slug, description or seller (../search.ts), and ordered by price, success
 * rate or latency (../quality.ts).
 */

import { get } from "../api";
import { h, muted, replaceChildren } from "../dom";
import { formatUsd } from "../format";
import { inlineMarkdown } from "../rich-text";
import { type PageContext, pageHeader } from "../page";
import { skillPath } from "../router";
import { matchesSearch } from "../search";
import { SKILL_ORDERS, type SkillOrder, qualitySummary, sortSkills } from "../quality";
import type { Skill } from "../types";

export async function marketplacePage(ctx: PageContext): Promise<void> {
  ctx.root.append(pageHeader("Marketplace", "Skills your agents can call with one key, paid per call in USDC."));
  const search = h("input", {
    type: "search",
    placeholder: "Search by name, description or seller",
    "aria-label": "Search skills",
    testid: "skill-search",
  });
  const grid = h("div", { class: "grid grid-cards" }, muted("Loading skills…"));
  const empty = muted("No skill matches your search.");
  empty.hidden = true;
  const order = h(
    "select",
    { "aria-label": "Order skills by", testid: "skill-sort" },
    ...SKILL_ORDERS.map((o) => h("option", { value: o.value }, o.label)),
  );
  ctx.root.append(h("div", { class: "toolbar" }, search, order), grid, empty);

  let skills: Skill[];
  try {
    skills = await get<Skill[]>("/v1/skills");
  } catch (error) {
    replaceChildren(grid, muted("Skills are unavailable right now."));
    return ctx.fail(error);
  }
  if (skills.length === 0) return replaceChildren(grid, muted("No skills are listed yet — sellers list theirs on the Seller page."));

  const cards = skills.map((skill) => ({ skill, element: skillCard(skill) }));
  replaceChildren(grid, ...cards.map((c) => c.element));
  const filter = () => {
    let shown = 0;
    for (const { skill, element } of cards) {
      element.hidden = !matchesSearch(skill, search.value);
      if (!element.hidden) shown++;
    }
    empty.hidden = shown > 0;
  };
  search.addEventListener("input", filter);
  order.addEventListener("change", () => {
    const sorted = sortSkills(
      cards.map((c) => c.skill),
      order.value as SkillOrder,
    );
    const byId = new Map(cards.map((c) => [c.skill.id, c.element]));
    replaceChildren(grid, ...sorted.map((skill) => byId.get(skill.id)!));
  });
  // What was typed while the list loaded applies at once.
  filter();
}

function skillCard(skill: Skill): HTMLElement {
  return h(
    "a",
    { class: "card skill-card", href: skillPath(skill.slug), testid: "skill-card", "data-slug": skill.slug },
    h(
      "div",
      { class: "skill-card-head" },
      h("h2", {}, skill.name),
      h(
        "span",
        { class: "price" },
        skill.pricing === "usage" ? h("small", {}, "up to ") : null,
        formatUsd(skill.price_per_call ?? skill.price ?? 0),
        h("small", {}, " / call"),
      ),
    ),
    h("code", { class: "mono slug" }, skill.slug),
    h("p", { class: "description" }, ...(skill.description ? inlineMarkdown(skill.description) : ["No description."])),
    h("p", { class: "muted seller" }, `by ${skill.seller?.name ?? "an independent seller"}`),
    h(
      "p",
      {
        class: `quality small${skill.quality ? "" : " muted"}`,
        testid: "skill-quality",
        title: "Measured by the gateway over the last 7 days",
      },
      qualitySummary(skill.quality),
    ),
  );
}
