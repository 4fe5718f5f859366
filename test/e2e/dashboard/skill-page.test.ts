import { expect } from "chai";
import type { Browser, Locator, Page } from "playwright-core";
import { type SandboxedContext, WIDTHS_PX, launchBrowser, openSandboxedContext, screenshotPage } from "../../helpers/browser";
import { setDisplayName } from "../../../server/identity/display-name-store";
import { type TestStack, startStack } from "../../helpers/gateway";
import { accountIdOf, baseUnits, expectHeading, navigate, signInByEmail, textOf, until } from "./pages";
import { mailedSignInLink } from "./stack";

/**
 * The skill page and the Marketplace of issue 16 in a real browser (Chromium), on a gateway
 * without a chain (a paid call needs none: the balance is credited in the ledger): "try it"
 * shows only the latest attempt, an input mistake is said next to the form and in view, an
 * answer says what it cost and what is left, a slow call shows its progress, a 402 leads to
 * the Wallet, the page has a skeleton while it loads, and search reads descriptions and sellers.
 */
describe("the skill page and the Marketplace search, in a real browser", function () {
  this.timeout(60_000);
  let stack: TestStack;
  let browser: Browser;
  let person: SandboxedContext;
  let page: Page;
  let accountId: string;

  const weather = {
    slug: "weather-now",
    name: "Weather Now",
    priceMicros: 2_500n,
    description: "Current `weather` for a city: the forecast, echoed back by the test backend.",
  };
  const origin = () => new URL(stack.url).origin;
  const skillPage = async (slug: string, heading: string) => {
    await page.goto(`${origin()}/marketplace/${slug}`);
    await expectHeading(page, heading);
  };

  /** Whether the element is drawn wholly inside the viewport: where the eye is, without scrolling. */
  const inViewport = async (locator: Locator): Promise<boolean> => {
    const box = await locator.boundingBox();
    const viewport = page.viewportSize()!;
    return box !== null && box.x >= 0 && box.y >= 0 && box.x + box.width <= viewport.width && box.y + box.height <= viewport.height;
  };

  /** The result line's charge and balance, in base units, once an answer is shown. */
  const chargeShown = async (): Promise<{ charged: bigint; balance: bigint }> => {
    const text = await textOf(page.getByTestId("try-charge"), /balance/);
    const match = /^(?:Charged (\S+)|Not charged) · balance (\S+)$/.exec(text);
    if (!match) throw new Error(`unexpected charge line: ${text}`);
    return { charged: match[1] ? baseUnits(match[1]) : 0n, balance: baseUnits(match[2]) };
  };

  before(async () => {
    stack = await startStack({ buyerUsd: "0" });
    await stack.addSkill(weather.slug, "/echo", {
      name: weather.name,
      description: weather.description,
      priceMicros: weather.priceMicros,
      inputSchema: {
        type: "object",
        properties: {
          city: { type: "string", description: "A city's name, like `Lisbon`.", examples: ["Lisbon"] },
          days: { type: "integer", minimum: 1, default: 1 },
        },
        required: ["city"],
      },
    });
    await stack.gw.ledger.ensureAccount({ id: "seller-2", kind: "seller", name: "seller-2@example.com" });
    // The marketplace names a seller by the display name it chose, never by its account's name.
    await setDisplayName(stack.gw.db, "seller-2", "Marigold Labs");
    await stack.addSkill("haiku-writer", "/echo", {
      name: "Haiku Writer",
      description: "Writes a short poem.",
      sellerAccountId: "seller-2",
    });
    await stack.addSkill("pricey", "/echo", {
      name: "Pricey",
      priceMicros: 50_000_000n,
      description: '<img src=x data-pwned="1"> uses `<b>raw</b>`',
    });

    browser = await launchBrowser();
    person = await openSandboxedContext(browser, stack.url);
    page = person.page;
    await signInByEmail(page, { origin: origin(), signInLink: (email) => mailedSignInLink(stack.gw.db, email) }, "taster@example.com");
    accountId = await accountIdOf(page);
    await stack.gw.ledger.credit(accountId, 1_000_000n, "dev_credit", "test");
    await stack.gw.db.durable();
    await navigate(page, "API Keys");
    await page.getByTestId("key-name").fill("agent");
    await page.getByTestId("key-create").click();
    await page.getByTestId("new-key").waitFor();
  });
  after(async () => {
    await browser?.close();
    await stack?.close();
  });

  it("shows a skeleton, never a blank page, until the skill arrives", async () => {
    let release = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    await page.route(`**/v1/skills/${weather.slug}`, async (route) => {
      await held;
      await route.fallback();
    });
    try {
      await page.goto(`${origin()}/marketplace/${weather.slug}`);
      await page.getByTestId("skill-skeleton").waitFor({ state: "visible" });
      expect(await page.getByTestId("skill-skeleton").getAttribute("aria-busy")).to.equal("true");
      expect(await page.locator("h1").count()).to.equal(0);
      release();
      await expectHeading(page, weather.name);
      expect(await page.getByTestId("skill-skeleton").count()).to.equal(0);
    } finally {
      release();
      await page.unroute(`**/v1/skills/${weather.slug}`);
    }
  });

  for (const [label, widthPx] of Object.entries(WIDTHS_PX))
    it(`at ${widthPx} px (${label}), "try it" shows only the latest attempt: the prefilled form's call, a JSON mistake beside the form, a 400, then a success`, async () => {
      await page.setViewportSize({ width: widthPx, height: 800 });
      await skillPage(weather.slug, weather.name);
      // "Try it" comes before the schema and the curl examples.
      const top = async (testid: string) => (await page.getByTestId(testid).boundingBox())!.y;
      const order = [await top("try-submit"), await top("skill-schema"), await top("curl-call")];
      expect(order[0]).to.be.below(order[1]).and.below(order[2]);

      // The form from the schema, prefilled from its example: sent as is.
      expect(await page.getByTestId("try-field-city").inputValue()).to.equal("Lisbon");
      expect(await page.getByTestId("try-fields").textContent())
        .to.include("city *")
        .and.include("A city's name, like Lisbon.");
      expect(await page.getByTestId("try-fields").locator("code").first().textContent()).to.equal("Lisbon");
      await page.getByTestId("try-submit").click();
      expect(await textOf(page.getByTestId("try-status"))).to.equal("HTTP 200");
      expect(await textOf(page.getByTestId("try-result"), /Lisbon/)).to.include('"city": "Lisbon"');
      const first = await chargeShown();
      expect(first.charged).to.equal(weather.priceMicros);
      expect(first.balance).to.equal(await stack.available(accountId));
      expect(await textOf(page.getByTestId("try-latency"))).to.match(/^\d+(\.\d+)? ms$/);
      expect(await page.getByTestId("try-call-id").getAttribute("data-value")).to.match(/^[0-9a-f-]{36}$/);

      // Bad JSON: said next to the form, in view, announced; the last answer is gone.
      await page.getByTestId("try-mode-json").click();
      expect(JSON.parse(await page.getByTestId("try-input").inputValue())).to.deep.equal({ city: "Lisbon", days: 1 });
      await page.getByTestId("try-input").fill('{"city": ');
      await page.getByTestId("try-submit").click();
      const error = page.getByTestId("try-error");
      expect(await textOf(error)).to.match(/^The input is not valid JSON/);
      expect(await error.getAttribute("role")).to.equal("alert");
      expect(await inViewport(error)).to.equal(true);
      expect(await page.getByTestId("try-input").getAttribute("aria-invalid")).to.equal("true");
      expect(await page.getByTestId("try-output").isVisible()).to.equal(false);
      expect(await page.getByTestId("try-status").count()).to.equal(0);
      expect(await page.getByTestId("error-banner").isVisible()).to.equal(false);

      // A 400 from the gateway: only its answer shows, the JSON mistake is gone.
      await page.getByTestId("try-input").fill('{"city": 5}');
      await page.getByTestId("try-submit").click();
      expect(await textOf(page.getByTestId("try-status"))).to.equal("HTTP 400");
      expect(await error.isVisible()).to.equal(false);
      expect(await page.getByTestId("try-input").getAttribute("aria-invalid")).to.equal(null);
      expect(await textOf(page.getByTestId("try-result"))).to.match(/city/);
      expect((await chargeShown()).charged).to.equal(0n);
      expect(await page.getByTestId("error-banner").isVisible()).to.equal(false);

      // A valid call: only the success, with what it cost, the balance left and the latency.
      await page.getByTestId("try-input").fill('{"city": "Porto"}');
      await page.getByTestId("try-submit").click();
      expect(await textOf(page.getByTestId("try-status"), /200/)).to.equal("HTTP 200");
      expect(await textOf(page.getByTestId("try-result"), /Porto/)).to.include("Porto");
      const last = await chargeShown();
      expect(last.charged).to.equal(weather.priceMicros);
      expect(last.balance).to.equal(await stack.available(accountId));
      expect(await textOf(page.getByTestId("try-latency"))).to.match(/ ms$/);
      expect(await error.isVisible()).to.equal(false);
      expect(await page.locator(".try-message").count()).to.equal(0);
      expect(await inViewport(page.getByTestId("try-status"))).to.equal(true);

      // The price leads: the seller's name is never the larger of the two.
      const fontSizePx = async (testid: string) =>
        (await page.evaluate(`parseFloat(getComputedStyle(document.querySelector('[data-testid="${testid}"]')).fontSize)`)) as number;
      const sizes = [await fontSizePx("skill-price"), await fontSizePx("skill-seller")];
      expect(sizes[1]).to.be.at.most(sizes[0]);
      expect(await textOf(page.getByTestId("skill-seller"))).to.equal("Seller One");
      expect((await page.evaluate("document.documentElement.scrollWidth")) as number).to.be.at.most(widthPx);
      if (label === "phone") await screenshotPage(page, "skill-try");
    });

  it("shows a slow call's progress: a spinner and the seconds counted on a disabled button", async () => {
    await page.setViewportSize({ width: WIDTHS_PX.desktop, height: 800 });
    await skillPage(weather.slug, weather.name);
    let release = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    await page.route(`**/v1/skills/${weather.slug}/try`, async (route) => {
      await held;
      await route.fallback();
    });
    try {
      const submit = page.getByTestId("try-submit");
      await submit.click();
      // The count moves: a frozen label would not reach 0.3 s.
      expect(await textOf(submit, /^Calling… (0\.[3-9]|[1-9]\d*\.\d) s$/)).to.match(/ s$/);
      expect(await submit.isDisabled()).to.equal(true);
      expect(await submit.locator(".spinner").isVisible()).to.equal(true);
      release();
      expect(await textOf(page.getByTestId("try-status"))).to.equal("HTTP 200");
      expect(await textOf(submit)).to.equal("Call for $0.0025");
      expect(await submit.isEnabled()).to.equal(true);
    } finally {
      release();
      await page.unroute(`**/v1/skills/${weather.slug}/try`);
    }
  });

  it("answers a 402 with the gateway's words and a link to the Wallet page", async () => {
    await skillPage("pricey", "Pricey");
    // No schema: the JSON editor is the form, prefilled with an empty object.
    expect(await page.getByTestId("try-mode-json").count()).to.equal(0);
    await page.getByTestId("try-submit").click();
    expect(await textOf(page.getByTestId("try-status"))).to.equal("HTTP 402");
    expect(await textOf(page.getByTestId("try-result"))).to.match(/balance/i);
    await page.getByTestId("try-wallet-link").click();
    await expectHeading(page, "Wallet");
  });

  it("finds skills by a word of their description and by their seller's name, and shows descriptions' code as code, never as HTML", async () => {
    const search = page.getByTestId("skill-search");
    const shown = () =>
      page
        .getByTestId("skill-card")
        .filter({ visible: true })
        .evaluateAll((cards) => cards.map((card) => card.getAttribute("data-slug")));
    // The first word is typed while the list is still loading: it applies once the list is there.
    let release = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    await page.route("**/v1/skills", async (route) => {
      await held;
      await route.fallback();
    });
    try {
      await navigate(page, "Marketplace");
      await search.fill("forecast");
      release();
      await until(`only ${weather.slug} to match "forecast"`, shown, (slugs) => slugs.length === 1 && slugs[0] === weather.slug);
    } finally {
      release();
      await page.unroute("**/v1/skills");
    }
    await search.fill("marigold");
    await until(`only haiku-writer to match "marigold"`, shown, (slugs) => slugs.length === 1 && slugs[0] === "haiku-writer");
    await search.fill("");
    const weatherCard = page.locator(`[data-testid="skill-card"][data-slug="${weather.slug}"]`);
    expect(await weatherCard.locator(".description code").textContent()).to.equal("weather");
    const pricey = page.locator('[data-testid="skill-card"][data-slug="pricey"]');
    expect(await pricey.locator("img").count()).to.equal(0);
    expect(await pricey.locator(".description").textContent()).to.equal('<img src=x data-pwned="1"> uses <b>raw</b>');
    expect(await pricey.locator(".description code").textContent()).to.equal("<b>raw</b>");
    await screenshotPage(page, "marketplace-search");
  });

  it("shows each skill's measured quality on its card and its page, and orders the Marketplace by success rate and by price", async () => {
    // Two skills the gateway measures from its own calls: one that always answers, one whose backend failed twice in 20.
    await stack.addSkill("steady", "/delay", { name: "Steady", priceMicros: 2_000n });
    await stack.addSkill("flaky", "/delay", { name: "Flaky", priceMicros: 1_000n });
    const buyer = await stack.addBuyer("5");
    for (let i = 0; i < 20; i++) {
      expect((await stack.post("/v1/call", { skill_id: "steady", input: {} }, { key: buyer.key })).status).to.equal(200);
      const failing = i < 2;
      const flaky = await stack.post("/v1/call", { skill_id: "flaky", input: failing ? { status: 500 } : {} }, { key: buyer.key });
      expect(flaky.status).to.equal(failing ? 502 : 200);
    }
    stack.gw.quality.refresh();

    await page.goto(`${origin()}/marketplace`);
    await expectHeading(page, "Marketplace");
    const card = (slug: string) => page.locator(`[data-testid="skill-card"][data-slug="${slug}"]`);
    expect(await textOf(card("steady").getByTestId("skill-quality"))).to.match(/^100% of 20 calls · p95 [\d,.]+ ms$/);
    expect(await textOf(card("flaky").getByTestId("skill-quality"))).to.match(/^90% of 20 calls · p95 [\d,.]+ ms$/);
    expect(await textOf(card("pricey").getByTestId("skill-quality"))).to.equal("Too few calls this week to measure");

    const shownOrder = async () =>
      await page.getByTestId("skill-card").evaluateAll((cards) => cards.map((c) => c.getAttribute("data-slug")));
    const before = (order: (string | null)[], first: string, second: string) => order.indexOf(first) < order.indexOf(second);
    await page.getByTestId("skill-sort").selectOption("success");
    let order = await shownOrder();
    expect(before(order, "steady", "flaky"), order.join(" ")).to.equal(true);
    // Unmeasured is not better: a skill without figures comes after both.
    expect(before(order, "flaky", "pricey"), order.join(" ")).to.equal(true);
    await page.getByTestId("skill-sort").selectOption("price");
    order = await shownOrder();
    expect(before(order, "flaky", "steady"), order.join(" ")).to.equal(true);
    expect(order[order.length - 1]).to.equal("pricey");

    await skillPage("flaky", "Flaky");
    expect(await textOf(page.getByTestId("skill-quality"))).to.match(/90%/);
  });

  it("reached nothing but the gateway and threw no script error", () => {
    expect(person.blocked).to.deep.equal([]);
    expect(person.pageErrors).to.deep.equal([]);
  });
});
