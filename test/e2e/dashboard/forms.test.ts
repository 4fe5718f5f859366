import { expect } from "chai";
import type { Browser, Locator, Page } from "playwright-core";
import { type SandboxedContext, type Shot, WIDTHS_PX, launchBrowser, openSandboxedContext, screenshotPage } from "../../helpers/browser";
import { expectHeading, navigate, signInByEmail, textOf, until } from "./pages";
import { type DashboardStack, startDashboardStack } from "./stack";

/**
 * The dashboard's forms (issue 16, item 1 and its neighbours), as a person meets them in Chromium: each error
 * appears under the field that caused it, inside the viewport at desktop and phone width, announced
 * (role=alert, the field aria-invalid and described by it), never in the page's top banner; each field states
 * its constraint before anyone errs. And: a new skill's signing secret stays until the seller confirms copying
 * it; Claim is disabled, with its reason, at $0; the balance pill warns below $1.00.
 */
describe("the dashboard's forms, in a real browser", function () {
  this.timeout(60_000);
  let dashboard: DashboardStack;
  let browser: Browser;
  let person: SandboxedContext;
  let page: Page;
  const shots: Shot[] = [];

  before(async () => {
    dashboard = await startDashboardStack();
    browser = await launchBrowser();
    person = await openSandboxedContext(browser, dashboard.origin);
    page = person.page;
    await signInByEmail(page, dashboard, "forms@example.com");
  });
  after(async () => {
    await browser?.close();
    await dashboard?.close();
  });

  const atWidth = (widthPx: number) => page.setViewportSize({ width: widthPx, height: 800 });

  /**
   * Expects `testid`'s error line to say `expected`, inside the viewport, as an alert that describes `field`
   * (aria-describedby, aria-invalid), with nothing in the top banner.
   */
  async function expectFieldError(testid: string, expected: RegExp, field?: Locator): Promise<void> {
    const error = page.getByTestId(testid);
    await textOf(error, expected);
    expect(await error.getAttribute("role")).to.equal("alert");
    const box = (await error.boundingBox())!;
    const viewport = page.viewportSize()!;
    expect(box, `${testid} inside the ${viewport.width} px viewport`).to.satisfy(
      (b: typeof box) => b.y >= 0 && b.y + b.height <= viewport.height && b.x >= 0 && b.x + b.width <= viewport.width,
    );
    if (field) {
      expect(await field.getAttribute("aria-invalid")).to.equal("true");
      expect((await field.getAttribute("aria-describedby"))?.split(" ")).to.include(await error.getAttribute("id"));
    }
    expect(await page.getByTestId("error-banner").isVisible()).to.equal(false);
  }

  /** Scrolls to the top, as a person arriving at the page would be, then presses `button`. */
  async function pressFromTop(button: Locator): Promise<void> {
    await page.evaluate("window.scrollTo(0, 0)");
    await button.click();
  }

  for (const widthPx of [WIDTHS_PX.desktop, WIDTHS_PX.phone]) {
    it(`lists a skill priced out of range: the price's error is under it, in view, announced, at ${widthPx} px`, async () => {
      await atWidth(widthPx);
      await navigate(page, "Seller");
      const price = page.getByTestId("skill-price");
      // The bounds are stated before anyone errs.
      expect(await textOf(page.locator(".field", { has: price }).locator(".hint"), /\$0\.50/)).to.equal(
        "From $0.001 to $0.50 per call, up to 6 decimals.",
      );
      await page.getByTestId("skill-name").fill("Too Dear");
      await price.fill("2");
      await page.getByTestId("skill-backend-url").fill(`${dashboard.stack.backend.url}/echo`);
      await pressFromTop(page.getByTestId("skill-save"));
      await expectFieldError("skill-price-error", /^The price must be between \$0\.001 and \$0\.50\.$/, price);
      expect(await page.evaluate("document.activeElement?.getAttribute('data-testid')")).to.equal("skill-price");
      // Typing clears it.
      await price.fill("0.01");
      await until(
        "the price's error to clear",
        () => page.getByTestId("skill-price-error").textContent(),
        (text) => text === "",
      );
      expect(await price.getAttribute("aria-invalid")).to.equal(null);
    });
  }

  it("shows the gateway's refusal of a backend under the backend field, not in the banner", async () => {
    await atWidth(WIDTHS_PX.phone);
    await navigate(page, "Seller");
    await page.getByTestId("skill-name").fill("Inside");
    await page.getByTestId("skill-price").fill("0.01");
    const backend = page.getByTestId("skill-backend-url");
    await backend.fill("http://127.0.0.1:1/inside");
    await pressFromTop(page.getByTestId("skill-save"));
    await expectFieldError("skill-backend-url-error", /public internet/, backend);
  });

  it("lists a skill after its backend's test call, and keeps the signing secret beside the success until it is confirmed copied", async () => {
    await atWidth(WIDTHS_PX.desktop);
    await navigate(page, "Seller");
    await page.getByTestId("skill-name").fill("Form Echo");
    await page.getByTestId("skill-price").fill("0.002");
    await page.getByTestId("skill-backend-url").fill(`${dashboard.stack.backend.url}/echo`);
    await pressFromTop(page.getByTestId("skill-save"));
    expect(await textOf(page.getByTestId("skill-saved"))).to.equal('Listed "Form Echo".');
    expect(await textOf(page.getByTestId("backend-check")))
      .to.include("The backend answered the test call with HTTP 200.")
      .and.include(" ms");
    const secret = await textOf(page.getByTestId("signing-secret"), /^[0-9a-f]{64}$/);
    // The success line and the secret are in view together.
    for (const testid of ["skill-saved", "signing-secret"]) {
      const box = (await page.getByTestId(testid).boundingBox())!;
      expect(box.y + box.height, testid)
        .to.be.at.most(800)
        .and.above(0);
    }
    await shoot("seller-listed");

    // Editing a skill keeps it.
    await page.locator('[data-testid="seller-skill-row"][data-slug="form-echo"]').getByTestId("skill-edit").click();
    expect(await textOf(page.getByTestId("signing-secret"))).to.equal(secret);
    // Leaving asks first; staying keeps it.
    await page.getByRole("navigation").getByRole("link", { name: "Wallet", exact: true }).click();
    await page.getByTestId("confirm-cancel").click();
    await expectHeading(page, "Seller");
    expect(await textOf(page.getByTestId("signing-secret"))).to.equal(secret);
    // Once confirmed, it goes, and leaving asks nothing.
    await page.getByTestId("secret-confirm").click();
    await page.getByTestId("signing-secret").waitFor({ state: "detached" });
    await navigate(page, "Wallet");
  });

  it("lists a usage-priced skill: the amount is the most a call may cost, shown as up to that", async () => {
    await atWidth(WIDTHS_PX.desktop);
    await navigate(page, "Seller");
    await page.getByTestId("skill-name").fill("Form Counter");
    await page.getByTestId("skill-pricing").selectOption("usage");
    expect(await textOf(page.locator("label.field", { has: page.getByTestId("skill-price") }).locator(".field-label"))).to.equal(
      "Most a call may cost (USD)",
    );
    await page.getByTestId("skill-price").fill("0.01");
    await page.getByTestId("skill-backend-url").fill(`${dashboard.stack.backend.url}/echo`);
    await pressFromTop(page.getByTestId("skill-save"));
    expect(await textOf(page.getByTestId("skill-saved"))).to.equal('Listed "Form Counter".');
    await page.getByTestId("secret-confirm").click();
    const listed = (await (await fetch(`${dashboard.stack.url}/v1/skills/form-counter`)).json()) as { data: Record<string, unknown> };
    expect(listed.data).to.include({ pricing: "usage", max_price: 0.01 });
    expect(listed.data).to.not.have.property("price");
    expect(await textOf(page.locator('[data-testid="seller-skill-row"][data-slug="form-counter"]'))).to.include("up to $0.01");
  });

  it("disables Claim while there is nothing to claim, and says why", async () => {
    await navigate(page, "Seller");
    expect(await textOf(page.getByTestId("claim-reason"), /Nothing to claim/)).to.match(/^Nothing to claim yet/);
    expect(await page.getByTestId("claim-button").isDisabled()).to.equal(true);
    await shoot("seller");
  });

  it("warns in the balance pill below $1.00, with a link to the Wallet", async () => {
    await navigate(page, "API Keys");
    const pill = page.getByTestId("balance-pill");
    expect(await textOf(pill, /Low/)).to.equal("$0.00 USDC · Low: top up");
    await pill.getByTestId("low-balance").click();
    await expectHeading(page, "Wallet");
  });

  for (const widthPx of [WIDTHS_PX.desktop, WIDTHS_PX.phone]) {
    it(`states the top-up's bounds, and shows a bad amount and a bad card under their fields, in view, at ${widthPx} px`, async () => {
      await atWidth(widthPx);
      await page.goto(`${dashboard.origin}/wallet`);
      await expectHeading(page, "Wallet");
      const amount = page.getByTestId("card-amount");
      const card = page.getByTestId("card-number");
      expect(await textOf(page.locator(".field", { has: amount }).locator(".hint"), /minimum/)).to.equal(
        "From $1.00 (the minimum deposit) to $10,000.00, up to 2 decimals.",
      );
      await amount.fill("0.50");
      await card.fill("4242 4242 4242 4242");
      await pressFromTop(page.getByTestId("card-submit"));
      await expectFieldError("card-amount-error", /^The minimum top-up is \$1\.00/, amount);

      // A number the sandbox does not take: the gateway's refusal, under the card number.
      await amount.fill("5.00");
      await card.fill("4111 1111 1111 1111");
      await pressFromTop(page.getByTestId("card-submit"));
      await expectFieldError("card-number-error", /^That card number is not valid/, card);
    });
  }

  it("says a declined card was declined under the card number, and History keeps a trace of it", async () => {
    await atWidth(WIDTHS_PX.phone);
    await page.getByTestId("card-amount").fill("5.00");
    await page.getByTestId("card-number").fill("4000 0000 0000 0002");
    await pressFromTop(page.getByTestId("card-submit"));
    await expectFieldError("card-number-error", /^Declined \(card declined\): nothing was charged\.$/, page.getByTestId("card-number"));
    const declined = page.getByTestId("history-row").filter({ hasText: "declined" });
    expect(await textOf(declined.first(), /\$5\.00 declined/))
      .to.include("Card top-up")
      .and.include("$0.00");
    // A failure is red, on this page as on every other.
    expect(await declined.first().locator(".badge").getAttribute("class")).to.include("badge-bad");
  });

  for (const widthPx of [WIDTHS_PX.desktop, WIDTHS_PX.phone]) {
    it(`shows a withdrawal amount above the balance under the amount, in view, at ${widthPx} px`, async () => {
      await atWidth(widthPx);
      await page.goto(`${dashboard.origin}/wallet`);
      await expectHeading(page, "Wallet");
      const amount = page.getByTestId("withdraw-amount");
      await amount.fill("5");
      await page.getByTestId("withdraw-to").fill(`0x${"ab".repeat(20)}`);
      await pressFromTop(page.getByTestId("withdraw-submit"));
      await expectFieldError("withdraw-amount-error", /^Only \$0\.00 is available to withdraw\.$/, amount);
      await amount.fill("1.2.3");
      await pressFromTop(page.getByTestId("withdraw-submit"));
      await expectFieldError("withdraw-amount-error", /^Enter an amount in dollars/, amount);
    });
  }

  it("lines the Withdraw button up with the fields beside it", async () => {
    await atWidth(WIDTHS_PX.desktop);
    const input = (await page.getByTestId("withdraw-to").boundingBox())!;
    const button = (await page.getByTestId("withdraw-submit").boundingBox())!;
    expect(Math.abs(button.y - input.y), "top").to.be.at.most(1);
    expect(Math.abs(button.height - input.height), "height").to.be.at.most(1);
    await shoot("wallet");
  });

  it("shows a spending limit the gateway cannot read under the limit field", async () => {
    await navigate(page, "API Keys");
    const limit = page.getByTestId("key-limit");
    await limit.fill("five");
    await page.getByTestId("key-create").click();
    await expectFieldError("key-limit-error", /^Enter the limit in dollars/, limit);
  });

  it("links a 402 (a call the balance does not cover) to the Wallet", async () => {
    await page.getByTestId("key-name").fill("broke");
    await page.getByTestId("key-limit").fill("");
    await page.getByTestId("key-create").click();
    await page.getByTestId("new-key").waitFor();
    await page.goto(`${dashboard.origin}/marketplace/form-echo`);
    await expectHeading(page, "Form Echo");
    await page.getByTestId("try-submit").click();
    expect(await textOf(page.getByTestId("try-status"), /402/)).to.include("402");
    await page.getByTestId("try-wallet-link").click();
    await expectHeading(page, "Wallet");
  });

  it("shot its pages at desktop and phone width, none wider than a phone, with no script error", async () => {
    expect(shots.filter((shot) => shot.overflowPx > 0).map((shot) => shot.file)).to.deep.equal([]);
    expect(person.blocked).to.deep.equal([]);
    expect(person.pageErrors).to.deep.equal([]);
  });

  async function shoot(name: string): Promise<void> {
    const viewport = page.viewportSize()!;
    shots.push(...(await screenshotPage(page, name)));
    await page.setViewportSize(viewport);
  }
});
