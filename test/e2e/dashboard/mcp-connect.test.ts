import { expect } from "chai";
import type { Browser, Page } from "playwright-core";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { type SandboxedContext, launchBrowser, openSandboxedContext, screenshotPage } from "../../helpers/browser";
import { type TestStack, startStack } from "../../helpers/gateway";
import { MemoryOAuthClient } from "../../helpers/mcp-oauth-client";
import { accountIdOf, expectHeading, until } from "./pages";
import { mailedSignInLink } from "./stack";

/**
 * A remote MCP client connecting to the hosted /mcp with OAuth 2.1, as claude.ai or ChatGPT would, end to end: the
 * official MCP SDK client's own OAuth support (StreamableHTTPClientTransport with an authProvider) does discovery,
 * registration and the PKCE code exchange; Chromium plays the person, who signs in by e-mail on the dashboard and
 * consents on /connect with a spending limit. Then paid calls within the limit, one refused past it, a refresh when
 * the access token expires, and the connection revoked on API Keys, after which the client is refused.
 */
describe("connecting a remote MCP client with OAuth, in a real browser", function () {
  this.timeout(90_000);
  /** The client's redirect URI: a loopback port nothing listens on; the browser's request there is caught, not sent. */
  const REDIRECT = "http://127.0.0.1:9/oauth/callback";
  const EMAIL = "agent-owner@example.com";
  let stack: TestStack;
  let browser: Browser;
  let person: SandboxedContext;
  let page: Page;
  let clients: Client[];

  before(async () => {
    // Access tokens good for 2 s: the client must refresh within the test.
    stack = await startStack({ config: { signInRateLimitPerMin: 1_000, mcpAccessTokenTtlMs: 2_000 } });
    browser = await launchBrowser();
    person = await openSandboxedContext(browser, stack.url);
    page = person.page;
    clients = [];
  });
  after(async () => {
    for (const client of clients) await client.close();
    await browser?.close();
    await stack?.close();
  });

  const connect = async (provider: MemoryOAuthClient) => {
    const transport = new StreamableHTTPClientTransport(new URL(`${stack.url}/mcp`), { authProvider: provider });
    const client = new Client({ name: "remote-connector", version: "1.0.0" });
    try {
      await client.connect(transport);
      clients.push(client);
      return { client, transport };
    } catch (error) {
      if (!(error instanceof UnauthorizedError)) throw error;
      return { transport };
    }
  };

  it("signs in, consents, calls within the limit, is refused past it, refreshes, and is cut off when revoked", async () => {
    const provider = new MemoryOAuthClient(REDIRECT, "Remote Agent");
    const first = await connect(provider);
    expect(first.client, "the client needs the person first").to.equal(undefined);

    // The person opens the authorization URL: the gateway sends the browser to /connect, which asks to sign in.
    await page.goto(provider.lastAuthorizationUrl().href);
    await expectHeading(page, "Connect an MCP client");
    await page.getByTestId("connect-sign-in").getByRole("link", { name: "Sign in" }).click();
    await expectHeading(page, "Sign in");
    await page.getByTestId("email-input").fill(EMAIL);
    await page.getByTestId("email-submit").click();
    await page.getByTestId("email-sent").waitFor();
    await page.goto(await mailedSignInLink(stack.gw.db, EMAIL));
    await page.getByTestId("email-link-confirm").click();
    // Signed in, the dashboard comes back to the request.
    await expectHeading(page, "Connect an MCP client");
    expect(await page.getByTestId("connect-client").textContent())
      .to.contain("Remote Agent")
      .and.contain("http://127.0.0.1:9");
    const accountId = await accountIdOf(page);
    await stack.gw.ledger.credit(accountId, 1_000_000n, "dev_credit", "test");

    await page.getByTestId("connect-skills").fill("echo");
    await page.getByTestId("connect-limit").fill("0.0025");
    await page.getByTestId("connect-period").selectOption("day");
    const shots = await screenshotPage(page, "mcp-connect");
    expect(shots.map((s) => s.overflowPx)).to.deep.equal([0, 0]);
    await page.getByTestId("connect-approve").click();
    // The browser is sent back to the client's redirect URI (outside the sandbox: caught there) with the code.
    const back = (await until(
      "the browser to be sent to the client's redirect URI",
      () => person.blocked.find((url) => url.startsWith(REDIRECT)),
      (url) => url !== undefined,
    ))!;
    const answer = new URL(back);
    expect(answer.searchParams.get("state")).to.equal(provider.lastAuthorizationUrl().searchParams.get("state"));
    await first.transport.finishAuth(answer.searchParams.get("code")!);

    const { client } = await connect(provider);
    expect(client, "connected with the token").to.not.equal(undefined);
    expect((await client!.listTools()).tools.map((t) => t.name)).to.deep.equal(["echo"]);
    const call = async (n: number) => (await client!.callTool({ name: "echo", arguments: { n } })) as CallToolResult;
    expect((await call(1)).isError).to.not.equal(true);
    expect((await call(2)).isError).to.not.equal(true);
    const past = await call(3);
    expect(past.isError).to.equal(true);
    expect((past.structuredContent as { code: string }).code).to.equal("key_spend_limit_reached");
    await stack.gw.db.durable();
    expect(await stack.available(accountId)).to.equal(1_000_000n - 2_000n);

    // The access token lapses; the SDK refreshes it with the rotating refresh token, unseen by the person.
    const before = provider.saved!;
    await new Promise((resolve) => setTimeout(resolve, 2_100));
    expect((await client!.listTools()).tools.map((t) => t.name)).to.deep.equal(["echo"]);
    expect(provider.saved!.access_token).to.not.equal(before.access_token);
    expect(provider.saved!.refresh_token).to.not.equal(before.refresh_token);

    // The connection is a key on API Keys: revoking it there cuts the client off.
    await page.goto(`${stack.url}/keys`);
    await expectHeading(page, "API Keys");
    const row = page.getByTestId("key-row").filter({ hasText: "Remote Agent (MCP)" });
    await row.getByTestId("key-revoke").click();
    await page.getByTestId("confirm-ok").click();
    await row.waitFor({ state: "detached" });
    let refused: unknown;
    try {
      await client!.listTools();
    } catch (error) {
      refused = error;
    }
    expect(refused, "a revoked connection's token is refused").to.be.instanceOf(Error);
    const direct = await stack.post("/mcp", { jsonrpc: "2.0", id: 1, method: "tools/list" }, { key: provider.saved!.access_token });
    expect(direct.status).to.equal(401);
    expect(person.pageErrors).to.deep.equal([]);
  });
});
