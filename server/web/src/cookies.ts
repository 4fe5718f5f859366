/**
 * The CSRF token's cookie: `sg_csrf`, or `__Host-sg_csrf` on a gateway served over https (server/http/session-cookies.ts).
 * The prefixed one is read first: a plain one beside it may have been planted by a sibling subdomain.
 */
const CSRF_COOKIES = ["__Host-sg_csrf", "sg_csrf"];

/** The CSRF token in a `document.cookie` string, or "" when there is none (signed out). */
export function csrfFromCookies(cookies: string): string {
  const found = new Map<string, string>();
  for (const part of cookies.split(";")) {
    const [name, ...rest] = part.trim().split("=");
    if (CSRF_COOKIES.includes(name) && !found.has(name)) found.set(name, rest.join("="));
  }
  const value = CSRF_COOKIES.map((name) => found.get(name)).find((v) => v !== undefined);
  return value === undefined ? "" : decodeURIComponent(value);
}
