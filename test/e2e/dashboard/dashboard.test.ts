import path from "node:path";
import { expect } from "chai";
import type { Browser, Page } from "playwright-core";
import { type Hex, parseAbi } from "viem";
import { type SandboxedContext, type Shot, launchBrowser, openSandboxedContext, screenshotPage } from "../../helpers/browser";
import { accountIdOf, amountOf, expectHeading, fullValue, navigate, signInByEmail, textOf, until } from "./pages";
import { type DashboardStack, startDashboardStack } from "./stack";

const ERC20_ABI = parseAbi(["function balanceOf(address) view returns (uint256)"]);

/**
 * The dashboard (issue 6) in a real browser, Debian's Chromium, against the whole stack: a
 * local chain with the escrow and ERC-4337, the Alto bundler, the gateway and a skill backend.
 * A buyer and a seller, each in a browser profile of their own, do what the issue lists, in
 * order; each page is shot at desktop and phone width into test-artifacts/screenshots.
 */
describe("the dashboard, in a real browser", function () {
  this.timeout(60_000);
  let dashboard: DashboardStack;
  let browser: Browser;
  let buyer: SandboxedContext;
  let seller: SandboxedContext;
  let page: Page;
  const contexts = () => [buyer, seller].filter((context) => context !== undefined);
  const shots: Shot[] = [];
  const shoot = async (target: Page, name: string) => shots.push(...(await screenshotPage(target, name)));

  /** The buyer's account, as the gateway knows it once the buyer has signed in. */
  let buyerId: string;
  /** What the buyer's Wallet page shows as available, in base units, before the calls. */
  let toppedUp: bigint;

  /** A skill the test seller sells, priced so that four decimals show. */
  const weather = { slug: "weather-now", name: "Weather Now", priceMicros: 2_500n };
  const haiku = { slug: "haiku-writer", name: "Haiku Writer", price: "0.01", priceMicros: 10_000n };

  before(async () => {
    dashboard = await startDashboardStack();
    await dashboard.stack.addSkill(weather.slug, "/echo", {
      name: weather.name,
      description: "Current weather for a city, echoed back by the test backend.",
      priceMicros: weather.priceMicros,
      inputSchema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
    });
    browser = await launchBrowser();
    buyer = await openSandboxedContext(browser, dashboard.origin);
    page = buyer.page;
  });
  after(async () => {
    await browser?.close();
    await dashboard?.close();
  });

  /** Reloads the buyer's Wallet page and reads the available balance it shows. */
  const availableOnWallet = async (): Promise<bigint> => {
    await page.goto(`${dashboard.origin}/wallet`);
    await expectHeading(page, "Wallet");
    return amountOf(page.getByTestId("balance-available"));
  };

  /** Opens a skill's page from the Marketplace, by searching for it, as a person would. */
  const openSkill = async (target: Page, search: string, slug: string, name: string) => {
    await navigate(target, "Marketplace");
    await target.getByTestId("skill-search").fill(search);
    const cards = target.getByTestId("skill-card").filter({ visible: true });
    await until(
      `only the card of ${slug} to match "${search}"`,
      () => cards.evaluateAll((all) => all.map((c) => c.getAttribute("data-slug"))),
      (slugs) => slugs.length === 1 && slugs[0] === slug,
    );
    await cards.first().click();
    await expectHeading(target, name);
  };

  /** Fills and sends the skill page's "try it" form with the named key; returns the HTTP status it shows ("200"). */
  const tryIt = async (target: Page, keyName: string, input: unknown): Promise<string> => {
    const select = target.getByTestId("try-key");
    const options = await until(
      `a key named ${keyName} in the try-it form`,
      () =>
        select
          .locator("option")
          .evaluateAll((all) => all.map((o) => ({ value: o.getAttribute("value") ?? "", text: o.textContent ?? "" }))),
      (all) => all.some((o) => o.text.includes(keyName)),
    );
    await select.selectOption(options.find((o) => o.text.includes(keyName))!.value);
    // The form built from the schema is shown first; the raw JSON is a toggle away.
    const toJson = target.getByTestId("try-mode-json");
    if ((await toJson.count()) > 0 && (await toJson.getAttribute("aria-pressed")) !== "true") await toJson.click();
    await target.getByTestId("try-input").fill(JSON.stringify(input));
    await target.getByTestId("try-submit").click();
    return /\b\d{3}\b/.exec(await textOf(target.getByTestId("try-status"), /\b\d{3}\b/))![0];
  };

  it("says plainly that no browser wallet is present when Connect wallet is clicked without one", async () => {
    await page.goto(`${dashboard.origin}/signin`);
    await expectHeading(page, "Sign in");
    await page.getByTestId("siwe-button").click();
    expect(await textOf(page.getByTestId("siwe-error"))).to.match(/No browser wallet found/);
    await shoot(page, "signin");
  });

  it("signs in by the e-mail link from the outbox and lands on the wallet, signed in", async () => {
    await signInByEmail(page, dashboard, "buyer@example.com");
    buyerId = await accountIdOf(page);
    expect(await amountOf(page.getByTestId("balance-available"))).to.equal(0n);
    expect(await fullValue(page.getByTestId("wallet-address"))).to.match(/^0x[0-9a-fA-F]{40}$/);
  });

  it("creates an API key and shows it once, with a warning; after a reload the list shows only its prefix", async () => {
    await navigate(page, "API Keys");
    await page.getByTestId("key-name").fill("agent");
    await page.getByTestId("key-create").click();
    const key = await fullValue(page.getByTestId("new-key"));
    expect(key).to.match(/^atom_[1-9A-HJ-NP-Za-km-z]{20,}$/);
    await textOf(page.getByTestId("key-warning"));
    await page.getByTestId("key-copy").waitFor();
    await shoot(page, "keys-new-key");

    await page.reload();
    await expectHeading(page, "API Keys");
    const row = page.getByTestId("key-row");
    await textOf(row.first(), /agent/);
    expect(await row.count()).to.equal(1);
    expect(await row.first().textContent()).to.include(key.slice(0, 8));
    expect(await page.getByTestId("new-key").count()).to.equal(0);
    expect(await page.content()).not.to.include(key);
    await shoot(page, "keys");
  });

  it("tops up $10.00 with the sandbox card 4242 4242 4242 4242 and sees the available balance rise by exactly that, once the deposit is indexed", async () => {
    const before = await availableOnWallet();
    await page.getByTestId("card-amount").fill("10.00");
    await page.getByTestId("card-number").fill("4242 4242 4242 4242");
    await page.getByTestId("card-submit").click();
    await textOf(page.getByTestId("card-result"));
    // The credit is the deposit indexer's, from the escrow's Deposited event.
    await until(
      "the card deposit to be credited",
      () => dashboard.stack.available(buyerId),
      (units) => units === 10_000_000n,
    );
    toppedUp = await availableOnWallet();
    expect(toppedUp - before).to.equal(10_000_000n);
  });

  it("says a declined card 4000 0000 0000 0002 was declined, and the balance stays as it was", async () => {
    await page.getByTestId("card-amount").fill("5.00");
    await page.getByTestId("card-number").fill("4000 0000 0000 0002");
    await page.getByTestId("card-submit").click();
    expect(await textOf(page.getByTestId("card-number-error"), /declined/i)).to.equal("Declined (card declined): nothing was charged.");
    expect(await availableOnWallet()).to.equal(toppedUp);
  });

  it("refuses a card amount below the minimum deposit in plain words, under the amount", async () => {
    await page.getByTestId("card-amount").fill("0.50");
    await page.getByTestId("card-number").fill("4242 4242 4242 4242");
    await page.getByTestId("card-submit").click();
    expect(await textOf(page.getByTestId("card-amount-error"))).to.equal("The minimum top-up is $1.00 (the escrow's minimum deposit).");
    expect(await availableOnWallet()).to.equal(toppedUp);
    await shoot(page, "wallet");
  });

  it("finds a skill in the Marketplace by searching, and its page shows price, seller, schema and curl examples", async () => {
    await navigate(page, "Marketplace");
    await textOf(page.getByTestId("skill-card").first());
    await shoot(page, "marketplace");
    await openSkill(page, "weath", weather.slug, weather.name);
    expect(await textOf(page.getByTestId("skill-price"), /\$/)).to.include("$0.0025");
    expect(await textOf(page.getByTestId("skill-seller"))).to.include("Seller One");
    expect(await textOf(page.getByTestId("skill-schema"))).to.include("city");
    expect(await textOf(page.getByTestId("curl-call")))
      .to.include(`${dashboard.origin}/v1/call`)
      .and.include(weather.slug);
    expect(await textOf(page.getByTestId("curl-skill-call"))).to.include(`${dashboard.origin}/v1/skills/${weather.slug}/call`);
    await shoot(page, "marketplace-skill");
  });

  it("calls the skill from the try-it form with the new key, and the balance drops by exactly its price", async () => {
    expect(await tryIt(page, "agent", { city: "Lisbon" })).to.equal("200");
    expect(await textOf(page.getByTestId("try-result"))).to.include("Lisbon");
    expect(toppedUp - (await availableOnWallet())).to.equal(weather.priceMicros);
  });

  it("lists the call in Usage with its skill and cost, and draws the spend chart", async () => {
    await navigate(page, "Usage");
    const row = page.getByTestId("usage-row").first();
    const text = await textOf(row, new RegExp(weather.name));
    expect(text).to.include("$0.0025");
    expect(await row.getAttribute("data-call-id")).to.match(/^[0-9a-f-]{36}$/);
    const chart = page.getByTestId("spend-chart");
    await chart.waitFor();
    expect(await chart.evaluate((el) => el.tagName.toLowerCase() === "svg" || el.querySelector("svg") !== null)).to.equal(true);
    await shoot(page, "usage");
  });

  it("answers a call with a key revoked in another tab in plain words, and charges nothing", async () => {
    await navigate(page, "API Keys");
    await page.getByTestId("key-name").fill("old laptop");
    await page.getByTestId("key-create").click();
    await fullValue(page.getByTestId("new-key"));
    await openSkill(page, weather.slug, weather.slug, weather.name);
    const oldLaptop = page.getByTestId("try-key").locator("option", { hasText: "old laptop" });
    await oldLaptop.waitFor({ state: "attached" });

    const keysTab = await buyer.context.newPage();
    await keysTab.goto(`${dashboard.origin}/keys`);
    await expectHeading(keysTab, "API Keys");
    await keysTab.getByTestId("key-row").filter({ hasText: "old laptop" }).getByTestId("key-revoke").click();
    await keysTab.getByTestId("confirm-ok").click();
    await until(
      "the key to be revoked",
      () => dashboard.stack.gw.db.value("SELECT COUNT(*) FROM api_keys WHERE name = 'old laptop' AND revoked_at IS NOT NULL"),
      (n) => Number(n) === 1,
    );
    await keysTab.close();

    const before = await dashboard.stack.available(buyerId);
    expect(await tryIt(page, "old laptop", { city: "Porto" })).to.equal("404");
    expect(await textOf(page.getByTestId("try-result"))).to.match(/revoked/);
    expect(await dashboard.stack.available(buyerId)).to.equal(before);
  });

  it("gives a new key a daily spending limit, shows what it spent, refuses a call past it in plain words, and raises it", async () => {
    await navigate(page, "API Keys");
    await page.getByTestId("key-name").fill("capped");
    await page.getByTestId("key-limit").fill("0.0025");
    await page.getByTestId("key-period").selectOption("day");
    await page.getByTestId("key-create").click();
    await fullValue(page.getByTestId("new-key"));
    const capped = () => page.getByTestId("key-row").filter({ hasText: "capped" });
    expect(await textOf(capped().getByTestId("key-limit-shown"), /per day/)).to.equal("$0.0025 per day");
    expect(await textOf(capped().getByTestId("key-spent"))).to.match(/^\$0\.00/);
    expect(await textOf(capped().getByTestId("key-resets"))).to.match(/^resets /);

    await openSkill(page, weather.slug, weather.slug, weather.name);
    expect(await tryIt(page, "capped", { city: "Oslo" })).to.equal("200");
    const before = await dashboard.stack.available(buyerId);
    // A fresh page, so the status read is this call's, not the last one's.
    await openSkill(page, weather.slug, weather.slug, weather.name);
    expect(await tryIt(page, "capped", { city: "Bergen" })).to.equal("402");
    expect(await textOf(page.getByTestId("try-result"), /spending limit/)).to.match(/spending limit of \$0\.0025 per day is reached/);
    expect(await dashboard.stack.available(buyerId)).to.equal(before);

    await navigate(page, "API Keys");
    expect(await textOf(capped().getByTestId("key-spent"), /0025/)).to.match(/^\$0\.0025/);
    await capped().getByTestId("key-edit-limit").click();
    expect(await page.getByTestId("limit-amount").inputValue()).to.equal("0.0025");
    await page.getByTestId("limit-amount").fill("0.005");
    await page.getByTestId("limit-save").click();
    expect(await textOf(capped().getByTestId("key-limit-shown"), /0\.005/)).to.equal("$0.005 per day");
    await shoot(page, "keys-limits");

    await openSkill(page, weather.slug, weather.slug, weather.name);
    expect(await tryIt(page, "capped", { city: "Bergen" })).to.equal("200");
  });

  it("lets a seller, signed in by e-mail in a browser of their own, list a skill whose backend is the test backend", async () => {
    seller = await openSandboxedContext(browser, dashboard.origin);
    await signInByEmail(seller.page, dashboard, "seller@example.com");
    const s = seller.page;
    await navigate(s, "Seller");
    await s.getByTestId("skill-name").fill(haiku.name);
    // A slug another seller has: the gateway's refusal is shown in plain words.
    await s.getByTestId("skill-slug").fill(weather.slug);
    await s.getByTestId("skill-description").fill("Writes a haiku about anything (the test backend echoes it).");
    await s.getByTestId("skill-price").fill(haiku.price);
    await s.getByTestId("skill-backend-url").fill(`${dashboard.stack.backend.url}/echo`);
    await s.getByTestId("skill-input-schema").fill(JSON.stringify({ type: "object", properties: { topic: { type: "string" } } }));
    await s.getByTestId("skill-save").click();
    expect(await textOf(s.getByTestId("skill-slug-error"))).to.match(/slug is taken/);
    await s.getByTestId("skill-slug").fill(haiku.slug);
    await s.getByTestId("skill-save").click();
    expect(await textOf(s.getByTestId("signing-secret"))).to.have.length.above(16);
    await s.locator(`[data-testid="seller-skill-row"][data-slug="${haiku.slug}"]`).waitFor();
    await shoot(s, "seller");
    // Copied: the secret may go (until then, leaving the page asks first).
    await s.getByTestId("secret-confirm").click();
  });

  it("charges the buyer exactly the new skill's price when called from the try-it form", async () => {
    const before = await availableOnWallet();
    await openSkill(page, "haiku", haiku.slug, haiku.name);
    expect(await tryIt(page, "agent", { topic: "autumn" })).to.equal("200");
    expect(await textOf(page.getByTestId("try-result"))).to.include("autumn");
    expect(before - (await availableOnWallet())).to.equal(haiku.priceMicros);
  });

  it("after a settlement batch, the seller claims the earnings on-chain and sees the transaction hash and the amount", async () => {
    const run = await dashboard.settle();
    expect(run.batch).to.be.a("number");
    const s = seller.page;
    await s.reload();
    await expectHeading(s, "Seller");
    // The fee is included in the price: the seller earns 90% of it.
    const earned = (haiku.priceMicros * 9n) / 10n;
    expect(await amountOf(s.getByTestId("earnings-claimable"))).to.equal(earned);

    await s.getByTestId("claim-button").click();
    const txHash = (await fullValue(s.getByTestId("claim-tx"))) as Hex;
    expect(txHash).to.match(/^0x[0-9a-f]{64}$/);
    const receipt = await dashboard.aa.node.publicClient.getTransactionReceipt({ hash: txHash });
    expect(receipt.status).to.equal("success");
    expect(await textOf(s.getByTestId("notice"))).to.include("$0.009");
    await until(
      "the claimed amount on the page",
      () => amountOf(s.getByTestId("earnings-claimed")),
      (units) => units === earned,
    );
    expect(await amountOf(s.getByTestId("earnings-claimable"))).to.equal(0n);

    // The USDC is in the seller's embedded wallet now.
    const me = (await (await s.request.get(`${dashboard.origin}/v1/me`)).json()) as { data: { wallet: { address: Hex } } };
    const wallet = me.data.wallet.address;
    const { usdc } = dashboard.aa.deployment;
    expect(
      await dashboard.aa.node.publicClient.readContract({ address: usdc, abi: ERC20_ABI, functionName: "balanceOf", args: [wallet] }),
    ).to.equal(earned);
    await shoot(s, "seller-claimed");
  });

  it("shot each of the six pages at desktop and phone width, and none is wider than a phone", () => {
    for (const name of ["signin", "wallet", "keys", "marketplace", "usage", "seller"]) {
      expect(shots.filter((shot) => path.basename(shot.file).startsWith(`${name}-`)).map((shot) => shot.widthPx)).to.include.members(
        [1280, 375],
        name,
      );
    }
    expect(shots.filter((shot) => shot.overflowPx > 0).map((shot) => path.basename(shot.file))).to.deep.equal([]);
  });

  it("reached nothing but the gateway: every page works from its origin alone", () => {
    expect(contexts().flatMap((context) => context.blocked)).to.deep.equal([]);
  });

  it("threw no script error and logged no console error on any page", () => {
    expect(contexts().flatMap((context) => context.pageErrors)).to.deep.equal([]);
  });
});
