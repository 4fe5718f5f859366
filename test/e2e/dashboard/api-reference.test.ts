import { expect } from "chai";
import type { Browser } from "playwright-core";
import { type SandboxedContext, launchBrowser, openSandboxedContext } from "../../helpers/browser";
import { type TestStack, startStack } from "../../helpers/gateway";

/**
 * The API reference at GET /docs in Debian's Chromium: Redoc, served by the gateway, renders the gateway's
 * /openapi.json, reaching no other site and breaking no rule of the page's CSP.
 */
describe("the API reference at /docs, in a real browser", function () {
  this.timeout(60_000);
  let stack: TestStack;
  let browser: Browser;
  let sandbox: SandboxedContext;

  before(async () => {
    stack = await startStack();
    browser = await launchBrowser();
    sandbox = await openSandboxedContext(browser, new URL(stack.url).origin);
  });
  after(async () => {
    await browser?.close();
    await stack?.close();
  });

  it("renders the operations of /openapi.json, from the gateway alone", async () => {
    const { page } = sandbox;
    const violations: string[] = [];
    page.on("console", (message) => {
      if (/Content Security Policy/i.test(message.text())) violations.push(message.text());
    });
    await page.goto(`${stack.url}/docs`);
    // An operation's summary, as the contract declares it (server/http/contract/call.ts), shown as a heading. Redoc
    // lays out the whole document before it shows one: seconds on a quiet machine, longer under the suites.
    await page.getByRole("heading", { name: "Call a skill (general form)" }).first().waitFor({ timeout: 45_000 });
    expect(await page.title()).to.equal("Skill Gateway API reference");
    expect(sandbox.blocked, "requests to another site").to.deep.equal([]);
    expect(violations, "CSP violations").to.deep.equal([]);
    expect(sandbox.pageErrors, "script errors").to.deep.equal([]);
  });
});
