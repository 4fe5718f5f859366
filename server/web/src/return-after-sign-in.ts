/**
 * Where to go once signed in, when a page that needs a session sent the person to sign in (the MCP connect page: an
 * OAuth authorization must come back to its request). Kept in localStorage for a few minutes, so that a sign-in that
 * leaves the tab (a GitHub/Google redirect, an e-mail link opened in a new tab) still comes back. Only a path of this
 * app, and only the connect page: never a place a link could choose.
 */

const KEY = "sg.after_sign_in";
const TTL_MS = 15 * 60_000;
/** The paths a return may go to. */
const ALLOWED = /^\/connect\?request=[1-9A-HJ-NP-Za-km-z_]{1,80}$/;

/** Remembers `path` to return to after the next sign-in. */
export function rememberReturn(path: string): void {
  if (!ALLOWED.test(path)) return;
  try {
    localStorage.setItem(KEY, JSON.stringify({ path, until: Date.now() + TTL_MS }));
  } catch {
    /* Storage refused (private mode): the person finds the page again from the client. */
  }
}

/** The path to return to, used up: undefined when there is none, or it is stale or not one of ours. */
export function takeReturn(): string | undefined {
  let saved: { path?: unknown; until?: unknown } | null = null;
  try {
    saved = JSON.parse(localStorage.getItem(KEY) ?? "null") as { path?: unknown; until?: unknown } | null;
    localStorage.removeItem(KEY);
  } catch {
    return undefined;
  }
  if (!saved || typeof saved.path !== "string" || typeof saved.until !== "number" || saved.until < Date.now()) return undefined;
  return ALLOWED.test(saved.path) ? saved.path : undefined;
}
