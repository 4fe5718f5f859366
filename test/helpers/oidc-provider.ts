import http from "node:http";
import type { AddressInfo } from "node:net";

/**
 * A real OAuth 2 / OpenID Connect provider on 127.0.0.1, for the sign-in tests:
 * `oidc-provider` (panva, the certified implementation), not a fake of the protocol. Its
 * development login and consent pages are driven by `Browser` below, the way a person
 * would click through them. Anyone who types a login is that user: the login is the
 * subject, and `<login>@example.test` the e-mail claim.
 *
 * It stands in for GitHub too: a `/user` route answers GitHub's shape ({id, login}) for an
 * access token the provider itself issued.
 */
export interface LocalProvider {
  issuer: string;
  /** Starts answering, with these clients registered (their redirect URIs may name a server started after `issuer` was known). */
  serve(clients: LocalClient[]): void;
  close(): Promise<void>;
}

export interface LocalClient {
  client_id: string;
  client_secret: string;
  redirect_uris: string[];
}

/** Listens on 127.0.0.1 port 0 at once, so the issuer is known before the clients are. */
export async function startLocalProvider(): Promise<LocalProvider> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    issuer,
    serve(clients) {
      server.on("request", createProvider(issuer, clients).callback());
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function createProvider(issuer: string, clients: LocalClient[]) {
  // oidc-provider is ESM-only; Node 20.19+ loads it through require(). Its notices (Node 22
  // preferred, development keys and adapter in use) are about production, not these tests.
  const { warn, info } = console;
  console.warn = console.info = () => {};
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { Provider } = require("oidc-provider") as typeof import("oidc-provider");
    const minutes = (n: number) => n * 60;
    const provider = new Provider(issuer, {
      clients: clients.map((c) => ({ ...c, grant_types: ["authorization_code"], response_types: ["code"] })),
      scopes: ["openid", "email", "profile", "read:user"],
      claims: { openid: ["sub"], email: ["email", "email_verified"], profile: ["name"] },
      // Put the e-mail into the ID token, the way Google does.
      conformIdTokenClaims: false,
      pkce: { required: () => true },
      features: { devInteractions: { enabled: true } },
      ttl: { AccessToken: minutes(10), AuthorizationCode: minutes(1), IdToken: minutes(10), Interaction: minutes(10), Session: minutes(10), Grant: minutes(10) },
      async findAccount(_ctx, sub) {
        return {
          accountId: sub,
          async claims() {
            return { sub, email: `${sub}@example.test`, email_verified: true, name: `User ${sub}` };
          },
        };
      },
    });
    // GitHub's GET /user: the token's user as {id, login}, for a token this provider issued.
    provider.use(async (ctx, next) => {
      if (ctx.path !== "/user") return next();
      const token = /^Bearer (.+)$/.exec(ctx.get("authorization"))?.[1];
      const found = token ? await provider.AccessToken.find(token) : undefined;
      if (!found) {
        ctx.status = 401;
        ctx.body = { message: "Bad credentials" };
        return;
      }
      ctx.body = { id: Number.parseInt(found.accountId, 36), login: found.accountId };
    });
    return provider;
  } finally {
    Object.assign(console, { warn, info });
  }
}

/**
 * A browser enough for sign-in flows: follows redirects by hand, keeps each origin's
 * cookies, and can submit the form a page shows (hidden fields kept, others filled in).
 */
export class Browser {
  private readonly jars = new Map<string, Map<string, string>>();

  cookies(url: string): Map<string, string> {
    const origin = new URL(url).origin;
    let jar = this.jars.get(origin);
    if (!jar) this.jars.set(origin, (jar = new Map()));
    return jar;
  }

  /** One request, no redirect followed; remembers the cookies it sets. */
  async request(url: string, init: { method?: string; body?: URLSearchParams | string; headers?: Record<string, string> } = {}): Promise<Response> {
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
