import { expect } from "chai";
import hre from "hardhat";
import { ExactEvmScheme } from "@x402/evm/exact/client";
import { wrapFetchWithPaymentFromConfig } from "@x402/fetch";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { linkAddress } from "../../server/settlement/addresses";
import { type LocalChain, gatewayChain, startLocalChain } from "../helpers/chain";
import { describeEachEngine } from "../helpers/engines";
import { type TestStack, startStack } from "../helpers/gateway";

/**
 * Usage-priced skills over x402 (issue 27 §1): `exact` pays one amount fixed before the call, so a usage-priced skill is
 * left out of the discovery list and refused with 409 usage_pricing_unsupported, before any payment is verified,
 * collected or the backend called; the real client pays nothing.
 */
describeEachEngine("x402: usage-priced skills", (engine) => {
  let chain: LocalChain;
  let snapshot: string;
  let stack: TestStack;

  before(async function () {
    this.timeout(120_000);
    chain = await startLocalChain();
    snapshot = await chain.snapshot();
    const seller = (await hre.viem.getWalletClients())[7].account.address;
    stack = await startStack({ engine: engine.name, gateway: { chain: await gatewayChain(chain) } });
    expect((await linkAddress(stack.gw.ledger, { accountId: stack.sellerId, address: seller })).ok).to.equal(true);
    await stack.addSkill("metered", "/echo", { pricing: "usage", priceMicros: 10_000n });
  });
  after(async () => {
    await stack?.close();
    if (snapshot) await chain.revert(snapshot);
  });

  it("leaves the skill out of the discovery list", async () => {
    const list = (await (await fetch(`${stack.url}/x402/discovery/resources`)).json()) as { items: Array<{ resource: string }> };
    const resources = list.items.map((item) => item.resource);
    expect(resources.some((r) => r.endsWith("/x402/skills/echo/call"))).to.equal(true);
    expect(resources.some((r) => r.includes("metered"))).to.equal(false);
  });

  it("refuses a call with 409 usage_pricing_unsupported, calling nothing and taking nothing, even from the real client", async () => {
    const bare = await stack.post("/x402/skills/metered/call", { text: "hi" }, { key: null });
    expect(bare.status).to.equal(409);
    expect(bare.body).to.include({ success: false, code: "usage_pricing_unsupported" });
    expect(bare.body.error).to.contain("cannot be paid with x402");
    expect(bare.headers.has("payment-required")).to.equal(false);

    const payer = privateKeyToAccount(generatePrivateKey());
    await chain.mintUsdc(payer.address, 1_000_000n);
    const paidFetch = wrapFetchWithPaymentFromConfig(fetch, {
      schemes: [{ network: "eip155:*", client: new ExactEvmScheme(payer) }],
      spendControls: { allowedAssets: [{ network: "eip155:8453", asset: chain.deployment.usdc, maxAmountPerPayment: "100000" }] },
    });
    const paid = await paidFetch(`${stack.url}/x402/skills/metered/call`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ text: "hi" }),
    });
    expect(paid.status).to.equal(409);
    expect(await chain.usdcOf(payer.address)).to.equal(1_000_000n);
    expect(stack.backend.hits.get("/echo") ?? 0).to.equal(0);
  });
});
