import { expect } from "chai";
import hre from "hardhat";
import { decodePaymentRequiredHeader, decodePaymentSignatureHeader, encodePaymentSignatureHeader } from "@x402/core/http";
import type { PaymentPayload } from "@x402/core/types";
import { ExactEvmScheme } from "@x402/evm/exact/client";
import type { Address } from "viem";
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from "viem/accounts";
import { linkAddress } from "../../server/settlement/addresses";
import { X402PaymentsStore } from "../../server/x402/payments-store";
import { type LocalChain, gatewayChain, startLocalChain } from "../helpers/chain";
import { type TestStack, startStack } from "../helpers/gateway";

/**
 * The documented order of the call path's checks with an x402 payment (the pipeline's steps, server/gateway/pipeline.ts,
 * and the payment's own, server/x402/x402-payment.ts): when a paid call breaks several rules at once, the earliest check decides the answer. Each row breaks its own rule and,
 * wherever the path allows it, every later one, so it pins the position of its check. In `before`, two authorizations
 * of one payer are presented to two skills whose backend fails (each collected, then refunded): each spends the payer's
 * one call per minute on its skill (step 12). A third, `spent`, is reserved and never collected, as a crash between the
 * two leaves a payment (step 13), so its nonce stays unused on-chain. The rows then present `spent`, or a copy with
 * some fields changed after signing (which also breaks its signature, step 10), where they need to. Every refusal
 * leaves the payer's USDC as it was and sends no PAYMENT-RESPONSE. Step 8 needs no hand-signed authorization: the
 * window is checked before the signature.
 */
describe("the order of the x402 call path's checks", () => {
  let chain: LocalChain;
  let snapshot: string;
  let stack: TestStack;
  let payer: PrivateKeyAccount;
  let spent: string;
  let otherSignature: string;
  const typed = { inputSchema: { type: "object", required: ["n"] }, priceMicros: 2_000n, rateLimitPerMin: 1 };
  const usdcOf = (address: Address) => chain.usdcOf(address);
  const call = (slug: string, input: unknown, header?: string) =>
    stack.post(`/x402/skills/${slug}/call`, input, { key: null, headers: header === undefined ? {} : { "payment-signature": header } });
  /** A payment signed by `payer` for `slug`'s requirements, valid for 120 s (about the longest a 2 s skill accepts). */
  const sign = async (slug = "open-fail") => {
    const required = decodePaymentRequiredHeader((await call(slug, { n: 1 })).headers.get("payment-required")!);
    const requirements = { ...required.accepts[0], maxTimeoutSeconds: 120 };
    const created = await new ExactEvmScheme(payer).createPaymentPayload(2, requirements);
    return encodePaymentSignatureHeader({ ...created, accepted: requirements, resource: required.resource } as PaymentPayload);
  };
  /** `spent`, changed after signing: its signature no longer matches (step 10 refuses it), its nonce is reserved. */
  const changed = (change: (payload: any, nowS: number) => void) => () => {
    const payload = decodePaymentSignatureHeader(spent) as any;
    payload.payload.signature = otherSignature;
    change(payload, Math.floor(Date.now() / 1000));
    return encodePaymentSignatureHeader(payload);
  };
  const notYetValid = (p: any, nowS: number) => (p.payload.authorization.validAfter = String(nowS + 3_600));
  const validTooLong = (p: any, nowS: number) => (p.payload.authorization.validBefore = String(nowS + 1_000_000));

  before(async function () {
    this.timeout(120_000);
    chain = await startLocalChain();
    snapshot = await chain.snapshot();
    const wallets = await hre.viem.getWalletClients();
    stack = await startStack({ gateway: { chain: await gatewayChain(chain) } });
    expect((await linkAddress(stack.gw.ledger, { accountId: stack.sellerId, address: wallets[7].account.address })).ok).to.equal(true);
    await stack.gw.ledger.ensureAccount({ id: "seller-2", kind: "seller", name: "Seller Two" });
    await stack.addSkill("free-fail", "/fail", { ...typed, priceMicros: 0n });
    await stack.addSkill("typed-fail", "/fail", typed);
    const open = await stack.addSkill("open-fail", "/fail", { ...typed, rateLimitPerMin: null });
    await stack.addSkill("paid", "/echo", { priceMicros: 2_000n });
    // Sold by the linked seller while `spent` spends its limit, then by seller 2, who has no address.
    await stack.addSkill("orphan-fail", "/fail", typed);
    payer = privateKeyToAccount(generatePrivateKey());
    await chain.mintUsdc(payer.address, 1_000_000n);
    const other = await sign();
    otherSignature = (decodePaymentSignatureHeader(other) as any).payload.signature;
    expect((await call("typed-fail", { n: 1 }, other)).status).to.equal(502);
    expect((await call("orphan-fail", { n: 1 }, await sign())).status).to.equal(502);
    await stack.addSkill("orphan-fail", "/fail", { ...typed, sellerAccountId: "seller-2" });
    spent = await sign();
    const { authorization } = (decodePaymentSignatureHeader(spent) as any).payload;
    const reserved = await new X402PaymentsStore(stack.gw.db).reserve(
      {
        callId: "0195f0a0-0000-7000-8000-00000000a11e",
        skillId: open.id,
        sellerAccountId: stack.sellerId,
        payer: authorization.from.toLowerCase(),
        nonce: authorization.nonce,
        validAfter: 0n,
        validBefore: BigInt(authorization.validBefore),
        amountMicros: 2_000n,
        sellerMicros: 1_800n,
        feeMicros: 200n,
      },
      null,
      Date.now(),
      1_000_000n,
    );
    expect(reserved.kind).to.equal("reserved");
  });
  after(async () => {
    await stack?.close();
    if (snapshot) await chain.revert(snapshot);
  });

  const rows: Array<{
    check: string;
    status: number;
    code: string;
    slug: string;
    input: unknown;
    header: () => string | undefined | Promise<string>;
    required?: string;
    error?: RegExp;
  }> = [
    { check: "1. skill exists", status: 404, code: "skill_not_found", slug: "no-such", input: {}, header: () => undefined },
    { check: "2. a free skill's input", status: 400, code: "invalid_input", slug: "free-fail", input: {}, header: () => undefined },
    // A free skill is forwarded without payment, even with a malformed PAYMENT-SIGNATURE.
    { check: "2. a free skill's backend", status: 502, code: "skill_error", slug: "free-fail", input: { n: 1 }, header: () => "junk" },
    { check: "3. a payment is present", status: 402, code: "payment_required", slug: "orphan-fail", input: {}, header: () => undefined },
    {
      check: "4. the payment parses",
      status: 402,
      code: "payment_invalid",
      slug: "orphan-fail",
      input: {},
      header: () => "not-base64-json",
      required: "invalid_payload",
    },
    {
      check: "5. input schema",
      status: 400,
      code: "invalid_input",
      slug: "orphan-fail",
      input: {},
      header: changed((p, nowS) => ((p.accepted.amount = "1999"), validTooLong(p, nowS), notYetValid(p, nowS))),
    },
    {
      check: "6. the accepted requirements",
      status: 402,
      code: "payment_invalid",
      slug: "orphan-fail",
      input: { n: 1 },
      header: changed((p, nowS) => ((p.accepted.amount = "1999"), validTooLong(p, nowS), notYetValid(p, nowS))),
      required: "invalid_payment_requirements",
      error: /amount 1999 is not the price 2000/,
    },
    {
      check: "7. not valid for longer than asked",
      status: 402,
      code: "payment_invalid",
      slug: "orphan-fail",
      input: { n: 1 },
      header: changed((p, nowS) => (validTooLong(p, nowS), notYetValid(p, nowS))),
      required: "invalid_exact_evm_payload_authorization_valid_before",
      error: /longer than the \d+ s asked/,
    },
    {
      check: "8. already valid",
      status: 402,
      code: "payment_invalid",
      slug: "orphan-fail",
      input: { n: 1 },
      header: changed((p, nowS) => ((p.payload.authorization.validBefore = String(nowS + 1)), notYetValid(p, nowS))),
      required: "invalid_exact_evm_payload_authorization_valid_after",
      error: /not valid yet/,
    },
    {
      check: "9. valid long enough",
      status: 402,
      code: "payment_invalid",
      slug: "orphan-fail",
      input: { n: 1 },
      header: changed((p, nowS) => (p.payload.authorization.validBefore = String(nowS + 1))),
      required: "invalid_exact_evm_payload_authorization_valid_before",
      error: /before this call and its settlement can finish/,
    },
    {
      check: "10. the verifier (another authorization's signature)",
      status: 402,
      code: "payment_invalid",
      slug: "orphan-fail",
      input: { n: 1 },
      header: changed(() => {}),
      required: "invalid_exact_evm_signature",
    },
    {
      check: "11. the seller's address",
      status: 503,
      code: "chain_not_configured",
      slug: "orphan-fail",
      input: { n: 1 },
      header: () => spent,
    },
    { check: "12. the payer's rate limit", status: 429, code: "rate_limited", slug: "typed-fail", input: { n: 1 }, header: () => spent },
    {
      check: "13. the reservation",
      status: 402,
      code: "payment_reused",
      slug: "open-fail",
      input: { n: 1 },
      header: () => spent,
      required: "invalid_exact_evm_nonce_already_used",
    },
    { check: "14. the backend", status: 502, code: "skill_error", slug: "open-fail", input: { n: 1 }, header: () => sign() },
  ];

  for (const row of rows) {
    it(`answers ${row.status} ${row.code} first at step ${row.check}`, async () => {
      const before = await usdcOf(payer.address);
      const res = await call(row.slug, row.input, await row.header());
      expect(res.status).to.equal(row.status);
      expect(res.body.code).to.equal(row.code);
      if (row.error) expect(res.body.error).to.match(row.error);
      // Every 402 carries the requirements; its error says which check refused (none when the payment is missing).
      if (row.status === 402) expect(decodePaymentRequiredHeader(res.headers.get("payment-required")!).error).to.equal(row.required);
      expect(res.headers.get("payment-response")).to.equal(null);
      expect(await usdcOf(payer.address)).to.equal(before);
    });
  }

  it("answers an unknown skill as the keyed endpoints do: the error envelope alone, no call metadata, no call id", async () => {
    const x402 = await call("no-such", {});
    const keyed = await stack.post("/v1/skills/no-such/call", {});
    for (const res of [x402, keyed]) {
      expect(res.status).to.equal(404);
      expect(Object.keys(res.body).sort()).to.deep.equal(["code", "error", "request_id", "success"]);
      expect(res.headers.get("x-call-id")).to.equal(null);
    }
  });

  it("a call that passes every check answers 200 with a PAYMENT-RESPONSE, and the payer pays", async () => {
    const before = await usdcOf(payer.address);
    const res = await call("paid", { text: "hi" }, await sign("paid"));
    expect(res.status).to.equal(200);
    expect(res.headers.get("payment-response")).to.be.a("string");
    expect(await usdcOf(payer.address)).to.equal(before - 2_000n);
  });
});
