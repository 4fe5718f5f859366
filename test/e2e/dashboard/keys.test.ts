import { expect } from "chai";
import type { Browser, Page } from "playwright-core";
import { type SandboxedContext, type Shot, launchBrowser, openSandboxedContext, screenshotPage } from "../../helpers/browser";
import { type TestStack, startStack } from "../../helpers/gateway";
import { type TestSession, signedIn } from "../../helpers/session";
import { expectHeading, fullValue, textOf, until } from "./pages";

const DAY_MS = 86_400_000;
/** A UTC day `days` from today, as a date input takes it. */
const dayFromNow = (days: number) => new Date(Date.now() + days * DAY_MS).toISOString().slice(0, 10);

/**
 * The API Keys page shows and edits everything a key has (issue 24, sections 1 and 4): scopes, allowed skills,
 * expiry and metadata, on create and in "Edit…", each saved as the gateway keeps it; a refusal under the field it
 * names, the dialog left open; and the Usage page says which agent each call was for. In Chromium, on a gateway
 * without a chain (these pages need none), at 1280 and 375 px.
 */
describe("the API Keys page's scopes, skills, expiry and metadata, in a real browser", function () {
  this.timeout(60_000);
  let stack: TestStack;
  let ada: TestSession;
  let browser: Browser;
  let person: SandboxedContext;
  let page: Page;
  const shots: Shot[] = [];
  let made: { id: string; key: string };

  before(async () => {
    stack = await startStack();
    ada = await signedIn(stack, "ada@example.com");
    await stack.gw.ledger.credit(ada.accountId, 1_000_000n, "dev_credit", "test");
    await stack.gw.db.durable();
    browser = await launchBrowser();
    person = await openSandboxedContext(browser, stack.url);
    page = person.page;
    const origin = new URL(stack.url).origin;
    await person.context.addCookies([
      { name: "sg_session", value: ada.cookie.slice(ada.cookie.indexOf("=") + 1), url: origin },
      { name: "sg_csrf", value: ada.csrfToken, url: origin },
    ]);
  });
  after(async () => {
    await browser?.close();
    await stack?.close();
  });

  const row = () => page.getByTestId("key-row").filter({ hasText: "researcher" });
  /** The key as the gateway keeps it. */
  const stored = async () => (await stack.gw.keys.get(made.id))!;

  it("creates a key with its scopes, allowed skills, expiry and metadata, and shows them under its name", async () => {
    await page.goto(`${stack.url}/keys`);
    await expectHeading(page, "API Keys");
    // A new key's default is the least: calls alone.
    expect(await page.getByTestId("create-scope-calls").isChecked()).to.equal(true);
    expect(await page.getByTestId("create-scope-keys-manage").isChecked()).to.equal(false);

    await page.getByTestId("key-name").fill("researcher");
    await page.getByTestId("create-scope-usage-read").check();
    await page.getByTestId("create-skills").fill("echo, fail");
    await page.getByTestId("create-expires").fill(dayFromNow(30));
    await page.getByTestId("create-metadata").fill("agent=researcher-7\nend_user=u_42");
    await page.getByTestId("key-create").click();
    const key = await fullValue(page.getByTestId("new-key"));
    made = { key, id: (await stack.gw.keys.authenticate(key))!.id };

    expect(await stored()).to.deep.include({
      name: "researcher",
      scopes: ["calls", "usage:read"],
      allowedSkills: ["echo", "fail"],
      expiresAtMs: Date.parse(`${dayFromNow(31)}T00:00:00Z`),
      metadata: { agent: "researcher-7", end_user: "u_42" },
    });
    expect(await textOf(row().getByTestId("key-scopes"))).to.equal("can: calls, usage:read");
    expect(await textOf(row().getByTestId("key-skills"))).to.equal("only echo, fail");
    expect(await textOf(row().getByTestId("key-expires"))).to.match(/^expires /);
    expect(await textOf(row().getByTestId("key-metadata"))).to.equal("agent=researcher-7 · end_user=u_42");
    // The form is back to a new key's defaults.
    expect(await page.getByTestId("create-metadata").inputValue()).to.equal("");
    expect(await page.getByTestId("create-scope-usage-read").isChecked()).to.equal(false);
    shots.push(...(await screenshotPage(page, "keys-access")));
  });

  it("edits them in one save, and sends only what changed", async () => {
    await row().getByTestId("key-edit").click();
    const dialog = page.getByTestId("edit-dialog");
    // Filled with what the key has now.
    expect(await dialog.getByTestId("edit-skills").inputValue()).to.equal("echo, fail");
    expect(await dialog.getByTestId("edit-expires").inputValue()).to.equal(dayFromNow(30));
    expect(await dialog.getByTestId("edit-metadata").inputValue()).to.equal("agent=researcher-7\nend_user=u_42");
    shots.push(...(await screenshotPage(page, "keys-edit")));

    await dialog.getByTestId("edit-scope-usage-read").uncheck();
    await dialog.getByTestId("edit-skills").fill("");
    await dialog.getByTestId("edit-metadata").fill("agent=researcher-8");
    await dialog.getByTestId("edit-save").click();
    await dialog.waitFor({ state: "detached" });

    expect(await textOf(row().getByTestId("key-scopes"), "can: calls")).to.equal("can: calls");
    expect(await textOf(row().getByTestId("key-skills"))).to.equal("every skill");
    expect(await textOf(row().getByTestId("key-metadata"), /researcher-8/)).to.equal("agent=researcher-8");
    // The expiry was not touched, so not sent: it is the one the key had.
    expect(await stored()).to.deep.include({
      scopes: ["calls"],
      allowedSkills: null,
      expiresAtMs: Date.parse(`${dayFromNow(31)}T00:00:00Z`),
      metadata: { agent: "researcher-8" },
    });

    await row().getByTestId("key-edit").click();
    await dialog.getByTestId("edit-expires").fill("");
    await dialog.getByTestId("edit-save").click();
    await dialog.waitFor({ state: "detached" });
    expect(await textOf(row().getByTestId("key-expires"), "never expires")).to.equal("never expires");
    expect((await stored()).expiresAtMs).to.equal(null);
  });

  it("keeps the dialog open with a refusal under the field it names, and changes nothing", async () => {
    const before = await stored();
    await row().getByTestId("key-edit").click();
    const dialog = page.getByTestId("edit-dialog");
    // Told before asking: a line without "=".
    await dialog.getByTestId("edit-metadata").fill("researcher-9");
    await dialog.getByTestId("edit-save").click();
    expect(await textOf(dialog.getByTestId("edit-metadata-error"))).to.match(/^Metadata line 1: write each entry as name=value/);
    // Told by the gateway: a skill it does not list, and a metadata name it does not take.
    await dialog.getByTestId("edit-metadata").fill("agent=ok");
    await dialog.getByTestId("edit-skills").fill("no-such-skill");
    await dialog.getByTestId("edit-save").click();
    expect(await textOf(dialog.getByTestId("edit-skills-error"))).to.equal('Allowed_skills: no listed skill "no-such-skill".');
    await dialog.getByTestId("edit-skills").fill("");
    await dialog.getByTestId("edit-metadata").fill("end user=u_9");
    await dialog.getByTestId("edit-save").click();
    expect(await textOf(dialog.getByTestId("edit-metadata-error"))).to.match(/^Metadata: the name "end user" is not 1 to 40 letters/);
    await dialog.getByTestId("edit-cancel").click();
    await dialog.waitFor({ state: "detached" });
    // Every field of the key as it was; last_used_at records the key's use (written after an earlier test's calls, in
    // its own time), not a change of the key.
    const { lastUsedAtMs: _usedAfter, ...after } = await stored();
    const { lastUsedAtMs: _usedBefore, ...unchanged } = before;
    expect(after).to.deep.equal(unchanged);
  });

  it("shows on the Usage page which agent each call was for, and offers the key by its metadata", async () => {
    expect((await stack.post("/v1/call", { skill_id: "echo", input: {} }, { key: made.key })).status).to.equal(200);
    await page.goto(`${stack.url}/usage`);
    await expectHeading(page, "Usage");
    const call = page.getByTestId("usage-row").first();
    expect(await textOf(call.getByTestId("usage-key-metadata"))).to.equal("agent=researcher-8");
    await until(
      "the key choice to name its agent",
      () => page.getByTestId("usage-key").locator("option").allTextContents(),
      (labels) => labels.includes("researcher (agent=researcher-8)"),
    );
    shots.push(...(await screenshotPage(page, "usage-metadata")));
  });

  it("fit a phone, reached nothing but the gateway, and threw no script error", () => {
    expect(shots.map((shot) => shot.overflowPx)).to.deep.equal(shots.map(() => 0));
    expect(person.blocked).to.deep.equal([]);
    expect(person.pageErrors).to.deep.equal([]);
  });
});
