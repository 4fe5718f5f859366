/**
 * The Marketplace's search, in the page (the list is small: one request, no server search).
 * Pure: no DOM, so the unit tests run it under Node.
 */

import type { Skill } from "./types";

/** What a search looks through: the skill's name, slug, description and its seller's name. */
export type Searchable = Pick<Skill, "name" | "slug" | "description" | "seller">;

/**
 * Whether a skill matches a search: every word of the query appears in its name, slug,
 * description or seller's name, ignoring case (so "weather Seller One" narrows, not widens).
 * An empty query matches everything.
 */
export function matchesSearch(skill: Searchable, query: string): boolean {
  const words = query.toLowerCase().split(/\s+/).filter(Boolean);
  if (words.length === 0) return true;
  const haystack = [skill.name, skill.slug, skill.description ?? "", skill.seller?.name ?? ""].join("\n").toLowerCase();
  return words.every((word) => haystack.includes(word));
}
