import { expect } from "chai";
import type { Browser, Locator, Page } from "playwright-core";
import { type SandboxedContext, launchBrowser, openSandboxedContext, screenshotPage } from "../../helpers/browser";
import { amountOf, baseUnits, expectHeading, signInByEmail, textOf, until } from "./pages";
import { type DashboardStack, startDashboardStack } from "./stack";

/**
 * A first visit (issue 16): a person signs up by e-mail and lands on the Wallet page, whose
 * checklist takes them to a paid call in three clicks: test funds (the sandbox card), a key
 * (shown once, with snippets that carry it), and the call itself, whose answer is shown as an
 * agent gets it. Every click the person makes after signing up is counted.
 */
describe("a first visit, from e-mail sign-up to a paid call, in a real browser", function () {
  this.timeout(60_000);
  let dashboard: DashboardStack;
  let browser: Browser;
  let person: SandboxedContext;
  let page: Page;
  /** Every click made after the sign-up: the budget is three. */
  let clicks = 0;
  const click = async (target: Locator) => {
    clicks++;
    await target.click();
  };
  /** The echo skill of the test stack: the checklist's first call when no "uppercase" is listed. */
  const ECHO_PRICE_UNITS = 1_000n;

  before(async () => {
    dashboard = await startDashboardStack();
    browser = await launchBrowser();
    person = await openSandboxedContext(browser, dashboard.origin);
    page = person.page;
  });
  after(async () => {
    await browser?.close();
    await dashboard?.close();
  });

  it("greets a new account on its first page with the three steps, nothing done yet", async () => {
    await signInByEmail(page, dashboard, "first@example.com");
    const checklist = page.getByTestId("getting-started");
    await textOf(checklist.locator("h2"), "Get started: your first paid call in three steps");
    expect(await checklist.locator("li.check h3").allTextContents()).to.deep.equal([
      "To do: Add test funds",
      "To do: Create an API key",
      "To do: Make a first call",
    ]);
    // The call waits for funds and a key, and says so.
    expect(await page.getByTestId("getting-started-call").isDisabled()).to.equal(true);
    await textOf(checklist.getByText("Needs funds and a key first."));
    const box = (await checklist.boundingBox())!;
    expect(box.y, "the checklist starts within the first screen").to.be.below(page.viewportSize()!.height);
    await screenshotPage(page, "getting-started");
  });

  it("makes the first paid call in three clicks, with snippets that carry the new key", async () => {
    clicks = 0;
    await click(page.getByTestId("getting-started-topup"));
    await textOf(page.getByTestId("getting-started").getByText(/^Paid: \$5(\.0+)? added to your balance\.$/));
    expect(await amountOf(page.getByTestId("balance-available"))).to.equal(5_000_000n);

    await click(page.getByTestId("getting-started-key"));
    const key = await textOf(page.getByTestId("getting-started-new-key"), /^atom_/);
    expect(await textOf(page.getByTestId("snippet-curl"))).to.contain(`Authorization: Bearer ${key}`);
    expect(await page.getByTestId("snippet-curl").textContent()).to.contain(`"skill_id":"echo"`);
    // Focus moved to the key, the one thing to copy now.
    expect(await page.evaluate("document.activeElement?.getAttribute('data-testid')")).to.equal("getting-started-new-key");

    await click(page.getByTestId("getting-started-call"));
    const charged = await textOf(page.getByTestId("getting-started-charged"), /^Charged /);
    expect(JSON.parse(await textOf(page.getByTestId("getting-started-data")))).to.deep.equal({ hello: "world" });
    const [cost, balance, latency] = charged.replace(/^Charged /, "").split(" · ");
    expect(baseUnits(cost)).to.equal(ECHO_PRICE_UNITS);
    expect(baseUnits(balance.replace(/^balance /, ""))).to.equal(5_000_000n - ECHO_PRICE_UNITS);
    expect(latency).to.match(/^\d+(\.\d)? ms$/);
    expect(clicks, "clicks from the first page after sign-up to the answer of a paid call").to.be.at.most(3);

    await textOf(page.getByTestId("getting-started").locator("h2"), "Done: your first paid call");
    await until(
      "the balance pill to follow the charge",
      async () => (await page.locator("#balance-pill").textContent()) ?? "",
      (text) => /^\$[\d.,]+ USDC$/.test(text) && baseUnits(text.replace(/ USDC$/, "")) === 5_000_000n - ECHO_PRICE_UNITS,
    );
    const usage = await page.evaluate(async () => ((await (await fetch("/v1/usage")).json()) as { data: { calls: unknown[] } }).data.calls);
    expect(usage).to.have.length(1);
    await page.evaluate("window.scrollTo(0, 0)");
    await screenshotPage(page, "getting-started-done");
  });

  it("shows the same call for the TypeScript SDK, Python, the CLI and MCP, by tabs the keyboard can move through", async () => {
    const key = await textOf(page.getByTestId("getting-started-new-key"), /^atom_/);
    await page.getByTestId("snippet-tab-curl").focus();
    for (const language of ["typescript", "python", "cli", "mcp"]) {
      await page.keyboard.press("ArrowRight");
      expect(await page.getByTestId(`snippet-tab-${language}`).getAttribute("aria-selected")).to.equal("true");
      const snippet = page.getByTestId(`snippet-${language}`);
      expect(await snippet.isVisible()).to.equal(true);
      expect(await snippet.textContent()).to.contain(key);
    }
    expect(await page.getByTestId("snippet-curl").isVisible()).to.equal(false);
  });

  it("does not show the checklist again once the account has made a call", async () => {
    // The checklist decides from the account's usage: once that answer is in, it has decided.
    const usageRead = page.waitForResponse((response) => new URL(response.url()).pathname === "/v1/usage");
    await page.reload();
    await expectHeading(page, "Wallet");
    await usageRead;
    await page.evaluate("new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))");
    expect(await page.getByTestId("getting-started").count()).to.equal(0);
    expect(person.pageErrors).to.deep.equal([]);
    expect(person.blocked).to.deep.equal([]);
  });
});
