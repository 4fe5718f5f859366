import { expect } from "chai";
import { encodePaymentSignatureHeader } from "@x402/core/http";
import type { PaymentPayload } from "@x402/core/types";
import { ExactEvmScheme } from "@x402/evm/exact/client";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import type { Config } from "../../server/config";
import type { Database } from "../../server/db/sql";
import { buildSkillRecord } from "../helpers/skills";
import type { Skill } from "../../server/catalog/skills";
import type { PaidCall, PaymentRefusal } from "../../server/gateway/payment";
import { Ledger } from "../../server/ledger/ledger";
import type { EscrowX402Settler } from "../../server/x402/escrow-settlement";
import { X402PaymentsStore } from "../../server/x402/payments-store";
import type { PayerFunds, PaymentVerifier } from "../../server/x402/verifier";
import { type X402Note, X402Payment, type X402PaymentDeps, payerReason, x402Price } from "../../server/x402/x402-payment";
import { describeEachEngine } from "../helpers/engines";

/*
 * The x402 payment's reservation against a payer's funds, on each engine, with the chain stood in for by a verifier
 * whose answers each test sets: one balance pays for as many calls at once as it covers, and the funds are read
 * again right before the call is forwarded, so a payer who moved its USDC away (or used the authorization) since the
 * first read is refused before any work runs, its reservation given back. test/x402/x402.test.ts runs the same
 * against the real token and @x402/fetch.
 */

const PRICE_MICROS = 2_000n;

const skill: Skill = buildSkillRecord({ slug: "paid", priceMicros: PRICE_MICROS, sellerAccountId: "seller", timeoutMs: 2_000 });

describeEachEngine("X402Payment: a payer's funds cover its calls in flight", (engine) => {
  let db: Database;
  let deps: X402PaymentDeps;
  /** What the stand-in token answers, read by each funds() in turn (the last one repeats). */
  let answers: Array<PayerFunds | Error>;
  let reads: number;
  const payer = privateKeyToAccount(generatePrivateKey());

  beforeEach(async () => {
    db = await engine.open();
    const ledger = await Ledger.open(db);
    await ledger.ensureAccount({ id: "seller", kind: "seller", name: "Seller" });
    answers = [{ balanceMicros: PRICE_MICROS, nonceUsed: false }];
    reads = 0;
    const verifier: PaymentVerifier = {
      verify: async () => ({ valid: true }),
      funds: async () => {
        const answer = answers[Math.min(reads++, answers.length - 1)];
        if (answer instanceof Error) throw answer;
        return answer;
      },
    };
    deps = {
      config: { feeMode: "included", feeBps: 1_000n } as Config,
      ledger,
      payments: new X402PaymentsStore(db),
      verifier,
      settler: {} as EscrowX402Settler,
      asset: {
        chainId: 8453,
        usdc: "0x0000000000000000000000000000000000000001",
        escrow: "0x0000000000000000000000000000000000000002",
        tokenName: "USD Coin",
        tokenVersion: "2",
      },
      sellerAddress: async () => "0x0000000000000000000000000000000000000003",
      chainHead: async () => 1n,
      replicaId: null,
      now: Date.now,
    };
  });

  /** A fresh authorization of `payer` for the skill's price, as a PAYMENT-SIGNATURE. */
  const sign = async () => {
    const { requirements } = x402Price(deps, skill);
    const created = await new ExactEvmScheme(payer).createPaymentPayload(2, requirements);
    return encodePaymentSignatureHeader({
      ...created,
      accepted: requirements,
      resource: { url: "http://gateway/x402/skills/paid/call", description: "", mimeType: "application/json" },
    } as PaymentPayload);
  };
  /** A call paid by `header` (a fresh authorization by default), offered and reserved; the refusal, if any. */
  const reserve = async (callId: string, header?: string): Promise<PaymentRefusal<X402Note> | undefined> => {
    const { charge } = x402Price(deps, skill);
    header ??= await sign();
    const payment = new X402Payment(deps, { paymentHeader: header, resourceUrl: "http://gateway/x402/skills/paid/call" });
    const call: PaidCall = { skill, charge, callId, input: {} };
    expect(payment.offer(call)).to.equal(undefined);
    return payment.reserve(call, async () => undefined);
  };
  const statusOf = async (callId: string) => (await deps.payments.get(callId))?.status;

  it("reserves a call the balance covers, and refuses a second one in flight beside it, before it runs", async () => {
    expect(await reserve("0195f0a0-0000-7000-8000-0000000000b1")).to.equal(undefined);
    const second = await reserve("0195f0a0-0000-7000-8000-0000000000b2");
    expect(second).to.deep.include({ code: "payment_invalid" });
    expect(second!.message).to.match(/beside its calls in flight \(\$0\.002\)/);
    expect(second!.note?.paymentRequired?.error).to.equal("invalid_exact_evm_insufficient_balance");
    expect([await statusOf("0195f0a0-0000-7000-8000-0000000000b1"), await statusOf("0195f0a0-0000-7000-8000-0000000000b2")]).to.deep.equal([
      "reserved",
      undefined,
    ]);
  });

  it("reserves exactly one of eight authorizations presented at once on a balance for one (the payer's lock)", async () => {
    const headers = await Promise.all(Array.from({ length: 8 }, () => sign()));
    // Connections open first, so that the eight transactions overlap rather than wait on connects one by one.
    await Promise.all(Array.from({ length: 8 }, () => db.transaction((tx) => tx.value("SELECT 1"))));
    const results = await Promise.all(headers.map((header, i) => reserve(`0195f0a0-0000-7000-8000-00000000010${i}`, header)));
    expect(results.filter((r) => r === undefined)).to.have.length(1);
    for (const refused of results.filter((r) => r !== undefined)) expect(refused).to.deep.include({ code: "payment_invalid" });
  });

  it("refuses a payer who moved its USDC away after the first read, right before forwarding, and gives the reservation back", async () => {
    answers = [
      { balanceMicros: PRICE_MICROS, nonceUsed: false },
      { balanceMicros: 0n, nonceUsed: false },
    ];
    const refused = await reserve("0195f0a0-0000-7000-8000-0000000000c1");
    expect(refused).to.deep.include({ code: "payment_invalid" });
    expect(refused!.message).to.match(/balance \(\$0\.00\) is below the price/);
    expect(await statusOf("0195f0a0-0000-7000-8000-0000000000c1")).to.equal("released");
    expect(reads).to.equal(2);
  });

  it("refuses an authorization used on-chain after the first read, and gives the reservation back", async () => {
    answers = [
      { balanceMicros: PRICE_MICROS, nonceUsed: false },
      { balanceMicros: PRICE_MICROS, nonceUsed: true },
    ];
    const refused = await reserve("0195f0a0-0000-7000-8000-0000000000d1");
    expect(refused).to.deep.include({ code: "payment_invalid" });
    expect(refused!.note?.paymentRequired?.error).to.equal("invalid_exact_evm_nonce_already_used");
    expect(await statusOf("0195f0a0-0000-7000-8000-0000000000d1")).to.equal("released");
  });

  it("gives the reservation back when the second read fails, rather than holding the payer's balance until recovery", async () => {
    answers = [{ balanceMicros: PRICE_MICROS, nonceUsed: false }, new Error("node unreachable")];
    const failed = await reserve("0195f0a0-0000-7000-8000-0000000000e1").catch((error: Error) => error);
    expect((failed as Error).message).to.equal("node unreachable");
    expect(await statusOf("0195f0a0-0000-7000-8000-0000000000e1")).to.equal("released");
    // The payer's balance is free again: the next call is reserved.
    answers = [{ balanceMicros: PRICE_MICROS, nonceUsed: false }];
    expect(await reserve("0195f0a0-0000-7000-8000-0000000000e2")).to.equal(undefined);
  });

  it("frees the balance once a call in flight ends: a released payment no longer counts", async () => {
    expect(await reserve("0195f0a0-0000-7000-8000-0000000000f1")).to.equal(undefined);
    expect(await deps.payments.close("0195f0a0-0000-7000-8000-0000000000f1", "reserved", "released", Date.now())).to.equal(true);
    expect(await reserve("0195f0a0-0000-7000-8000-0000000000f2")).to.equal(undefined);
  });

  it("tells a reused authorization so, whatever the payer's balance", async () => {
    const header = await sign();
    expect(await reserve("0195f0a0-0000-7000-8000-0000000000a1", header)).to.equal(undefined);
    expect(await reserve("0195f0a0-0000-7000-8000-0000000000a2", header)).to.deep.include({ code: "payment_reused" });
  });
});

describe("payerReason: a refused settlement in a sentence for the payer", () => {
  const rows: Array<[string, string]> = [
    ["ERC20InsufficientBalance", "the payer's USDC no longer covers the price"],
    ["ERC20: transfer amount exceeds balance", "the payer's USDC no longer covers the price"],
    ["ERC3009UsedAuthorization", "the authorization was used or cancelled in the meantime"],
    ["FiatTokenV2: authorization is used or canceled", "the authorization was used or cancelled in the meantime"],
    ["ERC3009InvalidAuthorizationTime", "the authorization expired before it could be used"],
    ["ERC3009InvalidSignature", "the authorization's signature no longer verifies"],
    ["An unknown RPC error occurred.", "the chain refused the transfer"],
  ];
  for (const [revert, sentence] of rows) {
    it(`says "${sentence}" for ${revert}`, () => expect(payerReason(revert)).to.equal(sentence));
  }
});
