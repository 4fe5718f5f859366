import { expect } from "chai";
import type { Browser } from "playwright-core";
import { type Hex, getAddress } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { type SandboxedContext, launchBrowser, openSandboxedContext, screenshotPage } from "../../helpers/browser";
import { amountOf, expectHeading, textOf, until } from "./pages";
import { type DashboardStack, startDashboardStack } from "./stack";

/**
 * Sign-In With Ethereum in the browser, with a browser wallet: an EIP-1193 provider injected
 * into the page as a wallet extension injects one, whose key lives in this test process (a
 * real secp256k1 key; every signature is made by viem and checked by the gateway). The
 * embedded wallet such a person gets is theirs: moving its USDC needs their signature, which
 * the Wallet page asks the browser wallet for.
 */
describe("the dashboard with a browser wallet (SIWE)", function () {
  this.timeout(60_000);
  let dashboard: DashboardStack;
  let browser: Browser;
  let person: SandboxedContext;
  const owner = privateKeyToAccount(`0x${"5e".repeat(32)}`);
  /** What the page asked the wallet for, in order. */
  const asked: string[] = [];

  before(async () => {
    dashboard = await startDashboardStack();
    browser = await launchBrowser();
    person = await openSandboxedContext(browser, dashboard.origin);
    // The wallet's side: answers the three requests the dashboard makes, refusing anything else
    // as a wallet would (EIP-1193 error 4200, unsupported method).
    await person.context.exposeFunction("__testWallet", async (method: string, params: unknown[] = []) => {
      asked.push(method);
      if (method === "eth_requestAccounts" || method === "eth_accounts") return [owner.address];
      if (method === "personal_sign") {
        const [data, address] = params as [Hex, string];
        if (getAddress(address) !== owner.address) throw new Error("personal_sign for an account this wallet does not hold");
        return owner.signMessage({ message: { raw: data } });
      }
      throw Object.assign(new Error(`unsupported method ${method}`), { code: 4200 });
    });
    await person.context.addInitScript(() => {
      const call = (globalThis as unknown as { __testWallet(method: string, params?: unknown[]): Promise<unknown> }).__testWallet;
      (globalThis as unknown as { ethereum: unknown }).ethereum = {
        request: ({ method, params }: { method: string; params?: unknown[] }) => call(method, params),
      };
    });
  });
  after(async () => {
    await browser?.close();
    await dashboard?.close();
  });

  it("signs in by signing the gateway's SIWE message, and gets an embedded wallet owned by that address", async () => {
    const page = person.page;
    await page.goto(`${dashboard.origin}/signin`);
    await expectHeading(page, "Sign in");
    expect(await page.getByTestId("siwe-error").isHidden()).to.equal(true);
    await page.getByTestId("siwe-button").click();
    await expectHeading(page, "Wallet");
    expect(asked).to.deep.equal(["eth_requestAccounts", "personal_sign"]);

    const me = await page.evaluate(
      async () =>
        (await (await fetch("/v1/me")).json()) as {
          data: { identities: { provider: string; subject: string }[]; wallet: { owner: string; owner_address: string } };
        },
    );
    expect(me.data.identities).to.deep.include({
      provider: "siwe",
      subject: owner.address,
      linked_at: (me.data.identities[0] as { linked_at?: string }).linked_at,
    });
    expect(me.data.wallet).to.include({ owner: "siwe", owner_address: owner.address });
    await screenshotPage(page, "wallet-siwe");
  });

  it("moves USDC sent to that wallet into the balance with the owner's signature", async () => {
    const page = person.page;
    const wallet = (await textOf(page.getByTestId("wallet-address"), /^0x[0-9a-fA-F]{40}$/)) as Hex;
    await dashboard.aa.mint(wallet, 3_000_000n);
    asked.length = 0;
    await page.getByTestId("sweep-button").click();
    await textOf(page.getByTestId("notice"), /^Sent/);
    await until(
      "the swept USDC in the balance",
      async () => {
        await page.goto(`${dashboard.origin}/wallet`);
        return amountOf(page.getByTestId("balance-available"));
      },
      (available) => available === 3_000_000n,
      30_000,
    );
    expect(asked).to.deep.equal(["personal_sign"]);
    expect(person.pageErrors).to.deep.equal([]);
    expect(person.blocked).to.deep.equal([]);
  });
});
