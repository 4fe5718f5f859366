import { expect } from "chai";
import { noRecord } from "../helpers/records";
import { encodePaymentSignatureHeader } from "@x402/core/http";
import type { PaymentPayload } from "@x402/core/types";
import { ExactEvmScheme } from "@x402/evm/exact/client";
import type { Address, Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import type { Config } from "../../server/config";
import type { Database } from "../../server/db/sql";
import { buildSkillRecord } from "../helpers/skills";
import type { Skill } from "../../server/catalog/skills";
import type { PaidCall, PaymentRefusal, RecordCall } from "../../server/gateway/payment";
import { Ledger } from "../../server/ledger/ledger";
import type { EscrowX402Settler } from "../../server/x402/escrow-settlement";
import { X402PaymentsStore } from "../../server/x402/payments-store";
import type { PaymentVerifier } from "../../server/x402/verifier";
import { type X402Note, X402Payment, type X402PaymentDeps, payerReason, x402Price } from "../../server/x402/x402-payment";
import { describeEachEngine } from "../helpers/engines";

/*
 * The x402 payment's reservation and collection against a payer's funds, on each engine, with the chain stood in for
 * by a token whose balance each test sets: the verifier reads it, and a collection takes the price from it (or is
 * refused when it is short), as the escrow's collectX402 does. One balance pays for as many calls at once as it
 * covers; a payer who moved its USDC away since it was read is refused at the collection, before any work runs.
 * test/x402/x402.test.ts runs the same against the real token, the real escrow and @x402/fetch.
 */

const PRICE_MICROS = 2_000n;

const skill: Skill = buildSkillRecord({ slug: "paid", priceMicros: PRICE_MICROS, sellerAccountId: "seller", timeoutMs: 2_000 });

/** A stand-in for the token and the escrow: a balance, collections that take from it, completions and refunds. */
class StandInChain {
  balance = PRICE_MICROS;
  /** Set to hold every collection until it is opened (a transaction waiting to be mined). */
  gate: Promise<void> | undefined;
  /** What the next collection, completion or refund comes to instead of being mined ("refused", "unknown"). */
  next: { collect?: "unknown"; complete?: "unknown"; refund?: "unknown" } = {};
  collections = 0;
  private txs = 0;

  settler(): EscrowX402Settler {
    const tx = () => `0x${(++this.txs).toString(16).padStart(64, "0")}` as Hex;
    return {
      collect: async (auth: { from: Address; value: bigint }, seller: Address, fee: bigint) => {
        await this.gate;
        if (this.next.collect === "unknown") return { kind: "unknown", error: new Error("node unreachable") };
        if (this.balance < auth.value) return { kind: "refused", reason: "ERC20InsufficientBalance" };
        this.balance -= auth.value;
        this.collections++;
        return {
          kind: "mined",
          txHash: tx(),
          gasUsed: 1n,
          pending: { payer: auth.from, seller, value: auth.value, platformFee: fee, reclaimableAt: 4_000_000_000n },
        };
      },
      complete: async () =>
        this.next.complete === "unknown" ? { kind: "unknown", error: new Error("lost") } : { kind: "mined", txHash: tx(), gasUsed: 1n },
      refund: async (_id: Hex, pending: { value: bigint }) => {
        if (this.next.refund === "unknown") return { kind: "unknown", error: new Error("lost") };
        this.balance += pending.value;
        return { kind: "mined", txHash: tx(), gasUsed: 1n };
      },
    } as unknown as EscrowX402Settler;
  }
}

describeEachEngine("X402Payment: collected before the call runs, within the payer's funds", (engine) => {
  let db: Database;
  let deps: X402PaymentDeps;
  let chain: StandInChain;
  const payer = privateKeyToAccount(generatePrivateKey());

  beforeEach(async () => {
    db = await engine.open();
    const ledger = await Ledger.open(db);
    await ledger.ensureAccount({ id: "seller", kind: "seller", name: "Seller" });
    chain = new StandInChain();
    const verifier: PaymentVerifier = {
      verify: async () => ({ valid: true }),
      funds: async () => ({ balanceMicros: chain.balance, nonceUsed: false }),
    };
    deps = {
      config: { feeMode: "included", feeBps: 1_000n } as Config,
      ledger,
      payments: new X402PaymentsStore(db),
      verifier,
      settler: chain.settler(),
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
  /** A call paid by `header` (a fresh authorization by default), offered and reserved: its payment and refusal, if any. */
  const reserveWith = async (callId: string, header?: string) => {
    const { charge } = x402Price(deps, skill);
    header ??= await sign();
    const payment = new X402Payment(deps, { paymentHeader: header, resourceUrl: "http://gateway/x402/skills/paid/call" });
    const call: PaidCall = { skill, charge, callId, input: {} };
    expect(payment.offer(call)).to.equal(undefined);
    return { payment, refused: await payment.reserve(call, async () => undefined) };
  };
  const reserve = async (callId: string, header?: string): Promise<PaymentRefusal<X402Note> | undefined> =>
    (await reserveWith(callId, header)).refused;
  const statusOf = async (callId: string) => (await deps.payments.get(callId))?.status;
  const record: RecordCall = noRecord();

  it("collects a call the balance covers before it runs, and refuses a second one beside it while the first is not collected", async () => {
    let open!: () => void;
    chain.gate = new Promise((resolve) => (open = resolve));
    const first = reserve("0195f0a0-0000-7000-8000-0000000000b1");
    // The first is reserved and its collection sent (held at the gate): the second counts it.
    while ((await statusOf("0195f0a0-0000-7000-8000-0000000000b1")) !== "collecting") await new Promise((r) => setTimeout(r, 5));
    const second = await reserve("0195f0a0-0000-7000-8000-0000000000b2");
    expect(second).to.deep.include({ code: "payment_invalid" });
    expect(second!.message).to.match(/beside its calls in flight \(\$0\.002\)/);
    expect(second!.note?.paymentRequired?.error).to.equal("invalid_exact_evm_insufficient_balance");
    open();
    expect(await first).to.equal(undefined);
    expect(await statusOf("0195f0a0-0000-7000-8000-0000000000b1")).to.equal("collected");
    expect(await statusOf("0195f0a0-0000-7000-8000-0000000000b2")).to.equal(undefined);
    expect(chain.balance).to.equal(0n);
  });

  it("collects exactly one of eight authorizations presented at once on a balance for one (the payer's lock)", async () => {
    const headers = await Promise.all(Array.from({ length: 8 }, () => sign()));
    // Connections open first, so that the eight transactions overlap rather than wait on connects one by one.
    await Promise.all(Array.from({ length: 8 }, () => db.transaction((tx) => tx.value("SELECT 1"))));
    const results = await Promise.all(headers.map((header, i) => reserve(`0195f0a0-0000-7000-8000-00000000010${i}`, header)));
    expect(results.filter((r) => r === undefined)).to.have.length(1);
    for (const refused of results.filter((r) => r !== undefined))
      expect(["payment_invalid", "payment_settlement_failed"]).to.include(refused!.code);
    expect(chain.collections).to.equal(1);
  });

  it("refuses a payer whose USDC left after it was read: the collection is refused, nothing was paid, nothing runs", async () => {
    deps.verifier.funds = async () => ({ balanceMicros: PRICE_MICROS, nonceUsed: false });
    chain.balance = 0n;
    const refused = await reserve("0195f0a0-0000-7000-8000-0000000000c1");
    expect(refused).to.deep.include({
      code: "payment_settlement_failed",
      message:
        "Payment could not be collected: the payer's USDC no longer covers the price. Nothing was paid, and the skill was not called.",
    });
    expect(refused!.note?.settlement).to.include({ success: false, errorReason: "settlement_failed" });
    expect(await statusOf("0195f0a0-0000-7000-8000-0000000000c1")).to.equal("failed");
  });

  it("a collection whose fate is unknown is a 503 before the call runs, and stays collecting for recovery", async () => {
    chain.next.collect = "unknown";
    const refused = await reserve("0195f0a0-0000-7000-8000-0000000000d1");
    expect(refused).to.deep.include({ code: "chain_unavailable" });
    expect(refused!.message).to.match(/the skill was not called/);
    expect(await statusOf("0195f0a0-0000-7000-8000-0000000000d1")).to.equal("collecting");
  });

  it("gives the reservation back when the collection cannot be sent, rather than holding the payer's balance until recovery", async () => {
    deps.chainHead = async () => {
      throw new Error("node unreachable");
    };
    const failed = await reserve("0195f0a0-0000-7000-8000-0000000000e1").catch((error: Error) => error);
    expect((failed as Error).message).to.equal("node unreachable");
    expect(await statusOf("0195f0a0-0000-7000-8000-0000000000e1")).to.equal("released");
    deps.chainHead = async () => 1n;
    expect(await reserve("0195f0a0-0000-7000-8000-0000000000e2")).to.equal(undefined);
  });

  it("a collected payment no longer counts against the balance it left: the next call is read against what remains", async () => {
    chain.balance = 2n * PRICE_MICROS;
    expect(await reserve("0195f0a0-0000-7000-8000-0000000000f1")).to.equal(undefined);
    expect(await reserve("0195f0a0-0000-7000-8000-0000000000f2")).to.equal(undefined);
    expect(await reserve("0195f0a0-0000-7000-8000-0000000000f3")).to.deep.include({ code: "payment_invalid" });
  });

  it("settles by completing the collected payment; a completion whose fate is unknown still answers, left completing", async () => {
    const { payment } = await reserveWith("0195f0a0-0000-7000-8000-000000000101");
    expect(await payment.settle(record)).to.have.property("note");
    expect(await statusOf("0195f0a0-0000-7000-8000-000000000101")).to.equal("settled");

    chain.balance = PRICE_MICROS;
    chain.next.complete = "unknown";
    const lost = (await reserveWith("0195f0a0-0000-7000-8000-000000000102")).payment;
    const settled = await lost.settle(record);
    expect(settled.note?.settlement).to.include({ success: true, amount: "2000" });
    expect(await statusOf("0195f0a0-0000-7000-8000-000000000102")).to.equal("completing");
  });

  it("voids by refunding the collected payment; a refund whose fate is unknown is left refunding", async () => {
    const { payment } = await reserveWith("0195f0a0-0000-7000-8000-000000000201");
    expect(chain.balance).to.equal(0n);
    await payment.void(noRecord());
    expect(chain.balance).to.equal(PRICE_MICROS);
    expect(await statusOf("0195f0a0-0000-7000-8000-000000000201")).to.equal("refunded");

    chain.next.refund = "unknown";
    const lost = (await reserveWith("0195f0a0-0000-7000-8000-000000000202")).payment;
    await lost.void(noRecord());
    expect(await statusOf("0195f0a0-0000-7000-8000-000000000202")).to.equal("refunding");
  });

  it("tells a reused authorization so, whatever the payer's balance", async () => {
    const header = await sign();
    chain.gate = new Promise(() => undefined);
    void reserve("0195f0a0-0000-7000-8000-0000000000a1", header);
    while ((await statusOf("0195f0a0-0000-7000-8000-0000000000a1")) !== "collecting") await new Promise((r) => setTimeout(r, 5));
    chain.gate = undefined;
    expect(await reserve("0195f0a0-0000-7000-8000-0000000000a2", header)).to.deep.include({ code: "payment_reused" });
  });
});

describe("payerReason: a refused collection in a sentence for the payer", () => {
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
