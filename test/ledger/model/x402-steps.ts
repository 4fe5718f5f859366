import { expect } from "chai";
import { computeCharge } from "../../../server/ledger/fees";
import { PLATFORM_ACCOUNT_ID, X402_SOURCE_ID } from "../../../server/ledger/ledger";
import { X402PaymentsStore } from "../../../server/x402/payments-store";
import { type Model, type Real, Step, move } from "./model";

/*
 * x402 payments (server/x402/): a call paid on-chain by an authorization, recorded once its settlement is mined
 * the way X402Service records it: the entry and the payment marked settled in one transaction.
 */

let payments = 0;

/**
 * One paid x402 call: its authorization reserved by (payer, nonce), then its settlement recorded. A nonce already
 * presented (`reuse`) is refused at the reservation, and nothing moves.
 */
export class X402Payment extends Step {
  constructor(
    readonly sellerId: string,
    readonly priceMicros: bigint,
    readonly feeBps: bigint,
    readonly reuse: boolean,
  ) {
    super();
  }
  protected async apply(model: Model, real: Real): Promise<void> {
    const charge = computeCharge(this.priceMicros, "included", this.feeBps);
    const store = new X402PaymentsStore(real.db);
    const callId = `x402-prop-${++payments}`;
    // Every reuse presents the first nonce ever taken: refused once it exists, which it does after the first payment.
    const nonce = this.reuse ? `0x${"0".repeat(64)}` : `0x${payments.toString(16).padStart(64, "f")}`;
    const reserved = await store.reserve(
      {
        callId,
        skillId: "skill:x402",
        sellerAccountId: this.sellerId,
        payer: "0x00000000000000000000000000000000000000aa",
        nonce,
        validAfter: 0n,
        validBefore: 4_000_000_000n,
        amountMicros: charge.chargedMicros,
        sellerMicros: charge.sellerMicros,
        feeMicros: charge.feeMicros,
      },
      null,
      Date.now(),
      // Exactly the price: each step settles its payment before the next, so nothing else of this payer is open.
      charge.chargedMicros,
    );
    const taken = model.x402Nonces.has(nonce);
    expect(reserved.kind, `reservation of nonce ${nonce}`).to.equal(taken ? "reused" : "reserved");
    if (reserved.kind !== "reserved") return;
    model.x402Nonces.add(nonce);
    // reserved → collecting as markCollecting does it, but without its durable wait: after a restart this test's
    // SQLite handles share one connection between two group commits, which production never does.
    expect(
      await real.db.value(
        "UPDATE x402_payments SET status = 'collecting', settle_block = 1 WHERE call_id = ? AND status = 'reserved' RETURNING call_id",
        [callId],
      ),
    ).to.equal(callId);
    const pending = {
      payer: "0x00000000000000000000000000000000000000aa" as const,
      seller: "0x00000000000000000000000000000000000000bb" as const,
      value: charge.chargedMicros,
      platformFee: charge.feeMicros,
      reclaimableAt: 4_000_000_000n,
    };
    expect(await store.markCollected(callId, "0xcollect", pending)).to.equal(true);
    // Not waited on for durability here: after a restart this test's SQLite handles share one connection between
    // two group commits, which production never does; the Flush and Restart steps commit what is open.
    await real.db.transaction(async (tx) => {
      const entryId = await real.ledger.recordX402Payment(
        { callId, sellerAccountId: this.sellerId, sellerMicros: charge.sellerMicros, feeMicros: charge.feeMicros, txHash: "0xcomplete" },
        tx,
      );
      expect(await store.markSettled(callId, "0xcollect", "0xcomplete", entryId, Date.now(), tx)).to.equal(true);
    });
    move(model, `${X402_SOURCE_ID}/source`, -charge.chargedMicros);
    if (charge.sellerMicros > 0n) move(model, `${this.sellerId}/earned`, charge.sellerMicros);
    if (charge.feeMicros > 0n) move(model, `${PLATFORM_ACCOUNT_ID}/fees`, charge.feeMicros);
  }
  toString(): string {
    return `x402(${this.sellerId}, ${this.priceMicros}, ${this.feeBps} bps${this.reuse ? ", reused nonce" : ""})`;
  }
}
