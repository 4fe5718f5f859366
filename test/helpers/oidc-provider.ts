/**
 * The local OAuth 2 / OpenID Connect provider the sign-in tests use is the one `npm start`
 * runs in place of GitHub and Google (server/devstack/dev-identity-provider.ts). `Browser`
 * below clicks through its login and consent pages the way a person would.
 */
export {
  type LocalClient,
  type LocalIdentityProvider as LocalProvider,
  startLocalIdentityProvider as startLocalProvider,
} from "../../server/devstack/dev-identity-provider";

/**
 * A browser enough for sign-in flows: follows redirects by hand, keeps each origin's
 * cookies, and can submit the form a page shows (hidden fields kept, others filled in).
 */
export class Browser {
  private readonly jars = new Map<string, Map<string, string>>();

  cookies(url: string): Map<string, string> {
    const origin = new URL(url).origin;
    let jar = this.jars.get(origin);
    if (!jar) {
      jar = new Map();
      this.jars.set(origin, jar);
    }
    return jar;
  }

  /** One request, no redirect followed; remembers the cookies it sets. */
  async request(
    url: string,
    init: { method?: string; body?: URLSearchParams | string; headers?: Record<string, string> } = {},
  ): Promise<Response> {
    const jar = this.cookies(url);
    const headers: Record<string, string> = { ...init.headers };
    if (jar.size > 0) headers.cookie = [...jar].map(([k, v]) => `${k}=${v}`).join("; ");
    const res = await fetch(url, { method: init.method ?? "GET", body: init.body, headers, redirect: "manual" });
    for (const line of res.headers.getSetCookie()) {
      const [pair, ...attributes] = line.split(";");
      const eq = pair.indexOf("=");
      const name = pair.slice(0, eq).trim();
      const value = pair.slice(eq + 1).trim();
      const expired = attributes.some((a) => /^\s*expires=Thu, 01 Jan 1970/i.test(a) || /^\s*max-age=0$/i.test(a));
      if (expired || value === "") jar.delete(name);
      else jar.set(name, value);
    }
    return res;
  }

  /**
   * Follows redirects from `url` until `stop(url)` says the next hop is for the caller (the
   * gateway's callback, say), logging in as `login` and consenting on the way. Returns that URL.
   */
  async authorize(url: string, login: string, stop: (url: string) => boolean): Promise<string> {
    let next = url;
    for (let hops = 0; hops < 20; hops++) {
      if (stop(next)) return next;
      const res = await this.request(next);
      if (res.status >= 300 && res.status < 400) {
        next = new URL(res.headers.get("location")!, next).href;
        continue;
      }
      const html = await res.text();
      if (res.status !== 200) throw new Error(`provider answered ${res.status}: ${html.slice(0, 300)}`);
      const submitted = await this.submitForm(next, html, { login, password: "any" });
      next = new URL(submitted.headers.get("location")!, next).href;
    }
    throw new Error("too many redirects");
  }

  /** Submits the page's first POST form: its hidden inputs plus `fields` for the named ones. */
  async submitForm(pageUrl: string, html: string, fields: Record<string, string>): Promise<Response> {
    const form = /<form[^>]*action="([^"]*)"[^>]*method="post"[^>]*>([\s\S]*?)<\/form>/i.exec(html);
    if (!form) throw new Error(`no form on ${pageUrl}: ${html.slice(0, 300)}`);
    const body = new URLSearchParams();
    for (const input of form[2].matchAll(/<input([^>]*)>/gi)) {
      const name = /name="([^"]*)"/.exec(input[1])?.[1];
      if (!name) continue;
      body.set(name, fields[name] ?? /value="([^"]*)"/.exec(input[1])?.[1] ?? "");
    }
    return this.request(new URL(form[1].replace(/&amp;/g, "&"), pageUrl).href, {
      method: "POST",
      body: body.toString(),
      headers: { "content-type": "application/x-www-form-urlencoded" },
    });
  }
}
