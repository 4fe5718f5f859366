import type { PaymentRequirements } from "@x402/core/types";
import type { Address, Hex } from "viem";
import type { Charge } from "../ledger/fees";
import { X402_SOURCE_ID } from "../ledger/ledger";
import { usdDisplay } from "../ledger/money";
import { type Refusal, refusal } from "../errors";
import { callIdToBytes32 } from "../chain/receipts";
import type { Skill, SkillRegistry } from "../catalog/skills";
import type { CallOutcome, CallRecord, CallsStore } from "../gateway/calls-store";
import type { CallResult } from "../gateway/call-result";
import type { CallPipeline } from "../gateway/pipeline";
import type { PendingX402 } from "./escrow-settlement";
import type { X402PaymentRow } from "./payments-store";
import { networkOf } from "./protocol";
import { type X402Note, X402Payment, type X402PaymentDeps, recordSettlement, x402Price } from "./x402-payment";

export type { X402Note } from "./x402-payment";

/** The refusal of a usage-priced skill over x402, and undefined for any other. */
function usageRefused(skill: Skill): Refusal | undefined {
  if (skill.pricing !== "usage") return undefined;
  return refusal(
    "usage_pricing_unsupported",
    `The skill "${skill.slug}" is usage-priced (up to ${usdDisplay(skill.priceMicros)} per call, charged for what each call used), and x402 pays one fixed amount per call: it cannot be paid with x402. Call it with an API key (POST /v1/call). Nothing was charged.`,
  );
}

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

  /**
   * The skills payable over x402, for discovery: every listed one with a fixed price whose seller the escrow can credit.
   * A usage-priced skill is left out: `exact` pays one amount fixed before the call (see call()).
   */
  async payable(): Promise<Skill[]> {
    const priced = this.deps.skills.list().filter((skill) => skill.priceMicros > 0n && skill.pricing === "fixed");
    const sellers = new Map<string, boolean>();
    for (const id of new Set(priced.map((skill) => skill.sellerAccountId)))
      sellers.set(id, (await this.deps.sellerAddress(id)) !== undefined);
    return priced.filter((skill) => sellers.get(skill.sellerAccountId));
  }

  get network(): string {
    return networkOf(this.deps.asset);
  }

  /**
   * One call, paid by the authorization in its PAYMENT-SIGNATURE. A usage-priced skill is refused (409
   * usage_pricing_unsupported) before anything else: the `exact` scheme collects one amount before the call, and x402's
   * `upto` scheme, which could pay what a call used, settles through x402's own contracts, which this gateway's escrow
   * does not take (docs/x402.md).
   */
  call(req: X402CallRequest): Promise<CallResult<X402Note>> {
    const payment = new X402Payment(this.paymentDeps, { paymentHeader: req.paymentHeader, resourceUrl: req.resourceUrl });
    return this.deps.pipeline.run(
      { endpoint: "x402", skillRef: req.skillRef, input: req.input, startedAt: req.startedAt, permits: usageRefused },
      payment,
    );
  }

  /**
   * Resolves payments left open before `beforeMs`: by a crash, or a node that stopped answering. Every open payment is
   * looked at, a page at a time, against the escrow's events for its call id (searched from the block its collection
   * was sent at):
   * - reserved: nothing was ever sent (a payment is marked collecting, durably, first): closed, nothing paid;
   * - collecting: its X402Collected found → collected (below); none, and the authorization expired by the chain's
   *   clock → it can never be collected: closed `failed` if its nonce was used otherwise (cancelled, or submitted to
   *   the token directly), else `released`; none and not expired → waits for a later pass;
   * - collected (its call never ended here), refunding (its call failed): refunded to the payer (refundX402 sent
   *   unless its X402Refunded is found); an X402Settled found instead is recorded as settled;
   * - completing (its call was answered, the payer paid): completed (completeX402 sent unless its X402Settled is
   *   found) and recorded; an X402Refunded found instead (the payer reclaimed it) is recorded as refunded;
   * - settling (version 18's one-step settlement): its X402Settled found → settled; none, once expired → closed.
   * A transaction sent here whose fate is unknown leaves the payment for the next pass.
   */
  async recover(chain: X402RecoveryChain, beforeMs: number): Promise<X402Recovered> {
    const counts: X402Recovered = { settled: 0, refunded: 0, closed: 0, waiting: 0 };
    const chainTimeS = await chain.timeS();
    let after: { createdAtMs: number; callId: string } | undefined;
    for (;;) {
      const page = await this.paymentDeps.payments.open(beforeMs, after);
      if (page.length === 0) break;
      after = { createdAtMs: page[page.length - 1].createdAtMs, callId: page[page.length - 1].callId };
      for (const payment of page) counts[await this.recoverOne(chain, chainTimeS, payment)]++;
    }
    return counts;
  }

  private async recoverOne(chain: X402RecoveryChain, chainTimeS: bigint, payment: X402PaymentRow): Promise<keyof X402Recovered> {
    const { payments, now } = this.paymentDeps;
    const id = callIdToBytes32(payment.callId);
    const from = payment.settleBlock ?? 0n;
    if (payment.status === "reserved") return this.closeRecovered(payment, "reserved", "released");

    let events = await chain.events(id, from);
    if (payment.status === "settling" || payment.status === "collecting") {
      const landed = payment.status === "settling" ? events.settled : events.collected;
      if (!landed) {
        if (chainTimeS <= payment.validBefore) return "waiting";
        // Expired: it can never land now. Used, but not by us as far as the last look went: look once more.
        if (!(await chain.authorizationUsed(payment.payer as Address, payment.nonce as Hex))) {
          return this.closeRecovered(payment, payment.status, "released");
        }
        events = await chain.events(id, from);
        if (!(payment.status === "settling" ? events.settled : events.collected))
          return this.closeRecovered(payment, payment.status, "failed");
      }
      if (payment.status === "settling") {
        await recordSettlement(this.paymentDeps, payment, { collectTx: events.settled!.txHash, completeTx: null }, (tx) =>
          this.deps.calls.record(recoveredLine(payment, 503, "success", payment.amountMicros), tx),
        );
        return "settled";
      }
      const { txHash, pending } = events.collected!;
      if (!(await payments.markCollected(payment.callId, txHash, pending))) return "waiting";
      payment = { ...payment, status: "collected", txHash: txHash.toLowerCase(), pending };
    }

    const pending = payment.pending;
    const collectTx = payment.txHash;
    if (!pending || !collectTx) throw new Error(`x402 payment ${payment.callId} is ${payment.status} without its pending payment`);
    let settled = events.settled?.txHash;
    let refunded = events.refunded?.txHash;
    if (!settled && !refunded) {
      const sent =
        payment.status === "completing" ? await this.deps.settler.complete(id, pending) : await this.deps.settler.refund(id, pending);
      if (sent.kind !== "mined") {
        // Refused: another transaction took the pending payment meanwhile (its event is found on the next pass).
        return "waiting";
      }
      if (payment.status === "completing") settled = sent.txHash;
      else refunded = sent.txHash;
    }

    if (settled) {
      // A completed call the payer was answered (completing), or one that ended here unanswered (a crash after the
      // completion was mined, before its answer: logged as 503, as a settlement recovery found always was).
      const status = payment.status === "completing" ? 200 : 503;
      await recordSettlement(this.paymentDeps, payment, { collectTx, completeTx: settled }, (tx) =>
        payment.status === "refunding"
          ? Promise.resolve()
          : this.deps.calls.record(recoveredLine(payment, status, "success", payment.amountMicros), tx),
      );
      return "settled";
    }
    await this.deps.ledger.db.transaction(async (tx) => {
      if (!(await payments.markRefunded(payment.callId, refunded!, now(), tx))) return;
      // A failed call's line was written when it failed (refunding). A call that never ended is the gateway's failure;
      // one answered and then reclaimed by its payer (completing) was served for nothing.
      if (payment.status === "collected") await this.deps.calls.record(recoveredLine(payment, 500, "internal_error", 0n), tx);
      if (payment.status === "completing") await this.deps.calls.record(recoveredLine(payment, 200, "success", 0n), tx);
    });
    return "refunded";
  }

  /** A payment recovery found never paid: closed, and its call logged as the gateway's failure, charged nothing. */
  private async closeRecovered(
    payment: X402PaymentRow,
    from: "reserved" | "collecting" | "settling",
    status: "released" | "failed",
  ): Promise<"closed"> {
    await this.deps.ledger.db.transaction(async (tx) => {
      if (!(await this.paymentDeps.payments.close(payment.callId, from, status, this.paymentDeps.now(), null, tx))) return;
      await this.deps.calls.record(recoveredLine(payment, 500, "internal_error", 0n), tx);
    });
    return "closed";
  }
}

/** What recovery did with the payments it looked at. */
export interface X402Recovered {
  settled: number;
  refunded: number;
  closed: number;
  waiting: number;
}

/** The chain as recovery reads it. */
export interface X402RecoveryChain {
  /** The escrow's x402 events for `callId`, from `fromBlock` on. */
  events(
    callId: Hex,
    fromBlock: bigint,
  ): Promise<{ collected?: { txHash: Hex; pending: PendingX402 }; settled?: { txHash: Hex }; refunded?: { txHash: Hex } }>;
  authorizationUsed(payer: Address, nonce: Hex): Promise<boolean>;
  /** The latest block's timestamp, in seconds: the clock the token checks validBefore against. */
  timeS(): Promise<bigint>;
}

/** The calls log's line of a call whose payment recovery resolved. */
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
