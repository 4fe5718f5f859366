import { expect } from "chai";
import hre from "hardhat";
import { decodePaymentResponseHeader } from "@x402/core/http";
import { ExactEvmScheme } from "@x402/evm/exact/client";
import { wrapFetchWithPaymentFromConfig } from "@x402/fetch";
import type { Address } from "viem";
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from "viem/accounts";
import { linkAddress } from "../../server/settlement/addresses";
import { loadArtifact } from "../../server/devstack/deploy";
import { assertBalanced } from "../../server/ledger/invariants";
import { X402PaymentsStore } from "../../server/x402/payments-store";
import { X402_SOURCE_ID } from "../../server/ledger/ledger";
import { type LocalChain, gatewayChain, startLocalChain } from "../helpers/chain";
import { describeEachEngine } from "../helpers/engines";
import { type TestStack, startStack } from "../helpers/gateway";

const escrowAbi = loadArtifact("SkillEscrow").abi;

/**
 * Output contracts paid with x402 (issue 27 §2), with the real client packages on the local chain: an answer that keeps
 * the skill's promise completes the payment; one that breaks it is a 502 skill_bad_output whose payment, collected
 * into the escrow before the call, is refunded, exactly as for the other 502s (test/x402/x402.test.ts).
 */
describeEachEngine("x402: output contracts", (engine) => {
  let chain: LocalChain;
  let snapshot: string;
  let stack: TestStack;
  let seller: Address;
  let payer: PrivateKeyAccount;
  let paidFetch: typeof fetch;

  const escrow = (functionName: "earnings" | "x402PendingTotal", args: unknown[] = []) =>
    chain.publicClient.readContract({ address: chain.deployment.escrow, abi: escrowAbi, functionName, args }) as Promise<bigint>;
  const pay = (body: unknown) =>
    paidFetch(`${stack.url}/x402/skills/strict/call`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
  const lineOf = (callId: string) =>
    stack.gw.db.one<{ account_id: string; endpoint: string; outcome: string; charged_micros: bigint }>(
      "SELECT account_id, endpoint, outcome, charged_micros FROM calls WHERE id = ?",
      [callId],
    );

  before(async function () {
    this.timeout(120_000);
    chain = await startLocalChain();
    snapshot = await chain.snapshot();
    seller = (await hre.viem.getWalletClients())[7].account.address;
    stack = await startStack({ engine: engine.name, gateway: { chain: await gatewayChain(chain) } });
    expect((await linkAddress(stack.gw.ledger, { accountId: stack.sellerId, address: seller })).ok).to.equal(true);
    await stack.addSkill("strict", "/echo", {
      priceMicros: 2_000n,
      outputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
    });
    payer = privateKeyToAccount(generatePrivateKey());
    await chain.mintUsdc(payer.address, 1_000_000n);
    paidFetch = wrapFetchWithPaymentFromConfig(fetch, {
      schemes: [{ network: "eip155:*", client: new ExactEvmScheme(payer) }],
      spendControls: { allowedAssets: [{ network: "eip155:8453", asset: chain.deployment.usdc, maxAmountPerPayment: "10000" }] },
    });
  });
  after(async () => {
    await stack?.close();
    if (snapshot) await chain.revert(snapshot);
  });

  it("completes the payment of an answer that keeps the promise, and refunds one that breaks it", async () => {
    const payerStart = await chain.usdcOf(payer.address);
    const sellerStart = await escrow("earnings", [seller]);

    const kept = await pay({ text: "hi" });
    expect(kept.status).to.equal(200);
    expect(((await kept.json()) as any).metadata).to.include({ skillId: "strict", cost: 0.002 });
    expect(decodePaymentResponseHeader(kept.headers.get("payment-response")!)).to.include({ success: true });
    expect(await chain.usdcOf(payer.address)).to.equal(payerStart - 2_000n);
    expect(await escrow("earnings", [seller])).to.equal(sellerStart + 1_800n);
    expect((await lineOf(kept.headers.get("x-call-id")!))?.outcome).to.equal("success");

    const broken = await pay({ x: 1 });
    expect(broken.status).to.equal(502);
    const body = (await broken.json()) as any;
    expect(body).to.include({ success: false, code: "skill_bad_output" });
    expect(body.error).to.contain("the skill answered something it promised not to");
    expect(body.error).to.match(/Your payment is refunded\.$/);
    expect(body.metadata).to.include({ skillId: "strict", cost: 0 });
    expect(broken.headers.get("payment-response")).to.equal(null);
    // The payer has back what the broken call's payment took; the seller earned nothing more; nothing is pending.
    expect(await chain.usdcOf(payer.address)).to.equal(payerStart - 2_000n);
    expect(await escrow("earnings", [seller])).to.equal(sellerStart + 1_800n);
    expect(await escrow("x402PendingTotal")).to.equal(0n);
    const callId = broken.headers.get("x-call-id")!;
    expect((await new X402PaymentsStore(stack.gw.db).get(callId))?.status).to.equal("refunded");
    expect(await lineOf(callId)).to.deep.equal({
      account_id: X402_SOURCE_ID,
      endpoint: "x402",
      outcome: "skill_bad_output",
      charged_micros: 0n,
    });
    expect(await stack.earned()).to.equal(1_800n);
    await assertBalanced(stack.gw.db);
  });
});
