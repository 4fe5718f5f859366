/**
 * The dashboard's page table and path matching (History API routing). Pure: no DOM, so the
 * unit tests can run it under Node.
 */

export type PageName =
  | "signin"
  | "oauthResult"
  | "emailLink"
  | "wallet"
  | "keys"
  | "marketplace"
  | "skill"
  | "usage"
  | "seller"
  | "sellerSkill"
  | "settings"
  | "connect";

export interface Route {
  page: PageName;
  /** Named path segments, already URI-decoded (`slug` on the skill page). */
  params: Record<string, string>;
}

/** What `/` resolves to: a page, or a redirect decided by whether someone is signed in. */
export type Resolution = { kind: "page"; route: Route } | { kind: "redirect"; to: string } | { kind: "not_found" };

const PAGES: ReadonlyArray<{ pattern: string; page: PageName }> = [
  { pattern: "/signin", page: "signin" },
  // A GitHub/Google sign-in that did not complete, explained (the callback redirects here).
  { pattern: "/signin/oauth", page: "oauthResult" },
  // Where a mailed sign-in link points: shows what the link does; only its button signs in.
  { pattern: "/auth/email/callback", page: "emailLink" },
  { pattern: "/wallet", page: "wallet" },
  { pattern: "/keys", page: "keys" },
  { pattern: "/marketplace", page: "marketplace" },
  { pattern: "/marketplace/:slug", page: "skill" },
  { pattern: "/usage", page: "usage" },
  { pattern: "/seller", page: "seller" },
  { pattern: "/seller/skills/:slug", page: "sellerSkill" },
  { pattern: "/settings", page: "settings" },
  // Where a remote MCP client's OAuth authorization sends the person to consent (docs/mcp.md).
  { pattern: "/connect", page: "connect" },
];

/** Pages that show nothing useful without a session; they render a "sign in" prompt instead. */
export const PAGES_NEEDING_SESSION: ReadonlySet<PageName> = new Set(["wallet", "keys", "usage", "seller", "sellerSkill", "settings"]);

/** Matches a path against one pattern with `:name` segments; a trailing slash is ignored. */
export function matchPattern(pattern: string, pathname: string): Record<string, string> | undefined {
  const want = pattern.split("/").filter(Boolean);
  const have = pathname.split("/").filter(Boolean);
  if (want.length !== have.length) return undefined;
  const params: Record<string, string> = {};
  for (let i = 0; i < want.length; i++) {
    if (want[i].startsWith(":")) {
      let value: string;
      try {
        value = decodeURIComponent(have[i]);
      } catch {
        return undefined; // A malformed escape names no page.
      }
      if (value === "") return undefined;
      params[want[i].slice(1)] = value;
    } else if (want[i] !== have[i]) {
      return undefined;
    }
  }
  return params;
}

/** The page a path shows; `/` goes to the wallet when signed in, to sign-in otherwise. */
export function resolve(pathname: string, signedIn: boolean): Resolution {
  if (pathname === "/" || pathname === "") return { kind: "redirect", to: signedIn ? "/wallet" : "/signin" };
  for (const { pattern, page } of PAGES) {
    const params = matchPattern(pattern, pathname);
    if (params) return { kind: "page", route: { page, params } };
  }
  return { kind: "not_found" };
}

/** The path of a seller's page of one of its skills. */
export function sellerSkillPath(slug: string): string {
  return `/seller/skills/${encodeURIComponent(slug)}`;
}

/** The path of a skill's page. */
export function skillPath(slug: string): string {
  return `/marketplace/${encodeURIComponent(slug)}`;
}
