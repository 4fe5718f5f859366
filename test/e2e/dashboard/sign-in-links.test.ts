import { expect } from "chai";
import type { Browser, Page } from "playwright-core";
import { type Hex, getAddress } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { type SandboxedContext, launchBrowser, openSandboxedContext, screenshotPage } from "../../helpers/browser";
import { type TestStack, startStack } from "../../helpers/gateway";
import { sameOrigin, send } from "../../helpers/session";
import { expectHeading, signInByEmail, textOf, until } from "./pages";
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

  it("answers a used link with a page that asks for a new one, not with JSON", async () => {
    await page.goto(await mailedSignInLink(stack.gw.db, "ada@example.com"));
    await expectHeading(page, "E-mail sign-in");
    await page.getByTestId("email-link-unusable").waitFor();
    await screenshotPage(page, "email-link-used");
    await page.getByTestId("email-input").fill("ada@example.com");
    await page.getByTestId("email-submit").click();
    await textOf(page.getByTestId("email-sent"));
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
});
