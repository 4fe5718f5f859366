import { expect } from "chai";
import { getAddress } from "viem";
import { type AaStack, gatewayOptionsFor, startAaStack } from "../helpers/aa-stack";
import { type TestStack, startStack } from "../helpers/gateway";

/**
 * A new person, end to end on a real `hardhat node` with the real Alto bundler: signs up by
 * e-mail, gets an embedded wallet, tops it up by crypto transfer (a sponsored UserOperation
 * moves it into the escrow, the indexer credits it once), makes a key and calls a skill.
 */
describe("signing up and paying from an embedded wallet", function () {
  this.timeout(120_000);
  let aa: AaStack;
  let stack: TestStack;

  before(async () => {
    aa = await startAaStack();
    stack = await startStack({
      buyerUsd: "0",
      gateway: gatewayOptionsFor(aa),
    });
  });
  after(async () => {
    await stack?.close();
    await aa?.stop();
  });

  it("signs up, sees its wallet, tops up by transfer, makes a key and pays for a call", async () => {
    // 1. Sign up with an e-mail link (read from the outbox, as docs/accounts.md says).
    // Sign-in POSTs come from the dashboard's own page: its Origin goes with them.
    const origin = new URL(stack.url).origin;
    await stack.post("/auth/email/start", { email: "new@example.com" }, { key: null, headers: { origin } });
    const body = (await stack.gw.db.value<string>("SELECT body FROM outbox ORDER BY id DESC LIMIT 1"))!;
    const token = /token=([A-Za-z0-9_-]+)/.exec(body)![1];
    const verified = await fetch(`${stack.url}/auth/email/verify`, {
      method: "POST",
      headers: { "content-type": "application/json", origin },
      body: JSON.stringify({ token }),
    });
    expect(verified.status).to.equal(200);
    const cookies = verified.headers.getSetCookie().map((c) => c.split(";")[0]);
    const cookie = cookies.join("; ");
    const csrf = cookies.find((c) => c.startsWith("sg_csrf="))!.slice("sg_csrf=".length);
    const me = async () => (await (await fetch(`${stack.url}/v1/me`, { headers: { cookie } })).json()) as any;

    // 2. An embedded wallet, server-owned, linked as the deposit address.
    const first = await me();
    expect(first.data.wallet.owner).to.equal("server");
    const wallet = getAddress(first.data.wallet.address);
    expect(first.data.addresses).to.deep.equal([wallet.toLowerCase()]);

    // 3. USDC sent to the wallet ends in the escrow and in the balance, once.
    await aa.mint(wallet, 2_500_000n);
    expect(await stack.gw.wallets!.sweepAll()).to.equal(1);
    expect(await stack.gw.wallets!.sweepAll()).to.equal(0);
    await stack.gw.moneyPath!.indexer.poll();
    await stack.gw.moneyPath!.indexer.poll();
    expect((await me()).data.balance).to.deep.include({ available: 2.5 });

    // 4. A key from the session pays for a call.
    const created = await fetch(`${stack.url}/v1/keys`, {
      method: "POST",
      headers: { cookie, "x-csrf-token": csrf, "content-type": "application/json" },
      body: JSON.stringify({ name: "agent" }),
    });
    const { key } = ((await created.json()) as any).data;
    const call = await stack.post("/v1/call", { skill_id: "echo", input: { hi: 1 } }, { key });
    expect(call.status).to.equal(200);
    expect(call.body.metadata.price_paid).to.equal(0.001);
    expect((await me()).data.balance).to.deep.include({ available: 2.499 });
  });
});
