import { performance } from "node:perf_hooks";
import type { PaymentRequired, PaymentRequirements, SettleResponse } from "@x402/core/types";
import type { Address, Hex } from "viem";
import type { Config } from "../config";
import { uuidv7 } from "../db/ids";
import type { ErrorCode } from "../errors";
import { computeCharge } from "../ledger/fees";
import { usdDisplay } from "../ledger/money";
import { callIdToBytes32 } from "../chain/receipts";
import { type Ledger, X402_SOURCE_ID } from "../ledger/ledger";
import type { Skill, SkillRegistry } from "../catalog/skills";
import type { CallAnswer, CallAnswers, CallEnd } from "../gateway/call-service";
import type { CallOutcome, CallsStore } from "../gateway/calls-store";
import type { ForwardResult, Forwarder } from "../gateway/forward";
import type { CallLimiter } from "../gateway/rate-limit";
import type { EscrowX402Settler } from "./escrow-settlement";
import type { X402PaymentRow, X402PaymentsStore } from "./payments-store";
import {
  acceptedMatches,
  MalformedPayment,
  networkOf,
  type ParsedPayment,
  paymentRequired,
  parsePaymentHeader,
  requirementsFor,
  type X402Asset,
} from "./protocol";
import type { PaymentVerifier } from "./verifier";

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

/**
 * How an x402 call ended: the status and body (rendered by the HTTP layer's answers, as for the per-skill form);
 * `paymentRequired` (402s) goes in the PAYMENT-REQUIRED header, `settlement` (a settled payment) in PAYMENT-RESPONSE.
 */
export interface X402Answer extends CallAnswer {
  callId?: string;
  paymentRequired?: PaymentRequired;
  settlement?: SettleResponse;
}

export interface X402ServiceDeps {
  config: Config;
  ledger: Ledger;
  skills: SkillRegistry;
  calls: CallsStore;
  forwarder: Forwarder;
  /** The HTTP layer's rendering of a call's end (the per-skill form's envelope). */
  answers: CallAnswers;
  limiter: CallLimiter;
  payments: X402PaymentsStore;
  verifier: PaymentVerifier;
  settler: EscrowX402Settler;
  asset: X402Asset;
  /** The escrow address a seller account is credited at (its settlement address); undefined if it has none. */
  sellerAddress(accountId: string): Promise<Address | undefined>;
  /** The chain's head block number (recorded as a payment's settlement is sent: where recovery looks for it). */
  chainHead(): Promise<bigint>;
  /** This replica's name in the payments it reserves (several replicas may share the database). */
  replicaId?: string;
  onCall?: (call: { skill: string; outcome: CallOutcome; chargedMicros: bigint; latencyMs: number }) => void;
  now?: () => number;
}

/** An authorization must outlive the call (the skill's timeout) by this much, for the settlement to be sent and mined. */
const SETTLEMENT_MARGIN_S = 30n;

const FAILURE_CODE: Record<Extract<ForwardResult, { kind: "failed" }>["reason"], ErrorCode> = {
  backend_error: "skill_error",
  timeout: "skill_timeout",
  unreachable: "skill_unreachable",
  invalid_json: "skill_invalid_response",
  response_too_large: "skill_invalid_response",
  forbidden: "skill_backend_forbidden",
};

/**
 * Pay-per-call with x402 (protocol version 2, `exact` scheme, EIP-3009): every listed skill, called without an
 * account or key. The order, first failure decides:
 *
 *   1. the skill exists (404)                 5. the payment verifies: signature, amount, window, funds, nonce (402)
 *   2. a PAYMENT-SIGNATURE is present (402)   6. the payment is reserved: (payer, nonce) never seen before (402)
 *   3. it is an x402 v2 exact payment (402)   7. forward to the backend; a failure ends here, nothing is paid
 *   4. the input fits the skill's schema (400) 8. settle on-chain (escrow settleX402), then record, then answer 200
 *
 * Money moves only in step 8, only after the backend answered with data: the escrow pulls the payment in and
 * credits the seller and the treasury in one transaction, and only once that is mined does the ledger record it
 * (one durable transaction: the payment settled, its x402_payment entry, the calls log's line) and the data go
 * out. A settlement the chain refuses sends no data (402). Payments whose fate was not known (a crash, a node
 * that stopped answering) are settled or closed by `recover`.
 */
export class X402Service {
  private readonly now: () => number;

  constructor(private readonly deps: X402ServiceDeps) {
    this.now = deps.now ?? Date.now;
  }

  /** What one call of `skill` costs over x402: the charge per the fee mode, and its requirements. */
  price(skill: Skill): { charge: ReturnType<typeof computeCharge>; requirements: PaymentRequirements } {
    const { config, asset } = this.deps;
    const charge = computeCharge(skill.priceMicros, config.feeMode, config.feeBps);
    const timeoutS = Math.ceil(skill.timeoutMs / 1000) + 2 * Number(SETTLEMENT_MARGIN_S);
    return { charge, requirements: requirementsFor(asset, charge.chargedMicros, timeoutS) };
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

  async call(req: X402CallRequest): Promise<X402Answer> {
    const { skills } = this.deps;
    const skill = skills.resolve(req.skillRef);
    if (!skill)
      return this.refused(req, req.skillRef, "skill_not_found", `Skill not found: "${req.skillRef}". Check the skill_id slug or UUID.`);

    const { charge, requirements } = this.price(skill);
    const resource = { url: req.resourceUrl, description: skill.description || skill.name, mimeType: "application/json" };
    const required = (error?: string) => paymentRequired(resource, requirements, error);

    // A free skill needs no payment: it is served as it is, under the per-address limits of unauthenticated routes.
    if (charge.chargedMicros === 0n) return this.free(req, skill);

    if (req.paymentHeader === undefined || req.paymentHeader.trim() === "") {
      return {
        ...this.refused(
          req,
          skill.slug,
          "payment_required",
          `Payment required: this call costs ${usdDisplay(charge.chargedMicros)} in USDC on ${this.network}; see the PAYMENT-REQUIRED header.`,
        ),
        paymentRequired: required(),
      };
    }
    let payment: ParsedPayment;
    try {
      payment = parsePaymentHeader(req.paymentHeader);
    } catch (error) {
      if (!(error instanceof MalformedPayment)) throw error;
      return { ...this.refused(req, skill.slug, "payment_invalid", error.message), paymentRequired: required("invalid_payload") };
    }

    const problems = await skills.validateInput(skill, req.input);
    if (problems.length > 0) {
      return this.refused(req, skill.slug, "invalid_input", `Input does not match the skill's schema: ${problems.join("; ")}`);
    }

    const mismatch = acceptedMatches(payment.payload.accepted, requirements);
    if (mismatch) {
      return {
        ...this.refused(req, skill.slug, "payment_invalid", `Payment refused: ${mismatch}.`),
        paymentRequired: required("invalid_payment_requirements"),
      };
    }
    const auth = payment.authorization;
    const nowS = BigInt(Math.floor(this.now() / 1000));
    const lastsUntil = nowS + BigInt(Math.ceil(skill.timeoutMs / 1000)) + SETTLEMENT_MARGIN_S;
    // Not valid for longer than asked (plus a minute of clock skew): a payment whose fate is unknown must expire
    // soon, so that recovery can close it (and a value past the database's integers is refused here, not there).
    const latest = nowS + BigInt(requirements.maxTimeoutSeconds) + 60n;
    if (auth.validBefore > latest) {
      return {
        ...this.refused(
          req,
          skill.slug,
          "payment_invalid",
          `Payment refused: the authorization is valid until ${auth.validBefore}, longer than the ${requirements.maxTimeoutSeconds} s asked (at most ${latest}).`,
        ),
        paymentRequired: required("invalid_exact_evm_payload_authorization_valid_before"),
      };
    }
    if (auth.validAfter > nowS) {
      return {
        ...this.refused(req, skill.slug, "payment_invalid", "Payment refused: the authorization is not valid yet."),
        paymentRequired: required("invalid_exact_evm_payload_authorization_valid_after"),
      };
    }
    if (auth.validBefore < lastsUntil) {
      return {
        ...this.refused(
          req,
          skill.slug,
          "payment_invalid",
          `Payment refused: the authorization expires at ${auth.validBefore}, before this call and its settlement can finish (${lastsUntil}); sign one valid for at least ${requirements.maxTimeoutSeconds} s.`,
        ),
        paymentRequired: required("invalid_exact_evm_payload_authorization_valid_before"),
      };
    }
    const verified = await this.deps.verifier.verify(payment.payload, requirements, auth);
    if (!verified.valid) {
      return {
        ...this.refused(req, skill.slug, "payment_invalid", `Payment refused: ${verified.message}.`),
        paymentRequired: required(verified.reason),
      };
    }

    const seller = await this.deps.sellerAddress(skill.sellerAccountId);
    if (!seller) {
      return this.refused(
        req,
        skill.slug,
        "chain_not_configured",
        "This skill's seller has no on-chain address for the escrow to credit yet; pay with an API key instead.",
      );
    }

    const rule =
      skill.rateLimitPerMin === null
        ? undefined
        : { key: `skill:${skill.id}:x402:${auth.from.toLowerCase()}`, limit: skill.rateLimitPerMin, windowMs: 60_000 };
    if (rule && !(await this.deps.limiter.admit([rule])).allowed) {
      return this.refused(
        req,
        skill.slug,
        "rate_limited",
        `Rate limit exceeded: ${rule.limit} calls per minute for skill "${skill.slug}" from this payer.`,
      );
    }

    const callId = uuidv7();
    const reserved = await this.deps.payments.reserve(
      {
        callId,
        skillId: skill.id,
        sellerAccountId: skill.sellerAccountId,
        payer: auth.from.toLowerCase(),
        nonce: auth.nonce,
        validAfter: auth.validAfter,
        validBefore: auth.validBefore,
        amountMicros: charge.chargedMicros,
        sellerMicros: charge.sellerMicros,
        feeMicros: charge.feeMicros,
      },
      this.deps.replicaId ?? null,
      this.now(),
    );
    if (!reserved) {
      return {
        ...this.refused(
          req,
          skill.slug,
          "payment_reused",
          "Payment refused: this authorization was already presented for another call; sign a new one.",
        ),
        paymentRequired: required("invalid_exact_evm_nonce_already_used"),
      };
    }

    // Until the settlement may have been sent, a fault gives the reservation back; after, only recovery decides.
    let sent = false;
    let closed = false;
    try {
      const forwarded = await this.deps.forwarder.forward(skill, callId, req.input);
      if (forwarded.kind !== "ok") {
        const code: ErrorCode = forwarded.kind === "rejected" ? "skill_rejected_input" : FAILURE_CODE[forwarded.reason];
        const outcome: CallOutcome = forwarded.kind === "rejected" ? "skill_rejected_input" : "skill_error";
        const message = forwarded.kind === "rejected" ? forwarded.message : `Skill error: ${forwarded.message}. Your payment was not used.`;
        const answer = this.answer(this.end(req, skill, 0n, { ok: false, code, message }));
        await this.closeUnpaid(req, skill, callId, "reserved", "released", outcome, answer.status);
        closed = true;
        return { callId, ...answer };
      }

      // Rendered before any money moves: data that cannot be serialized again is the backend's failure, paid by nobody.
      const success = this.render(this.end(req, skill, charge.chargedMicros, { ok: true, data: forwarded.data }));
      if (!success) {
        const message = "Skill error: skill backend answered JSON nested too deeply to pass on. Your payment was not used.";
        const answer = this.answer(this.end(req, skill, 0n, { ok: false, code: "skill_invalid_response", message }));
        await this.closeUnpaid(req, skill, callId, "reserved", "released", "skill_error", answer.status);
        closed = true;
        return { callId, ...answer };
      }
      const settleBlock = await this.deps.chainHead();
      if (!(await this.deps.payments.markSettling(callId, settleBlock))) throw new Error(`x402 payment ${callId} was no longer reserved`);
      sent = true;
      const settlement = await this.deps.settler.settle(auth, seller, charge.feeMicros, callIdToBytes32(callId));
      const response = (success: boolean, errorReason?: string, transaction?: string): SettleResponse => ({
        success,
        ...(errorReason ? { errorReason } : {}),
        transaction: transaction ?? "",
        network: networkOf(this.deps.asset),
        payer: auth.from,
        ...(success ? { amount: charge.chargedMicros.toString() } : {}),
      });
      if (settlement.kind === "refused") {
        const answer = this.answer(
          this.end(req, skill, 0n, {
            ok: false,
            code: "payment_settlement_failed",
            message: `Payment could not be settled (${settlement.reason}): nothing was paid, and the skill's answer is not sent.`,
          }),
        );
        await this.closeUnpaid(req, skill, callId, "settling", "failed", "payment_settlement_failed", answer.status, settlement.txHash);
        closed = true;
        return {
          callId,
          ...answer,
          paymentRequired: required("settlement_failed"),
          settlement: response(false, "settlement_failed", settlement.txHash),
        };
      }
      if (settlement.kind === "unknown") {
        // Left open on purpose: recovery finds the settlement on-chain (and records it) or closes the payment.
        closed = true;
        return {
          callId,
          ...this.answer(
            this.end(req, skill, 0n, {
              ok: false,
              code: "chain_unavailable",
              message:
                "The chain did not confirm this payment's settlement in time. If it lands, it is recorded (the PAYMENT-RESPONSE header names the transaction, when it was sent); the skill's answer is not sent.",
            }),
          ),
          settlement: response(false, "settlement_unconfirmed", settlement.txHash),
        };
      }

      await this.record(skill, callId, settlement.txHash, success.status, elapsedUs(req));
      closed = true;
      this.deps.onCall?.({ skill: skill.slug, outcome: "success", chargedMicros: charge.chargedMicros, latencyMs: elapsedUs(req) / 1000 });
      return {
        callId,
        ...success,
        settlement: response(true, undefined, settlement.txHash),
      };
    } finally {
      // A fault between the reservation and an outcome. Before the settlement could have been sent, the reservation
      // is given back; after, the payment stays 'settling' (the chain may have it) for recovery to settle or close.
      if (!closed && !sent) await this.deps.payments.close(callId, "reserved", "released", this.now()).catch(() => undefined);
    }
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
      const page = await this.deps.payments.open(beforeMs, after);
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
    const skill = this.deps.skills.resolve(payment.skillId);
    await this.record(
      { id: payment.skillId, slug: skill?.slug ?? payment.skillId, sellerAccountId: payment.sellerAccountId },
      payment.callId,
      txHash,
      503,
      0,
      payment,
    );
  }

  /** A payment recovery found never settled: closed, and its call logged as the gateway's failure, charged nothing. */
  private async closeRecovered(payment: X402PaymentRow, from: "reserved" | "settling", status: "released" | "failed"): Promise<void> {
    await this.deps.ledger.db.transaction(async (tx) => {
      if (!(await this.deps.payments.close(payment.callId, from, status, this.now(), null, tx))) return;
      await this.deps.calls.record(
        {
          id: payment.callId,
          accountId: X402_SOURCE_ID,
          apiKeyId: "x402",
          skillId: payment.skillId,
          endpoint: "x402",
          httpStatus: 500,
          outcome: "internal_error",
          chargedMicros: 0n,
          holdId: null,
          latencyUs: 0,
          createdAtMs: payment.createdAtMs,
        },
        tx,
      );
    });
  }

  /** The settled payment's books: its entry, the payment marked settled, the calls log's line; durable before the answer. */
  private async record(
    skill: Pick<Skill, "id" | "slug" | "sellerAccountId">,
    callId: string,
    txHash: string,
    httpStatus: number,
    latencyUs: number,
    known?: { sellerMicros: bigint; feeMicros: bigint; amountMicros: bigint; createdAtMs: number },
  ): Promise<void> {
    const { ledger, payments, calls } = this.deps;
    await ledger.db.transaction(
      async (tx) => {
        const payment = known ?? (await payments.get(callId, tx));
        if (!payment) throw new Error(`x402 payment ${callId} is missing`);
        const entryId = await ledger.recordX402Payment(
          { callId, sellerAccountId: skill.sellerAccountId, sellerMicros: payment.sellerMicros, feeMicros: payment.feeMicros, txHash },
          tx,
        );
        if (!(await payments.markSettled(callId, txHash.toLowerCase(), entryId, this.now(), tx))) {
          throw new Error(`x402 payment ${callId} was not open when its settlement was recorded`);
        }
        await calls.record(
          {
            id: callId,
            accountId: X402_SOURCE_ID,
            apiKeyId: "x402",
            skillId: skill.id,
            endpoint: "x402",
            httpStatus,
            outcome: "success",
            chargedMicros: payment.amountMicros,
            holdId: null,
            latencyUs,
            createdAtMs: this.now(),
          },
          tx,
        );
      },
      { durable: true },
    );
  }

  /** A payment that paid nothing (the call failed, or the chain refused the settlement): closed, and the call logged. */
  private async closeUnpaid(
    req: X402CallRequest,
    skill: Skill,
    callId: string,
    from: "reserved" | "settling",
    status: "released" | "failed",
    outcome: CallOutcome,
    httpStatus: number,
    txHash?: string,
  ): Promise<void> {
    const { ledger, payments, calls } = this.deps;
    await ledger.db.transaction(async (tx) => {
      if (!(await payments.close(callId, from, status, this.now(), txHash ?? null, tx))) {
        throw new Error(`x402 payment ${callId} was not ${from} when it was closed ${status}`);
      }
      await calls.record(
        {
          id: callId,
          accountId: X402_SOURCE_ID,
          apiKeyId: "x402",
          skillId: skill.id,
          endpoint: "x402",
          httpStatus,
          outcome,
          chargedMicros: 0n,
          holdId: null,
          latencyUs: elapsedUs(req),
          createdAtMs: this.now(),
        },
        tx,
      );
    });
    this.deps.onCall?.({ skill: skill.slug, outcome, chargedMicros: 0n, latencyMs: elapsedUs(req) / 1000 });
  }

  /** A free skill over x402: forwarded with nothing to pay. */
  private async free(req: X402CallRequest, skill: Skill): Promise<X402Answer> {
    const problems = await this.deps.skills.validateInput(skill, req.input);
    if (problems.length > 0)
      return this.refused(req, skill.slug, "invalid_input", `Input does not match the skill's schema: ${problems.join("; ")}`);
    const callId = uuidv7();
    const forwarded = await this.deps.forwarder.forward(skill, callId, req.input);
    if (forwarded.kind === "ok") {
      const answer = this.render(this.end(req, skill, 0n, { ok: true, data: forwarded.data }));
      if (answer) return { callId, ...answer };
      return {
        callId,
        ...this.answer(
          this.end(req, skill, 0n, {
            ok: false,
            code: "skill_invalid_response",
            message: "Skill error: skill backend answered JSON nested too deeply to pass on.",
          }),
        ),
      };
    }
    const code: ErrorCode = forwarded.kind === "rejected" ? "skill_rejected_input" : FAILURE_CODE[forwarded.reason];
    return {
      callId,
      ...this.answer(
        this.end(req, skill, 0n, {
          ok: false,
          code,
          message: forwarded.kind === "rejected" ? forwarded.message : `Skill error: ${forwarded.message}.`,
        }),
      ),
    };
  }

  private refused(req: X402CallRequest, slug: string, code: ErrorCode, message: string): X402Answer {
    return this.answer({
      endpoint: "x402",
      skillSlug: slug,
      responseTimeMs: elapsedUs(req) / 1000,
      chargedMicros: 0n,
      result: { ok: false, code, message },
    });
  }

  /** The answer to `end`; undefined when its data cannot be serialized (JSON.stringify runs out of stack). */
  private render(end: CallEnd): CallAnswer | undefined {
    try {
      return this.deps.answers.render(end);
    } catch (error) {
      if (error instanceof RangeError) return undefined;
      throw error;
    }
  }

  /** The answer to a refusal or failure, which always renders. */
  private answer(end: CallEnd): CallAnswer {
    const answer = this.render(end);
    if (!answer) throw new Error(`the answer to an x402 call (${end.result.ok ? "ok" : end.result.code}) could not be rendered`);
    return answer;
  }

  private end(req: X402CallRequest, skill: Skill, chargedMicros: bigint, result: CallEnd["result"]): CallEnd {
    return { endpoint: "x402", skillSlug: skill.slug, responseTimeMs: elapsedUs(req) / 1000, chargedMicros, result };
  }
}

function elapsedUs(req: X402CallRequest): number {
  return (performance.now() - req.startedAt) * 1000;
}
