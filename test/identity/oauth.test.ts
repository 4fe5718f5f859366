import { expect } from "chai";
import { SESSION_COOKIE } from "../../server/http/session-cookies";
import { OAUTH_RESULT_PATH, OAUTH_STATE_COOKIE } from "../../server/http/routes/auth-oauth";
import { type TestStack, startStack } from "../helpers/gateway";
import { signedIn } from "../helpers/session";
import { Browser, type LocalProvider, startLocalProvider } from "../helpers/oidc-provider";

/**
 * GitHub and Google sign-in against a real local OAuth 2 / OpenID Connect provider
 * (oidc-provider): Google through discovery on its issuer, GitHub through its
 * authorize/token endpoints and a GitHub-shaped /user.
 */
describe("GitHub and Google sign-in", () => {
  let provider: LocalProvider;
  let stack: TestStack;
  beforeEach(async () => {
    provider = await startLocalProvider();
    stack = await startStack({
      config: {
        googleClientId: "gateway-google",
        googleClientSecret: "google-secret",
        googleIssuer: provider.issuer,
        githubClientId: "gateway-github",
        githubClientSecret: "github-secret",
        githubAuthorizationUrl: `${provider.issuer}/auth`,
        githubTokenUrl: `${provider.issuer}/token`,
        githubUserUrl: `${provider.issuer}/user`,
      },
    });
    provider.serve([
      { client_id: "gateway-google", client_secret: "google-secret", redirect_uris: [`${stack.url}/auth/google/callback`] },
      { client_id: "gateway-github", client_secret: "github-secret", redirect_uris: [`${stack.url}/auth/github/callback`] },
    ]);
  });
  afterEach(async () => {
    await stack.close();
    await provider.close();
  });

  /** Starts a sign-in in `browser` and goes through the provider as `login`: the callback URL it is sent back to. */
  const authorize = async (browser: Browser, which: "github" | "google", login: string) => {
    const start = await browser.request(`${stack.url}/auth/${which}/start`);
    expect(start.status).to.equal(302);
    expect(browser.cookies(stack.url).has(OAUTH_STATE_COOKIE)).to.equal(true);
    const url = new URL(start.headers.get("location")!);
    expect(url.searchParams.get("code_challenge_method")).to.equal("S256");
    expect(url.searchParams.get("state")).to.have.length.above(20);
    return browser.authorize(url.href, login, (next) => next.startsWith(stack.url));
  };
  const envelope = async (res: Response) => ({ status: res.status, body: (await res.json()) as any });
  const me = async (browser: Browser) => envelope(await browser.request(`${stack.url}/v1/me`));

  it("signs in with Google: creates the account from the verified ID token and opens a session", async () => {
    const browser = new Browser();
    const res = await browser.request(await authorize(browser, "google", "ada"));
    expect(res.status).to.equal(303);
    expect(res.headers.get("location")).to.equal("/");
    expect(browser.cookies(stack.url).has(SESSION_COOKIE)).to.equal(true);
    expect(browser.cookies(stack.url).has(OAUTH_STATE_COOKIE)).to.equal(false);
    const account = await me(browser);
    expect(account.status).to.equal(200);
    expect(account.body.data.name).to.equal("ada@example.test");
    expect(account.body.data.identities.map((i: any) => [i.provider, i.subject])).to.deep.equal([["google", "ada"]]);

    // The same person again: the same account.
    const again = new Browser();
    await again.request(await authorize(again, "google", "ada"));
    expect((await me(again)).body.data.account_id).to.equal(account.body.data.account_id);
  });

  it("signs in with GitHub: the subject is GitHub's numeric user id", async () => {
    const browser = new Browser();
    const res = await browser.request(await authorize(browser, "github", "grace"));
    expect(res.status).to.equal(303);
    const account = await me(browser);
    expect(account.body.data.name).to.equal("grace");
    expect(account.body.data.identities.map((i: any) => [i.provider, i.subject])).to.deep.equal([
      ["github", String(Number.parseInt("grace", 36))],
    ]);
  });

  it("refuses a callback whose state is not the one this browser started with (401)", async () => {
    const browser = new Browser();
    const callback = new URL(await authorize(browser, "google", "ada"));
    const forged = new URL(callback);
    forged.searchParams.set("state", "x".repeat(43));
    const res = await envelope(await browser.request(forged.href));
    expect(res.status).to.equal(401);
    expect(res.body).to.include({ success: false, code: "sign_in_failed" });
    expect(browser.cookies(stack.url).has(SESSION_COOKIE)).to.equal(false);
    // The state was not consumed by the forgery, but the browser's state cookie is gone:
    // the real callback, from another browser, is refused too.
    const elsewhere = await envelope(await new Browser().request(callback.href));
    expect(elsewhere.status).to.equal(401);
    expect(Number(await stack.gw.ledger.db.value("SELECT COUNT(*) FROM identities"))).to.equal(0);
  });

  it("refuses a replayed callback and a replayed code (401), signing in only once", async () => {
    const browser = new Browser();
    const callback = await authorize(browser, "google", "ada");
    const state = browser.cookies(stack.url).get(OAUTH_STATE_COOKIE)!;
    expect((await browser.request(callback)).status).to.equal(303);

    // The same callback again, state cookie and all: the state was used up.
    browser.cookies(stack.url).set(OAUTH_STATE_COOKIE, state);
    const replay = await envelope(await browser.request(callback));
    expect(replay.status).to.equal(401);
    expect(replay.body.code).to.equal("sign_in_failed");

    // The old code under a fresh, valid state: the provider refuses a code used once
    // (and the fresh PKCE verifier does not match it either).
    const attacker = new Browser();
    const start = await attacker.request(`${stack.url}/auth/google/start`);
    const freshState = new URL(start.headers.get("location")!).searchParams.get("state")!;
    const reused = new URL(callback);
    reused.searchParams.set("state", freshState);
    const exchanged = await envelope(await attacker.request(reused.href));
    expect(exchanged.status).to.equal(401);
    expect(exchanged.body.code).to.equal("sign_in_failed");
    expect(attacker.cookies(stack.url).has(SESSION_COOKIE)).to.equal(false);
  });

  it("refuses a code that was never issued (401)", async () => {
    const browser = new Browser();
    const callback = new URL(await authorize(browser, "github", "grace"));
    callback.searchParams.set("code", "made-up-code");
    const res = await envelope(await browser.request(callback.href));
    expect(res.status).to.equal(401);
    expect(res.body.code).to.equal("sign_in_failed");
  });

  it("links a second identity to the signed-in account", async () => {
    const browser = new Browser();
    await browser.request(await authorize(browser, "google", "ada"));
    const accountId = (await me(browser)).body.data.account_id;
    expect((await browser.request(await authorize(browser, "github", "ada"))).status).to.equal(303);
    const account = await me(browser);
    expect(account.body.data.account_id).to.equal(accountId);
    expect(account.body.data.identities.map((i: any) => i.provider)).to.deep.equal(["google", "github"]);
  });

  /** What a browser navigating (not a script) asks for. */
  const NAVIGATION = { accept: "text/html,application/xhtml+xml,*/*;q=0.8" };
  const states = async () => Number(await stack.gw.ledger.db.value("SELECT COUNT(*) FROM oauth_states"));

  describe("a start the person did not make here", () => {
    for (const site of ["cross-site", "same-site"]) {
      it(`refuses a start navigated to from another site (Sec-Fetch-Site: ${site}): 403 origin_refused, no state`, async () => {
        const browser = new Browser();
        const res = await envelope(await browser.request(`${stack.url}/auth/github/start`, { headers: { "sec-fetch-site": site } }));
        expect(res.status).to.equal(403);
        expect(res.body).to.include({ success: false, code: "origin_refused" });
        expect(browser.cookies(stack.url).has(OAUTH_STATE_COOKIE)).to.equal(false);
        expect(await states()).to.equal(0);
      });
    }

    it("sends a browser that was sent here from another site to the page that explains", async () => {
      const res = await new Browser().request(`${stack.url}/auth/google/start`, {
        headers: { "sec-fetch-site": "cross-site", ...NAVIGATION },
      });
      expect(res.status).to.equal(303);
      expect(res.headers.get("location")).to.equal(`${OAUTH_RESULT_PATH}?provider=google&outcome=origin_refused`);
      expect(await states()).to.equal(0);
    });

    for (const site of ["same-origin", "none"]) {
      it(`follows a start made on this site or typed in (Sec-Fetch-Site: ${site})`, async () => {
        const res = await new Browser().request(`${stack.url}/auth/github/start`, { headers: { "sec-fetch-site": site } });
        expect(res.status).to.equal(302);
      });
    }
  });

  describe("a browser already signed in", () => {
    /** A browser that started a sign-in signed out, then got `accountId`'s session before coming back. */
    const signedInMeanwhile = async (which: "github" | "google", login: string) => {
      const browser = new Browser();
      const callback = await authorize(browser, which, login);
      const victim = await signedIn(stack, "victim@example.com");
      browser.cookies(stack.url).set(SESSION_COOKIE, victim.cookie.split("=")[1]);
      return { browser, callback, victim };
    };

    it("refuses to replace the session with another account's identity at the callback (409 session_exists)", async () => {
      const { browser, callback, victim } = await signedInMeanwhile("github", "grace");
      const res = await envelope(await browser.request(callback));
      expect(res.status).to.equal(409);
      expect(res.body).to.include({ success: false, code: "session_exists" });
      expect((await me(browser)).body.data.account_id).to.equal(victim.accountId);
      expect(await stack.gw.sessions.ownerOf("github", String(Number.parseInt("grace", 36)))).to.equal(undefined);
    });

    it("sends such a browser to the page that explains, still signed in to its own account", async () => {
      const { browser, callback, victim } = await signedInMeanwhile("google", "ada");
      const res = await browser.request(callback, { headers: NAVIGATION });
      expect(res.status).to.equal(303);
      expect(res.headers.get("location")).to.equal(`${OAUTH_RESULT_PATH}?provider=google&outcome=session_exists`);
      expect((await me(browser)).body.data.account_id).to.equal(victim.accountId);
    });
  });

  it("sends a browser whose callback failed to the page that explains, not to raw JSON", async () => {
    const browser = new Browser();
    const forged = new URL(await authorize(browser, "google", "ada"));
    forged.searchParams.set("state", "x".repeat(43));
    const res = await browser.request(forged.href, { headers: NAVIGATION });
    expect(res.status).to.equal(303);
    expect(res.headers.get("location")).to.equal(`${OAUTH_RESULT_PATH}?provider=google&outcome=sign_in_failed`);
    expect(browser.cookies(stack.url).has(SESSION_COOKIE)).to.equal(false);
  });

  it("refuses to link an identity that already signs in to another account (409)", async () => {
    const other = new Browser();
    await other.request(await authorize(other, "github", "ada"));
    const browser = new Browser();
    await browser.request(await authorize(browser, "google", "ada"));
    const res = await envelope(await browser.request(await authorize(browser, "github", "ada")));
    expect(res.status).to.equal(409);
    expect(res.body.code).to.equal("identity_taken");
  });
});
