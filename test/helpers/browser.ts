import fs from "node:fs";
import path from "node:path";
import { type Browser, type BrowserContext, type Page, chromium } from "playwright-core";

/**
 * A real browser for the dashboard tests: Debian's Chromium (`apt-get install chromium`, as
 * .ci/run does) driven by playwright-core, which downloads no browser of its own.
 */

/** Where Chromium is: Debian's package, unless CHROMIUM_PATH names another binary. */
export const CHROMIUM_PATH = process.env.CHROMIUM_PATH || "/usr/bin/chromium";

/** Where the screenshots go: a git-ignored directory, made on demand, kept after the run as its artifacts. */
export const SCREENSHOT_DIR = path.resolve(__dirname, "../../test-artifacts/screenshots");

/** The widths every page is shot at: a desktop, and a phone (the "works at phone width"). */
export const WIDTHS_PX = { desktop: 1280, phone: 375 } as const;

/**
 * How long one step may wait for a page (an element, a navigation, a condition): generous for
 * a loaded CI machine, and a step that cannot happen fails within seconds, not after
 * playwright's default 30.
 */
export const STEP_TIMEOUT_MS = 10_000;

const VIEWPORT_HEIGHT_PX = 800;

/**
 * Launches headless Chromium. No sandbox: CI runs as root, where Chromium's sandbox refuses
 * to start. No background networking: the browser must not call home during a test.
 */
export async function launchBrowser(): Promise<Browser> {
  if (!fs.existsSync(CHROMIUM_PATH)) {
    throw new Error(`no Chromium at ${CHROMIUM_PATH}: install Debian's chromium package (see .ci/run) or set CHROMIUM_PATH`);
  }
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
  });
}

/** A browser profile of its own (cookies included) that can reach one origin and nothing else. */
export interface SandboxedContext {
  context: BrowserContext;
  page: Page;
  /** Every request the context refused because it was not for the origin. */
  blocked: string[];
  /** Uncaught errors of the page's scripts, and console errors (a CSP violation is one). */
  pageErrors: string[];
}

/**
 * Opens a new context whose every request to anything but `origin` is aborted, so that a
 * test can never reach the network (fonts, analytics, a mistyped URL): the dashboard must
 * work from the gateway alone.
 */
export async function openSandboxedContext(browser: Browser, origin: string): Promise<SandboxedContext> {
  const allowed = new URL(origin).origin;
  const context = await browser.newContext({ viewport: { width: WIDTHS_PX.desktop, height: VIEWPORT_HEIGHT_PX } });
  const blocked: string[] = [];
  await context.route("**/*", (route) => {
    const url = route.request().url();
    if (new URL(url).origin === allowed) return route.continue();
    blocked.push(url);
    return route.abort("blockedbyclient");
  });
  context.setDefaultTimeout(STEP_TIMEOUT_MS);
  const page = await context.newPage();
  const pageErrors: string[] = [];
  page.on("pageerror", (error) => pageErrors.push(error.message));
  page.on("console", (message) => {
    // A failed API call logs "Failed to load resource" (a 4xx the page shows as words): not a script error.
    if (message.type() === "error" && !message.text().startsWith("Failed to load resource")) pageErrors.push(message.text());
  });
  return { context, page, blocked, pageErrors };
}

/** What a page looked like at one width. */
export interface Shot {
  file: string;
  widthPx: number;
  /** How far the document is wider than the viewport: 0 when nothing scrolls sideways. */
  overflowPx: number;
}

/**
 * Saves full-page screenshots of what `page` shows now, at desktop and at phone width
 * (`<name>-desktop.png`, `<name>-phone.png`), then puts the desktop width back. Returns each
 * width's horizontal overflow, so a test can check the page fits a phone.
 */
export async function screenshotPage(page: Page, name: string): Promise<Shot[]> {
  fs.mkdirSync(SCREENSHOT_DIR, { recursive: true });
  const shots: Shot[] = [];
  for (const [label, widthPx] of Object.entries(WIDTHS_PX)) {
    await page.setViewportSize({ width: widthPx, height: VIEWPORT_HEIGHT_PX });
    // Two animation frames: the resize has been laid out and painted before the shot.
    await page.evaluate("new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))");
    const file = path.join(SCREENSHOT_DIR, `${name}-${label}.png`);
    await page.screenshot({ path: file, fullPage: true });
    const scrollWidthPx = (await page.evaluate("document.documentElement.scrollWidth")) as number;
    shots.push({ file, widthPx, overflowPx: Math.max(0, scrollWidthPx - widthPx) });
  }
  await page.setViewportSize({ width: WIDTHS_PX.desktop, height: VIEWPORT_HEIGHT_PX });
  return shots;
}
