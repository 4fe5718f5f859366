import { createHash, randomBytes } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { Config } from "../config";

/**
 * A real OAuth 2 / OpenID Connect provider on 127.0.0.1: `oidc-provider` (panva, the
 * certified implementation), not a fake of the protocol. `npm start` runs it in place of
 * GitHub and Google when no OAuth apps are configured, and the tests sign in through it.
 * Its development login and consent pages are plain HTML forms, each marked as a local
 * stand-in. Anyone who types a login is that user: the login is the subject, and
 * `<login>@example.test` the e-mail claim.
 *
 * It stands in for GitHub too: a `/user` route answers GitHub's shape ({id, login}) for an
 * access token the provider itself issued.
 *
 * oidc-provider is a devDependency: `npm install` installs it; a production install
 * (`--omit=dev`) does not, and has real OAuth apps instead.
 */
export interface LocalIdentityProvider {
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
export async function startLocalIdentityProvider(): Promise<LocalIdentityProvider> {
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

/** GitHub's numeric user id for a login: base 36 for a short alphanumeric login, else from its hash. */
export function githubIdOf(login: string): number {
  if (/^[0-9a-z]{1,10}$/i.test(login)) return Number.parseInt(login, 36);
  return createHash("sha256").update(login).digest().readUIntBE(0, 6);
}

const BANNER =
  '<div style="background:#fff3cd;border:1px solid #e0c36a;padding:8px 12px;margin:0 auto 16px;max-width:480px;font:14px sans-serif;text-align:center">' +
  "<strong>Local development sign-in.</strong> This is not GitHub or Google: a provider on this machine stands in for them under <code>npm start</code>. " +
  "Type any name to sign in as that user (the password is ignored).</div>";

function createProvider(issuer: string, clients: LocalClient[]) {
  // oidc-provider is ESM-only; Node 20.19+ loads it through require(). Its notices (Node 22
  // preferred, development keys and adapter in use) are about production, not a local stand-in.
  const { warn, info } = console;
  console.warn = console.info = () => {};
  try {
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
      ttl: {
        AccessToken: minutes(10),
        AuthorizationCode: minutes(1),
        IdToken: minutes(10),
        Interaction: minutes(10),
        Session: minutes(10),
        Grant: minutes(10),
      },
      async findAccount(_ctx, sub) {
        return {
          accountId: sub,
          async claims() {
            return { sub, email: `${sub}@example.test`, email_verified: true, name: `User ${sub}` };
          },
        };
      },
    });
    // Every page it shows says what it is.
    provider.use(async (ctx, next) => {
      await next();
      if (ctx.response.is("html") && typeof ctx.body === "string") ctx.body = ctx.body.replace(/<body>/i, (body) => body + BANNER);
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
      ctx.body = { id: githubIdOf(found.accountId), login: found.accountId };
    });
    return provider;
  } finally {
    Object.assign(console, { warn, info });
  }
}

/** What `npm start` needs of the local stand-in: its configuration settings, and a way to let the gateway's redirect URIs in. */
export interface DevIdentityProvider {
  issuer: string;
  /** The settings for loadConfig's overrides: GitHub's and Google's, or only the ones asked for. */
  settings: Partial<Config>;
  /** Registers the gateway's clients, redirecting to `/auth/{github,google}/callback` under each of these origins. */
  serve(redirectBases: string[]): void;
  stop(): Promise<void>;
}

/** Starts the local stand-in for GitHub and/or Google sign-in, with fresh client secrets. */
export async function startDevIdentityProvider(which: { github: boolean; google: boolean }): Promise<DevIdentityProvider> {
  const local = await startLocalIdentityProvider();
  const secret = () => randomBytes(24).toString("base64url");
  const github = { clientId: "local-github", clientSecret: secret() };
  const google = { clientId: "local-google", clientSecret: secret() };
  const settings: Partial<Config> = {};
  if (which.github) {
    Object.assign(settings, {
      githubClientId: github.clientId,
      githubClientSecret: github.clientSecret,
      githubAuthorizationUrl: `${local.issuer}/auth`,
      githubTokenUrl: `${local.issuer}/token`,
      githubUserUrl: `${local.issuer}/user`,
    });
  }
  if (which.google) {
    Object.assign(settings, { googleClientId: google.clientId, googleClientSecret: google.clientSecret, googleIssuer: local.issuer });
  }
  return {
    issuer: local.issuer,
    settings,
    serve(redirectBases) {
      const uris = (name: string) => redirectBases.map((base) => `${base.replace(/\/+$/, "")}/auth/${name}/callback`);
      const clients: LocalClient[] = [];
      if (which.github) clients.push({ client_id: github.clientId, client_secret: github.clientSecret, redirect_uris: uris("github") });
      if (which.google) clients.push({ client_id: google.clientId, client_secret: google.clientSecret, redirect_uris: uris("google") });
      local.serve(clients);
    },
    stop: () => local.close(),
  };
}
