import type { Locator, Page } from "playwright-core";
import { STEP_TIMEOUT_MS } from "../../helpers/browser";
import type { DashboardStack } from "./stack";

/**
 * Small steps the dashboard tests take in a page, by the contract's selectors
 * (dashboard-contract.md: nav link texts, one h1 per page, data-testid values).
 */

/** Waits until `read()` gives a value `accept`s, polling; on timeout, says what was seen last. */
export async function until<T>(
  what: string,
  read: () => T | Promise<T>,
  accept: (value: T) => boolean,
  timeoutMs = STEP_TIMEOUT_MS,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (accept(value)) return value;
    if (Date.now() > deadline)
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}; last seen: ${JSON.stringify(value, (_k, v) => (typeof v === "bigint" ? v.toString() : v))}`,
      );
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Waits until the element shows text matching `expected` (a string must match it whole, trimmed); returns the text. */
export async function textOf(locator: Locator, expected: string | RegExp = /\S/): Promise<string> {
  await locator.waitFor();
  const matches = (text: string) => (typeof expected === "string" ? text === expected : expected.test(text));
  return until(`${locator} to show ${expected}`, async () => ((await locator.textContent()) ?? "").trim(), matches);
}

/** The whole value of a long value the page shortens in the middle (`data-value`), else its text. */
export async function fullValue(locator: Locator): Promise<string> {
  await locator.waitFor();
  return (await locator.getAttribute("data-value")) ?? ((await locator.textContent()) ?? "").trim();
}

/** Waits for the page's h1 to read `title`. */
export async function expectHeading(page: Page, title: string): Promise<void> {
  await textOf(page.locator("h1"), title);
}

/** Follows one of the navigation's links, as a person would, and waits for that page's heading. */
export async function navigate(
  page: Page,
  link: "Wallet" | "API Keys" | "Marketplace" | "Usage" | "Seller" | "Settings",
  heading: string = link,
): Promise<void> {
  await page.getByRole("navigation").getByRole("link", { name: link, exact: true }).click();
  await expectHeading(page, heading);
}

/**
 * A displayed dollar amount (`$10.000`, `$0.0025`, `-$1,234.5`) in base units (1 USDC =
 * 1,000,000), read as decimal text: money is compared exactly, never as floats.
 */
export function baseUnits(displayed: string): bigint {
  const match = /^(-)?\$([\d,]+)(?:\.(\d{1,6}))?$/.exec(displayed.trim());
  if (!match) throw new Error(`"${displayed}" is not a dollar amount`);
  const units = BigInt(match[2].replace(/,/g, "")) * 1_000_000n + BigInt((match[3] ?? "").padEnd(6, "0"));
  return match[1] ? -units : units;
}

/** The amount an element shows, in base units, once it shows one. */
export async function amountOf(locator: Locator): Promise<bigint> {
  return baseUnits(await textOf(locator, /^-?\$[\d,]+(\.\d+)?$/));
}

/**
 * Signs in by e-mail the way a person does: types the address on /signin, sees that a link
 * was sent, opens the link from the mail (the gateway's outbox) in the same page, confirms
 * on the page it opens ("Sign in as …": opening the link alone signs no one in), and lands
 * on the wallet, signed in.
 */
export async function signInByEmail(page: Page, dashboard: Pick<DashboardStack, "origin" | "signInLink">, email: string): Promise<void> {
  await page.goto(`${dashboard.origin}/signin`);
  await expectHeading(page, "Sign in");
  await page.getByTestId("email-input").fill(email);
  await page.getByTestId("email-submit").click();
  await textOf(page.getByTestId("email-sent"));
  await page.goto(await dashboard.signInLink(email));
  await expectHeading(page, "E-mail sign-in");
  await page.getByTestId("email-link-confirm").click();
  await expectHeading(page, "Wallet");
  await page.getByRole("button", { name: "Sign out" }).waitFor();
}

/** The account signed in to the page's browser profile, from `GET /v1/me` with the profile's own cookies. */
export async function accountIdOf(page: Page): Promise<string> {
  const me = (await (await page.request.get(new URL("/v1/me", page.url()).href)).json()) as { data: { account_id: string } };
  return me.data.account_id;
}
