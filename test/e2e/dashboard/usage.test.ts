import fs from "node:fs/promises";
import { expect } from "chai";
import type { Browser, Locator, Page } from "playwright-core";
import { formatBaseUnits, formatCount, formatDay } from "../../../server/web/src/format";
import { type SandboxedContext, type Shot, WIDTHS_PX, launchBrowser, openSandboxedContext, screenshotPage } from "../../helpers/browser";
import { type TestStack, startStack } from "../../helpers/gateway";
import { signedIn } from "../../helpers/session";
import { expectHeading, textOf, until } from "./pages";

const DAY_MS = 86_400_000;
const utcDay = (ms: number) => new Date(ms).toISOString().slice(0, 10);

/**
 * The Usage page and the API Keys page's usage (issue 16, item 10) in a real browser, on a gateway without a
 * chain (these pages need none), with calls of two keys written to the calls log: the chart's axes and a day's
 * value on hover and keyboard focus, the range's total and the month to date, the filter by key, the CSV
 * download, a range out of order, and each key's calls and spend with its link to Usage; at 1280 and 375 px.
 */
describe("the Usage page, in a real browser", function () {
  this.timeout(60_000);
  let stack: TestStack;
  let browser: Browser;
  let person: SandboxedContext;
  let page: Page;
  const shots: Shot[] = [];
  const origin = () => new URL(stack.url).origin;

  /** The calls written: which key, which day, what each charged. */
  const now = Date.now();
  const today = utcDay(now);
  const yesterday = utcDay(now - DAY_MS);
  const seeded: { key: "laptop" | "server"; at: number; units: bigint; skill: "echo" | "fail" }[] = [
    { key: "laptop", at: now - 3_000, units: 1_000n, skill: "echo" },
    { key: "laptop", at: now - 2_000, units: 2_500n, skill: "echo" },
    { key: "server", at: now - 1_000, units: 0n, skill: "fail" },
    { key: "laptop", at: now - DAY_MS, units: 12_000n, skill: "echo" },
    { key: "server", at: now - DAY_MS - 1, units: 4_000n, skill: "echo" },
    { key: "server", at: now - 3 * DAY_MS, units: 7_000n, skill: "echo" },
  ];
  const onDay = (day: string) => seeded.filter((call) => utcDay(call.at) === day);
  const sum = (calls: typeof seeded) => calls.reduce((total, call) => total + call.units, 0n);
  const keyIds: Record<string, string> = {};

  before(async () => {
    stack = await startStack();
    const ada = await signedIn(stack, "ada@example.com");
    for (const name of ["laptop", "server"]) keyIds[name] = (await stack.gw.keys.create(ada.accountId, { name })).record.id;
    await stack.gw.keys.setSpendLimit(keyIds.server, ada.accountId, { limitMicros: 1_000_000n, period: "day" });
    for (const [i, call] of seeded.entries()) {
      await stack.gw.calls.record({
        id: `call-${i}`,
        accountId: ada.accountId,
        apiKeyId: keyIds[call.key],
        skillId: stack.gw.skills.resolve(call.skill)!.id,
        endpoint: "call",
        httpStatus: call.skill === "fail" ? 502 : 200,
        outcome: call.skill === "fail" ? "skill_error" : "success",
        chargedMicros: call.units,
        holdId: null,
        latencyUs: 12_300,
        createdAtMs: call.at,
      });
    }
    browser = await launchBrowser();
    person = await openSandboxedContext(browser, stack.url);
    page = person.page;
    const token = ada.cookie.slice(ada.cookie.indexOf("=") + 1);
    await person.context.addCookies([
      { name: "sg_session", value: token, url: origin() },
      { name: "sg_csrf", value: ada.csrfToken, url: origin() },
    ]);
  });
  after(async () => {
    await browser?.close();
    await stack?.close();
  });

  /** Whether an element is wholly inside the viewport. */
  const inViewport = async (locator: Locator): Promise<boolean> => {
    const box = await locator.boundingBox();
    const viewport = page.viewportSize()!;
    return box !== null && box.x >= 0 && box.y >= 0 && box.x + box.width <= viewport.width && box.y + box.height <= viewport.height;
  };
  /** The call ids of the rows the table shows, once it shows `count` of them. */
  const rowIds = async (count: number) =>
    until(
      `${count} rows of calls`,
      () => page.getByTestId("usage-row").evaluateAll((rows) => rows.map((row) => row.getAttribute("data-call-id"))),
      (ids) => ids.length === count,
    );

  for (const [label, widthPx] of Object.entries(WIDTHS_PX)) {
    it(`draws the chart with labelled axes, shows a day's value on hover and focus, and the totals (${label}, ${widthPx} px)`, async () => {
      await page.setViewportSize({ width: widthPx, height: 800 });
      await page.goto(`${origin()}/usage`);
      await expectHeading(page, "Usage");
      await rowIds(seeded.length);

      // The axes: round dollar ticks from $0.000, and dates ending with today.
      const yTicks = await page.getByTestId("chart-y-axis").locator(".chart-tick").allTextContents();
      // The busiest day, yesterday, spent $0.016: steps of $0.005 reach it in four.
      expect(yTicks).to.deep.equal(["$0.000", "$0.005", "$0.010", "$0.015", "$0.020"]);
      expect(await textOf(page.getByTestId("chart-x-axis").locator(".chart-date-end"))).to.equal(formatDay(today));
      expect(await page.getByTestId("spend-chart").getByText("USD per day").isVisible()).to.equal(true);
      expect(await page.getByTestId("spend-chart").getByText("Day (UTC)").isVisible()).to.equal(true);

      // A day's value, on hover: the tooltip says what the bar's label says, inside the viewport.
      const days = page.getByTestId("chart-day");
      expect(await days.count()).to.equal(30);
      const yesterdayBar = page.locator(`[data-testid="chart-day"][data-date="${yesterday}"]`);
      const yesterdayLabel = `${formatDay(yesterday)}: ${formatBaseUnits(sum(onDay(yesterday)))}, ${formatCount(onDay(yesterday).length, "call")}`;
      expect(yesterdayLabel).to.match(/^[A-Z][a-z]{2} \d{1,2}: \$0\.016, 2 calls$/);
      expect(await yesterdayBar.getAttribute("aria-label")).to.equal(yesterdayLabel);
      await yesterdayBar.hover();
      const tip = page.getByTestId("chart-tip");
      expect(await textOf(tip)).to.equal(yesterdayLabel);
      expect(await inViewport(tip), "the tooltip is in the viewport").to.equal(true);

      // And with the keyboard: one Tab stop (today), the arrow keys move a day at a time.
      await page.mouse.move(0, 0);
      await days.last().focus();
      expect(await textOf(tip)).to.equal(
        `${formatDay(today)}: ${formatBaseUnits(sum(onDay(today)))}, ${formatCount(onDay(today).length, "call")}`,
      );
      await page.keyboard.press("ArrowLeft");
      expect(await page.evaluate("document.activeElement?.getAttribute('data-date')")).to.equal(yesterday);
      expect(await textOf(tip)).to.equal(yesterdayLabel);
      expect(await days.evaluateAll((all) => all.filter((day) => day.getAttribute("tabindex") === "0").length)).to.equal(1);
      await page.keyboard.press("Escape");
      expect(await tip.isHidden()).to.equal(true);

      // The range's total, and this month's so far (which may hold fewer of the calls, early in a month).
      const monthStart = `${today.slice(0, 7)}-01`;
      const thisMonth = seeded.filter((call) => utcDay(call.at) >= monthStart);
      expect(await textOf(page.getByTestId("usage-total"))).to.equal(formatBaseUnits(sum(seeded)));
      expect(await textOf(page.getByTestId("usage-calls"))).to.equal(String(seeded.length));
      expect(await textOf(page.getByTestId("usage-month"))).to.equal(formatBaseUnits(sum(thisMonth)));
      // One latency per call, in ms, and one date format: no ISO dates anywhere on the page.
      expect(await textOf(page.getByTestId("usage-row").first(), /12\.3 ms/)).to.not.match(/\d{4}-\d{2}-\d{2}/);
      expect(await page.locator("main").innerText()).to.not.match(/\d{4}-\d{2}-\d{2}/);
      if (widthPx === WIDTHS_PX.desktop) {
        // Shot with a day's tooltip showing.
        await yesterdayBar.hover();
        shots.push(...(await screenshotPage(page, "usage")));
      }
    });

    it(`narrows the calls to one key, downloads them as CSV, and says where a range is wrong (${label}, ${widthPx} px)`, async () => {
      await page.setViewportSize({ width: widthPx, height: 800 });
      await page.goto(`${origin()}/usage`);
      await expectHeading(page, "Usage");
      await rowIds(seeded.length);

      await page.getByTestId("usage-key").selectOption({ label: "laptop" });
      const laptop = seeded.filter((call) => call.key === "laptop").length;
      const shown = await rowIds(laptop);
      const keyCells = await page.getByTestId("usage-row").locator('td[data-label="Key"]').allTextContents();
      expect(keyCells).to.deep.equal(Array(laptop).fill("laptop"));
      expect(new URL(page.url()).searchParams.get("api_key_id")).to.equal(keyIds.laptop);
      expect(await textOf(page.getByTestId("usage-total"))).to.equal(formatBaseUnits(sum(seeded.filter((c) => c.key === "laptop"))));

      const [download] = await Promise.all([page.waitForEvent("download"), page.getByTestId("usage-csv").click()]);
      expect(download.suggestedFilename()).to.match(/^usage-from-\d{4}-\d{2}-\d{2}-to-\d{4}-\d{2}-\d{2}\.csv$/);
      const lines = (await fs.readFile((await download.path())!, "utf8")).trim().split("\r\n");
      expect(lines[0]).to.match(/^created_at,call_id,skill_id,skill_name,api_key_id,api_key_name,/);
      expect(lines.slice(1).map((line) => line.split(",")[1])).to.deep.equal(shown);

      // A last day before the first: said under the fields, in view, and nothing is downloaded.
      await page.getByTestId("usage-to").fill(utcDay(now - 40 * DAY_MS));
      const problem = page.getByTestId("usage-filter-error");
      expect(await textOf(problem)).to.equal("The last day is before the first: pick a later one.");
      expect(await inViewport(problem), "the error is in the viewport").to.equal(true);
      expect(await page.getByTestId("usage-to").getAttribute("aria-invalid")).to.equal("true");
      expect(await page.getByTestId("usage-csv").getAttribute("aria-disabled")).to.equal("true");
      expect(await page.getByTestId("usage-csv").getAttribute("href")).to.equal(null);
      expect((await page.evaluate("document.documentElement.scrollWidth")) as number).to.be.at.most(widthPx);
    });
  }

  it("shows each key's calls and spend on the API Keys page, and in its limit's period, with a link to its usage", async () => {
    await page.setViewportSize({ width: WIDTHS_PX.desktop, height: 800 });
    await page.goto(`${origin()}/keys`);
    await expectHeading(page, "API Keys");
    const laptopRow = page.getByTestId("key-row").filter({ hasText: "laptop" });
    const laptopToday = seeded.filter((call) => call.key === "laptop" && utcDay(call.at) === today);
    const usage = await textOf(laptopRow.getByTestId("key-usage"), /Total/);
    expect(usage).to.include(`Today${formatBaseUnits(sum(laptopToday))} · ${formatCount(laptopToday.length, "call")}`);
    expect(usage).to.include(`Total${formatBaseUnits(sum(seeded.filter((c) => c.key === "laptop")))} · 3 calls`);
    // A key with a daily limit says what it spent today and in how many calls (its one call today failed, uncharged).
    const serverRow = page.getByTestId("key-row").filter({ hasText: "server" });
    expect(await textOf(serverRow.getByTestId("key-limit-shown"))).to.equal("$1.00 per day");
    expect(await textOf(serverRow.getByTestId("key-spent"))).to.equal("$0.00 spent today, 1 call");
    shots.push(...(await screenshotPage(page, "keys-usage")));

    await laptopRow.getByTestId("key-usage-link").click();
    await expectHeading(page, "Usage");
    await rowIds(3);
    expect(await page.getByTestId("usage-key").inputValue()).to.equal(keyIds.laptop);
  });

  it("fit a phone, reached nothing but the gateway, and threw no script error", () => {
    expect(shots.map((shot) => shot.overflowPx)).to.deep.equal(shots.map(() => 0));
    expect(person.blocked).to.deep.equal([]);
    expect(person.pageErrors).to.deep.equal([]);
  });
});
