import { expect } from "chai";
import type { Browser, Page } from "playwright-core";
import { type Hex, getAddress } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { type SandboxedContext, WIDTHS_PX, launchBrowser, openSandboxedContext, screenshotPage } from "../../helpers/browser";
import { type TestStack, startStack } from "../../helpers/gateway";
import { sameOrigin, send } from "../../helpers/session";
import { expectHeading, navigate, signInByEmail, textOf, until } from "./pages";
import { mailedSignInLink } from "./stack";

/**
 * The sign-in pages of issue 10 in a real browser (Chromium), on a gateway without a chain
 * (these pages need none): a mailed link opens a page and only its button signs in; a used
 * link gets a page with the way to a new one; a browser signed in to one account is switched
 * to another only when the person chooses to, for e-mail links, wallets, and GitHub/Google.
 */
describe("the dashboard's sign-in pages, in a real browser", function () {
  this.timeout(60_000);
  let stack: TestStack;
  let browser: Browser;
  let person: SandboxedContext;
  let page: Page;
  const wallet = privateKeyToAccount(`0x${"7c".repeat(32)}`);
  /** What the page asked the injected wallet for, in order. */
  const asked: string[] = [];

  const origin = () => new URL(stack.url).origin;
  const dashboard = () => ({ origin: origin(), signInLink: (email: string) => mailedSignInLink(stack.gw.db, email) });
  /** Who the browser profile is signed in as: the account's name, or null. */
  const whoAmI = async (): Promise<string | null> => {
    const res = await page.request.get(`${origin()}/v1/me`);
    return res.status() === 200 ? ((await res.json()) as { data: { name: string } }).data.name : null;
  };
  const mailLink = async (email: string) => {
    await send(`${stack.url}/auth/email/start`, "POST", sameOrigin(stack), { email });
    return mailedSignInLink(stack.gw.db, email);
  };
  /** Whether the element is shown whole inside the window, as a person would see it without scrolling. */
  const inView = async (target: Page, testid: string) => {
    const box = await target.getByTestId(testid).boundingBox();
    const size = target.viewportSize()!;
    return box !== null && box.x >= 0 && box.y >= 0 && box.x + box.width <= size.width && box.y + box.height <= size.height;
  };
  /** The texts of the alerts a page shows (role=alert and not hidden): none before the visitor does anything. */
  const alertsShown = (target: Page) =>
    target
      .locator("[role=alert]")
      .evaluateAll((all) =>
        all.filter((e) => !(e as unknown as { hidden: boolean }).hidden && (e.textContent ?? "").trim() !== "").map((e) => e.textContent),
      );

  before(async () => {
    // Every step here is a sign-in request from 127.0.0.1: room for all of them in one minute.
    stack = await startStack({ config: { signInRateLimitPerMin: 1_000 } });
    browser = await launchBrowser();
    person = await openSandboxedContext(browser, stack.url);
    page = person.page;
    // A browser wallet, as in ./siwe.test.ts: the key lives in this process.
    await person.context.exposeFunction("__testWallet", async (method: string, params: unknown[] = []) => {
      asked.push(method);
      if (method === "eth_requestAccounts" || method === "eth_accounts") return [wallet.address];
      if (method === "personal_sign") {
        const [data, address] = params as [Hex, string];
        if (getAddress(address) !== wallet.address) throw new Error("personal_sign for an account this wallet does not hold");
        return wallet.signMessage({ message: { raw: data } });
      }
      throw Object.assign(new Error(`unsupported method ${method}`), { code: 4200 });
    });
    await person.context.addInitScript(() => {
      const call = (globalThis as unknown as { __testWallet(method: string, params?: unknown[]): Promise<unknown> }).__testWallet;
      (globalThis as unknown as { ethereum: unknown }).ethereum = {
        request: ({ method, params }: { method: string; params?: unknown[] }) => call(method, params),
      };
    });
  });
  after(async () => {
    await browser?.close();
    await stack?.close();
  });

  it("greets a visitor without a wallet with what the product is and the e-mail sign-in, and no error, at desktop and phone width", async () => {
    const visitor = await openSandboxedContext(browser, stack.url);
    try {
      const first = visitor.page;
      for (const width of [WIDTHS_PX.desktop, WIDTHS_PX.phone]) {
        await first.setViewportSize({ width, height: 800 });
        await first.goto(`${origin()}/signin`);
        await expectHeading(first, "Sign in");
        expect(await textOf(first.getByTestId("product-line"))).to.match(
          /paid gateway for AI-agent skills.*one API key.*pay per call in USDC/,
        );
        expect(await inView(first, "product-line"), `the product line in view at ${width} px`).to.equal(true);
        expect(await inView(first, "email-input"), `the e-mail field in view at ${width} px`).to.equal(true);
        expect(await alertsShown(first), `alerts at ${width} px`).to.deep.equal([]);
        // The e-mail link leads; the wallet is offered, quietly, below.
        expect(await first.getByTestId("signin-card").locator(".btn-primary").getAttribute("data-testid")).to.equal("email-submit");
        expect(await first.getByTestId("siwe-button").getAttribute("class")).to.not.contain("btn-primary");
        expect(await first.getByTestId("email-submit").textContent()).to.equal("Email me a sign-in link");
      }
      await first.setViewportSize({ width: WIDTHS_PX.desktop, height: 800 });
      await screenshotPage(first, "signin-first-visit");

      // Errors come only from what the visitor does, next to it, in view at phone width.
      await first.setViewportSize({ width: WIDTHS_PX.phone, height: 800 });
      await first.getByTestId("email-submit").click();
      expect(await textOf(first.getByTestId("email-error"))).to.equal("Enter your e-mail address.");
      expect(await first.getByTestId("email-input").getAttribute("aria-invalid")).to.equal("true");
      expect(await first.evaluate("document.activeElement?.getAttribute('data-testid')")).to.equal("email-input");
      expect(await inView(first, "email-error")).to.equal(true);
      await first.getByTestId("siwe-button").click();
      expect(await textOf(first.getByTestId("siwe-error"))).to.match(/^No browser wallet found/);
      await first.getByTestId("siwe-error").scrollIntoViewIfNeeded();
      expect(await inView(first, "siwe-error")).to.equal(true);
      expect(visitor.pageErrors).to.deep.equal([]);
    } finally {
      await visitor.context.close();
    }
  });

  it("offers a browser wallet's sign-in first, as the primary button, when the browser has one", async () => {
    await page.goto(`${origin()}/signin`);
    await expectHeading(page, "Sign in");
    const primary = await page
      .getByTestId("signin-card")
      .locator(".btn-primary")
      .evaluateAll((all) => all.map((e) => e.getAttribute("data-testid")));
    expect(primary).to.deep.equal(["siwe-button"]);
    expect(await page.getByTestId("siwe-button").textContent()).to.equal("Sign in with your browser wallet");
    expect(await alertsShown(page)).to.deep.equal([]);
    expect(asked, "nothing is asked of the wallet before the person presses its button").to.deep.equal([]);
  });

  it("signs in only when the person presses the link page's button", async () => {
    const link = await mailLink("ada@example.com");
    await page.goto(link);
    await expectHeading(page, "E-mail sign-in");
    expect(await textOf(page.getByTestId("email-link-confirm"))).to.equal("Sign up as ada@example.com");
    await screenshotPage(page, "email-link");
    expect(await whoAmI()).to.equal(null);
    await page.getByTestId("email-link-confirm").click();
    await until(
      "the wallet page",
      () => new URL(page.url()).pathname,
      (path) => path === "/wallet",
    );
    expect(await whoAmI()).to.equal("ada@example.com");
  });

  it("answers a used link with a page that says so and asks for a new one, not with JSON", async () => {
    const used = await mailedSignInLink(stack.gw.db, "ada@example.com");
    // Opened as the link, and as the verify address a person might paste: the same page either way.
    for (const address of [used, used.replace("/auth/email/callback", "/auth/email/verify")]) {
      const response = await page.goto(address);
      expect(response!.headers()["content-type"]).to.match(/^text\/html/);
      await expectHeading(page, "E-mail sign-in");
      expect(new URL(page.url()).pathname).to.equal("/auth/email/callback");
      expect(await textOf(page.getByTestId("email-link-why"))).to.equal(
        "This sign-in link was used already: each link signs in once. Ask for a new one.",
      );
    }
    // The ways on: the form (filled with the address known here), the sign-in page, and the account this browser is in.
    expect(await page.getByTestId("email-input").inputValue()).to.equal("ada@example.com");
    expect(await page.getByTestId("email-link-signin").getAttribute("href")).to.equal("/signin");
    expect(await textOf(page.getByTestId("email-link-signed-in"))).to.match(/signed in already, as ada@example\.com/);
    await screenshotPage(page, "email-link-used");
    await page.getByTestId("email-submit").click();
    await textOf(page.getByTestId("email-sent"), /sign-in link is on its way/);
    // The new link works.
    const fresh = await mailedSignInLink(stack.gw.db, "ada@example.com");
    expect(fresh).to.not.equal(used);
    await page.goto(fresh);
    await textOf(page.getByTestId("email-link-confirm"), /ada@example\.com/);
  });

  it("does not switch a signed-in browser to another account's link unless the person chooses to", async () => {
    const link = await mailLink("bob@example.com");
    await page.goto(link);
    await page.getByTestId("email-link-switch").waitFor();
    expect(await page.getByTestId("email-link-confirm").count()).to.equal(0);
    await screenshotPage(page, "email-link-switch");
    await page.getByTestId("email-link-stay").click();
    await until(
      "the wallet page",
      () => new URL(page.url()).pathname,
      (path) => path === "/wallet",
    );
    expect(await whoAmI()).to.equal("ada@example.com");

    // The link was left unused: the person comes back and chooses to switch.
    await page.goto(link);
    await page.getByTestId("email-link-switch").click();
    await until(
      "the wallet page",
      () => new URL(page.url()).pathname,
      (path) => path === "/wallet",
    );
    expect(await whoAmI()).to.equal("bob@example.com");
  });

  it("offers to switch to a wallet's own account, with a second signature, instead of switching silently", async () => {
    // The wallet signs in to an account of its own already.
    await stack.gw.sessions.signIn("siwe", wallet.address, { name: "wallet owner" });
    await page.goto(`${origin()}/signin`);
    await expectHeading(page, "Sign in");
    await page.getByTestId("siwe-button").click();
    expect(await textOf(page.getByTestId("siwe-error"))).to.match(/signs in to another account/);
    expect(await whoAmI()).to.equal("bob@example.com");
    asked.length = 0;
    await page.getByTestId("siwe-switch").click();
    await expectHeading(page, "Wallet");
    expect(asked).to.deep.equal(["eth_requestAccounts", "personal_sign"]);
    expect(await whoAmI()).to.equal("wallet owner");
  });

  it("explains a GitHub sign-in that met another account's session, and offers to sign out first", async () => {
    await page.goto(`${origin()}/signin/oauth?provider=github&outcome=session_exists`);
    await expectHeading(page, "Sign-in not completed");
    expect(await textOf(page.getByTestId("oauth-outcome"))).to.match(/still signed in as wallet owner/);
    await page.getByTestId("oauth-switch").waitFor();
    await page.getByTestId("oauth-stay").waitFor();
    await screenshotPage(page, "oauth-session-exists");
  });

  it("adds an address to the signed-in account from a link asked for in that session, all pages within their CSP", async () => {
    await signInByEmail(page, dashboard(), "carol@example.com");
    expect(await whoAmI()).to.equal("wallet owner");
    const owner = (await stack.gw.sessions.ownerOf("siwe", wallet.address))!;
    expect(await stack.gw.sessions.ownerOf("email", "carol@example.com")).to.equal(owner);
    expect(person.pageErrors).to.deep.equal([]);
    expect(person.blocked).to.deep.equal([]);
  });

  it("shows the account's e-mail and every linked sign-in on the Settings page, at desktop and phone width", async () => {
    await navigate(page, "Settings");
    expect(await textOf(page.getByTestId("settings-email"))).to.equal("carol@example.com");
    const linked = page.getByTestId("settings-signin");
    expect((await linked.evaluateAll((all) => all.map((e) => e.getAttribute("data-provider")))).sort()).to.deep.equal(["email", "siwe"]);
    const byEmail = linked.and(page.locator("[data-provider=email]"));
    expect(await textOf(byEmail.locator("strong"))).to.equal("E-mail");
    expect(await byEmail.textContent()).to.contain("carol@example.com");
    const byWallet = linked.and(page.locator("[data-provider=siwe]"));
    expect(await textOf(byWallet.locator("strong"))).to.equal("Browser wallet (Sign-In With Ethereum)");
    expect(await byWallet.locator("[data-value]").getAttribute("data-value")).to.equal(wallet.address);
    // The display name is PATCH /v1/account's: shown when this gateway has that route, else a note says so.
    const probe = await page.request.fetch(`${origin()}/v1/account`, { method: "PATCH", data: {} });
    if (probe.status() === 404) {
      expect(await textOf(page.getByTestId("display-name-unavailable"))).to.match(/does not let you choose a display name yet/);
    } else {
      await page.getByTestId("display-name").fill("Carol's Skills");
      await page.getByTestId("display-name-save").click();
      await textOf(page.getByTestId("display-name-saved"), /^Saved/);
    }
    const shots = await screenshotPage(page, "settings");
    expect(shots.map((shot) => shot.overflowPx)).to.deep.equal([0, 0]);
    expect(person.pageErrors).to.deep.equal([]);
  });
});
