import type { PaymentRequirements } from "@x402/core/types";
import type { Address, Hex } from "viem";
import type { Charge } from "../ledger/fees";
import { X402_SOURCE_ID } from "../ledger/ledger";
import { callIdToBytes32 } from "../chain/receipts";
import type { Skill, SkillRegistry } from "../catalog/skills";
import type { CallOutcome, CallRecord, CallsStore } from "../gateway/calls-store";
import type { CallResult } from "../gateway/call-result";
import type { CallPipeline } from "../gateway/pipeline";
import type { X402PaymentRow } from "./payments-store";
import { networkOf } from "./protocol";
import { type X402Note, X402Payment, type X402PaymentDeps, recordSettlement, x402Price } from "./x402-payment";

export type { X402Note } from "./x402-payment";

/** A paid x402 call as the HTTP layer hands it over. */
export interface X402CallRequest {
  skillRef: string;
  input: unknown;
  /** The PAYMENT-SIGNATURE header, if any. */
  paymentHeader: string | undefined;
  /** The absolute URL called: the resource the payment requirements describe. */
  resourceUrl: string;
  /** performance.now() when the request arrived. */
  startedAt: number;
}

/** The x402 payments' parts (./x402-payment.ts), and what the service adds: the skills, the calls log, the pipeline. */
export interface X402ServiceDeps extends Omit<X402PaymentDeps, "replicaId" | "now"> {
  skills: SkillRegistry;
  calls: CallsStore;
  pipeline: CallPipeline;
  /** This replica's name in the payments it reserves (several replicas may share the database). */
  replicaId?: string;
  now?: () => number;
}

/**
 * Pay-per-call with x402 (protocol version 2, `exact` scheme, EIP-3009): every listed skill, called without an
 * account or key, on the call pipeline (server/gateway/pipeline.ts, which documents the order of the checks) with an
 * x402 authorization as the call's payment (./x402-payment.ts, which documents its own). A free skill is served as it
 * is, under the per-address limits of unauthenticated routes. Payments whose fate was not known (a crash, a node
 * that stopped answering) are settled or closed by `recover`.
 */
export class X402Service {
  private readonly paymentDeps: X402PaymentDeps;

  constructor(private readonly deps: X402ServiceDeps) {
    this.paymentDeps = { ...deps, replicaId: deps.replicaId ?? null, now: deps.now ?? Date.now };
  }

  /** What one call of `skill` costs over x402: the charge per the fee mode, and its requirements. */
  price(skill: Skill): { charge: Charge; requirements: PaymentRequirements } {
    return x402Price(this.deps, skill);
  }

  /** The skills payable over x402, for discovery: every listed one with a price whose seller the escrow can credit. */
  async payable(): Promise<Skill[]> {
    const priced = this.deps.skills.list().filter((skill) => skill.priceMicros > 0n);
    const sellers = new Map<string, boolean>();
    for (const id of new Set(priced.map((skill) => skill.sellerAccountId)))
      sellers.set(id, (await this.deps.sellerAddress(id)) !== undefined);
    return priced.filter((skill) => sellers.get(skill.sellerAccountId));
  }

  get network(): string {
    return networkOf(this.deps.asset);
  }

  /** One call, paid by the authorization in its PAYMENT-SIGNATURE. */
  call(req: X402CallRequest): Promise<CallResult<X402Note>> {
    const payment = new X402Payment(this.paymentDeps, { paymentHeader: req.paymentHeader, resourceUrl: req.resourceUrl });
    return this.deps.pipeline.run({ endpoint: "x402", skillRef: req.skillRef, input: req.input, startedAt: req.startedAt }, payment);
  }

  /**
   * Resolves payments left open (reserved or settling) before `beforeMs`: by a crash, or a node that stopped
   * answering. Every open payment is looked at, a page at a time:
   * - reserved: its settlement was never sent (a payment is marked settling, durably, first): closed, nothing paid;
   * - settling, with its X402Settled event on-chain (searched from the block it was sent at): recorded as settled;
   * - settling, no event, and expired by the chain's clock: it can never settle now. Closed `released` when its
   *   nonce is unused, `failed` when the nonce was used otherwise (cancelled, or the authorization submitted to
   *   the token directly), after one more look for the event;
   * - settling, no event, not expired: waits for a later pass (an authorization lasts minutes: see call()).
   */
  async recover(
    chain: {
      find(callId: Hex, fromBlock: bigint): Promise<{ txHash: Hex } | undefined>;
      authorizationUsed(payer: Address, nonce: Hex): Promise<boolean>;
      /** The latest block's timestamp, in seconds: the clock the token checks validBefore against. */
      timeS(): Promise<bigint>;
    },
    beforeMs: number,
  ): Promise<{ settled: number; closed: number; waiting: number }> {
    const counts = { settled: 0, closed: 0, waiting: 0 };
    const chainTimeS = await chain.timeS();
    let after: { createdAtMs: number; callId: string } | undefined;
    for (;;) {
      const page = await this.paymentDeps.payments.open(beforeMs, after);
      if (page.length === 0) break;
      after = { createdAtMs: page[page.length - 1].createdAtMs, callId: page[page.length - 1].callId };
      for (const payment of page) {
        const id = callIdToBytes32(payment.callId);
        if (payment.status === "settling") {
          const from = payment.settleBlock ?? 0n;
          const found = await chain.find(id, from);
          if (found) {
            await this.recordRecovered(payment, found.txHash);
            counts.settled++;
            continue;
          }
          if (chainTimeS <= payment.validBefore) {
            counts.waiting++;
            continue;
          }
          if (await chain.authorizationUsed(payment.payer as Address, payment.nonce as Hex)) {
            // Used, but not by our settlement as far as the last look went: look once more, now that it can no longer land.
            const late = await chain.find(id, from);
            if (late) {
              await this.recordRecovered(payment, late.txHash);
              counts.settled++;
            } else {
              await this.closeRecovered(payment, "settling", "failed");
              counts.closed++;
            }
            continue;
          }
          await this.closeRecovered(payment, "settling", "released");
          counts.closed++;
          continue;
        }
        await this.closeRecovered(payment, "reserved", "released");
        counts.closed++;
      }
    }
    return counts;
  }

  /** A payment recovery found settled on-chain: recorded as any settled one (the client was told 503, or nothing). */
  private async recordRecovered(payment: X402PaymentRow, txHash: Hex): Promise<void> {
    await recordSettlement(this.paymentDeps, payment, txHash, (tx) =>
      this.deps.calls.record(recoveredLine(payment, 503, "success", payment.amountMicros), tx),
    );
  }

  /** A payment recovery found never settled: closed, and its call logged as the gateway's failure, charged nothing. */
  private async closeRecovered(payment: X402PaymentRow, from: "reserved" | "settling", status: "released" | "failed"): Promise<void> {
    await this.deps.ledger.db.transaction(async (tx) => {
      if (!(await this.paymentDeps.payments.close(payment.callId, from, status, this.paymentDeps.now(), null, tx))) return;
      await this.deps.calls.record(recoveredLine(payment, 500, "internal_error", 0n), tx);
    });
  }
}

/** The calls log's line of a call whose payment recovery resolved (its answer, if any, was a 503, or never sent). */
function recoveredLine(payment: X402PaymentRow, httpStatus: number, outcome: CallOutcome, chargedMicros: bigint): CallRecord {
  return {
    id: payment.callId,
    accountId: X402_SOURCE_ID,
    apiKeyId: "x402",
    skillId: payment.skillId,
    endpoint: "x402",
    httpStatus,
    outcome,
    chargedMicros,
    holdId: null,
    latencyUs: 0,
    createdAtMs: payment.createdAtMs,
  };
}
