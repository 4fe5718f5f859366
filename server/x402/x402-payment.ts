import type { PaymentRequired, PaymentRequirements, SettleResponse } from "@x402/core/types";
import type { Address, Hex } from "viem";
import type { Config } from "../config";
import type { Sql } from "../db/sql";
import { refusal } from "../errors";
import { type Charge, computeCharge } from "../ledger/fees";
import { type Ledger, X402_SOURCE_ID } from "../ledger/ledger";
import { usdDisplay } from "../ledger/money";
import { callIdToBytes32 } from "../chain/receipts";
import type { Skill } from "../catalog/skills";
import type { Admit, CallPayment, PaidCall, PaymentRefusal, RecordCall, Settlement } from "../gateway/payment";
import type { Eip3009Authorization, EscrowX402Settler, PendingX402 } from "./escrow-settlement";
import type { X402PaymentsStore } from "./payments-store";
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

/** An authorization must outlive the call (the skill's timeout) by this much, for the settlement to be sent and mined. */
export const SETTLEMENT_MARGIN_S = 30n;

const INSUFFICIENT = "invalid_exact_evm_insufficient_balance";
const NONCE_USED = "invalid_exact_evm_nonce_already_used";

/** The refusal of a payer whose balance does not cover this call beside the ones it has in flight. */
function shortMessage(balanceMicros: bigint, inFlightMicros: bigint, charge: Charge): string {
  const price = usdDisplay(charge.chargedMicros);
  if (inFlightMicros === 0n)
    return `Payment refused: the payer's USDC balance (${usdDisplay(balanceMicros)}) is below the price (${price}).`;
  return `Payment refused: the payer's USDC balance (${usdDisplay(balanceMicros)}) does not cover this call (${price}) beside its calls in flight (${usdDisplay(inFlightMicros)}); wait for them to finish.`;
}

/**
 * Why the chain refused a settlement, in a sentence for the payer: the token's or the escrow's revert (an error name,
 * or a node's truncated text) says it for developers, and is kept as the refusal's cause, never shown.
 */
export function payerReason(revert: string): string {
  if (/InsufficientBalance|exceeds balance/i.test(revert)) return "the payer's USDC no longer covers the price";
  if (/UsedAuthorization|authorization is used|cancel+ed/i.test(revert)) return "the authorization was used or cancelled in the meantime";
  if (/AuthorizationTime|expired/i.test(revert)) return "the authorization expired before it could be used";
  if (/InvalidSignature|invalid signature/i.test(revert)) return "the authorization's signature no longer verifies";
  return "the chain refused the transfer";
}

/** What x402 adds to a call's answer: the PAYMENT-REQUIRED header (402s) and the PAYMENT-RESPONSE header (a settlement). */
export interface X402Note {
  paymentRequired?: PaymentRequired;
  settlement?: SettleResponse;
}

/** The parts an x402 payment works with; one set for every call. */
export interface X402PaymentDeps {
  config: Pick<Config, "feeMode" | "feeBps">;
  ledger: Ledger;
  payments: X402PaymentsStore;
  verifier: PaymentVerifier;
  settler: EscrowX402Settler;
  asset: X402Asset;
  /** The escrow address a seller account is credited at (its settlement address); undefined if it has none. */
  sellerAddress(accountId: string): Promise<Address | undefined>;
  /** The chain's head block number (recorded as a payment's settlement is sent: where recovery looks for it). */
  chainHead(): Promise<bigint>;
  /** This replica's name in the payments it reserves (several replicas may share the database). */
  replicaId: string | null;
  now: () => number;
  /** Where a completion or refund left for recovery is told (the operator's log). */
  log?: (message: string, detail?: unknown) => void;
}

/** What one call of `skill` costs over x402: the charge per the fee mode, and its payment requirements. */
export function x402Price(
  deps: Pick<X402PaymentDeps, "config" | "asset">,
  skill: Skill,
): { charge: Charge; requirements: PaymentRequirements } {
  const charge = computeCharge(skill.priceMicros, deps.config.feeMode, deps.config.feeBps);
  const timeoutS = Math.ceil(skill.timeoutMs / 1000) + 2 * Number(SETTLEMENT_MARGIN_S);
  return { charge, requirements: requirementsFor(deps.asset, charge.chargedMicros, timeoutS) };
}

/** A collected payment: the authorization, what it splits into, and what the escrow holds pending for it. */
interface Collected {
  call: PaidCall;
  callId: string;
  auth: Eip3009Authorization;
  charge: Charge;
  /** The collection's transaction: where the payer's money moved (what PAYMENT-RESPONSE names). */
  txHash: Hex;
  pending: PendingX402;
}

/**
 * A call's payment by an x402 `exact` authorization (EIP-3009), on the call pipeline. Its checks, in order:
 *
 *   offer    a PAYMENT-SIGNATURE is present (402 payment_required), and is an x402 v2 exact payment (402 payment_invalid)
 *   reserve  it is for these requirements: scheme, network, asset, recipient, amount (402); it is valid no longer than
 *            asked, already valid, and long enough for the call and its completion (402); it verifies: signature,
 *            funds, nonce unused on-chain (402); the skill's seller can be credited by the escrow (503); the payer is
 *            under the skill's per-minute limit (429); the authorization was never presented before (402 payment_reused:
 *            the (payer, nonce) row is unique, on every replica sharing the database); the payer's balance covers it
 *            beside its other payments not yet collected (402); then the payment is collected: the escrow pulls it in
 *            and holds it pending (collectX402; 402 payment_settlement_failed when the chain refuses, 503 when its fate
 *            is unknown). Only a collected payment's call is forwarded: no call runs on money that is not there.
 *
 * Settled after the backend answered with data: the escrow credits the seller and the treasury (completeX402), and the
 * ledger records it, durably, with the call's line. Voided when the call failed: the escrow refunds the payer
 * (refundX402). Either transaction whose fate is unknown leaves the payment decided (completing, refunding) for
 * recovery (X402Service.recover) to send again or find; the payer keeps its answer, since it paid.
 */
export class X402Payment implements CallPayment<X402Note> {
  readonly payer = { accountId: X402_SOURCE_ID, apiKeyId: "x402" };
  readonly logsRefusals = false;
  readonly holdId = null;
  private parsed: ParsedPayment | undefined;
  private collected: Collected | undefined;

  constructor(
    private readonly deps: X402PaymentDeps,
    private readonly request: {
      /** The PAYMENT-SIGNATURE header, if any. */
      paymentHeader: string | undefined;
      /** The absolute URL called: the resource the payment requirements describe. */
      resourceUrl: string;
    },
  ) {}

  offer(call: PaidCall): PaymentRefusal<X402Note> | undefined {
    const header = this.request.paymentHeader;
    if (header === undefined || header.trim() === "") {
      return this.refused(
        call,
        "payment_required",
        `Payment required: this call costs ${usdDisplay(call.charge.chargedMicros)} in USDC on ${networkOf(this.deps.asset)}; see the PAYMENT-REQUIRED header.`,
      );
    }
    try {
      this.parsed = parsePaymentHeader(header);
    } catch (error) {
      if (!(error instanceof MalformedPayment)) throw error;
      return this.refused(call, "payment_invalid", error.message, "invalid_payload");
    }
    return undefined;
  }

  async reserve(call: PaidCall, admit: Admit): Promise<PaymentRefusal<X402Note> | undefined> {
    const { deps } = this;
    const { skill, charge } = call;
    const payment = this.parsed;
    if (!payment) throw new Error("an x402 payment is reserved only after its offer was read");
    const { requirements } = x402Price(deps, skill);
    const mismatch = acceptedMatches(payment.payload.accepted, requirements);
    if (mismatch) return this.refused(call, "payment_invalid", `Payment refused: ${mismatch}.`, "invalid_payment_requirements");

    const auth = payment.authorization;
    const nowS = BigInt(Math.floor(deps.now() / 1000));
    const lastsUntil = nowS + BigInt(Math.ceil(skill.timeoutMs / 1000)) + SETTLEMENT_MARGIN_S;
    // Not valid for longer than asked (plus a minute of clock skew): a payment whose fate is unknown must expire
    // soon, so that recovery can close it (and a value past the database's integers is refused here, not there).
    const latest = nowS + BigInt(requirements.maxTimeoutSeconds) + 60n;
    const validBefore = "invalid_exact_evm_payload_authorization_valid_before";
    if (auth.validBefore > latest) {
      return this.refused(
        call,
        "payment_invalid",
        `Payment refused: the authorization is valid until ${auth.validBefore}, longer than the ${requirements.maxTimeoutSeconds} s asked (at most ${latest}).`,
        validBefore,
      );
    }
    if (auth.validAfter > nowS) {
      return this.refused(
        call,
        "payment_invalid",
        "Payment refused: the authorization is not valid yet.",
        "invalid_exact_evm_payload_authorization_valid_after",
      );
    }
    if (auth.validBefore < lastsUntil) {
      return this.refused(
        call,
        "payment_invalid",
        `Payment refused: the authorization expires at ${auth.validBefore}, before this call and its settlement can finish (${lastsUntil}); sign one valid for at least ${requirements.maxTimeoutSeconds} s.`,
        validBefore,
      );
    }
    const verified = await deps.verifier.verify(payment.payload, requirements, auth);
    if (!verified.valid) return this.refused(call, "payment_invalid", `Payment refused: ${verified.message}.`, verified.reason);

    const seller = await deps.sellerAddress(skill.sellerAccountId);
    if (!seller) {
      return refusal(
        "chain_not_configured",
        "This skill's seller has no on-chain address for the escrow to credit yet; pay with an API key instead.",
      );
    }

    // The payer is known once its signature verifies: only then is it counted (a claimed payer could be anyone's).
    if (skill.rateLimitPerMin !== null) {
      const limited = await admit(
        { key: `skill:${skill.id}:x402:${auth.from.toLowerCase()}`, limit: skill.rateLimitPerMin, windowMs: 60_000 },
        `skill "${skill.slug}" from this payer`,
      );
      if (limited) return limited;
    }

    // The payer's balance covers this call and every other it has not paid yet, or the call is refused before it
    // runs: one balance is not collected for many calls at once (each collection a transaction the gateway pays for).
    const payer = auth.from.toLowerCase();
    const funds = await deps.verifier.funds(auth);
    const reserved = await deps.payments.reserve(
      {
        callId: call.callId,
        skillId: skill.id,
        sellerAccountId: skill.sellerAccountId,
        payer,
        nonce: auth.nonce,
        validAfter: auth.validAfter,
        validBefore: auth.validBefore,
        amountMicros: charge.chargedMicros,
        sellerMicros: charge.sellerMicros,
        feeMicros: charge.feeMicros,
      },
      deps.replicaId,
      deps.now(),
      funds.balanceMicros,
    );
    if (reserved.kind === "reused") {
      return this.refused(
        call,
        "payment_reused",
        "Payment refused: this authorization was already presented for another call; sign a new one.",
        NONCE_USED,
      );
    }
    if (reserved.kind === "short")
      return this.refused(call, "payment_invalid", shortMessage(funds.balanceMicros, reserved.openMicros, charge), INSUFFICIENT);
    return this.collect(call, auth, seller, charge);
  }

  /**
   * The money moves before the work: the escrow pulls the payment in and holds it pending, or the call is refused.
   * A payer who moved its USDC away, or used the authorization, since it was verified is refused here, before the
   * skill runs; so is the ninth of nine authorizations over one balance. Nothing can be spent twice once collected.
   */
  private async collect(
    call: PaidCall,
    auth: Eip3009Authorization,
    seller: Address,
    charge: Charge,
  ): Promise<PaymentRefusal<X402Note> | undefined> {
    const { deps } = this;
    const { callId } = call;
    let fromBlock: bigint;
    try {
      fromBlock = await deps.chainHead();
      if (!(await deps.payments.markCollecting(callId, fromBlock))) throw new Error(`x402 payment ${callId} was no longer reserved`);
    } catch (error) {
      // Nothing was sent: the reservation is given back at once, not left to recovery (it holds the payer's balance).
      await deps.payments.close(callId, "reserved", "released", deps.now()).catch(() => undefined);
      throw error;
    }
    const collected = await deps.settler.collect(auth, seller, charge.feeMicros, callIdToBytes32(callId));
    if (collected.kind === "refused") {
      await deps.payments.close(callId, "collecting", "failed", deps.now(), collected.txHash ?? null);
      return {
        ...refusal(
          "payment_settlement_failed",
          `Payment could not be collected: ${payerReason(collected.reason)}. Nothing was paid, and the skill was not called.`,
          { cause: collected.reason },
        ),
        note: {
          paymentRequired: this.paymentRequired(call, "settlement_failed"),
          settlement: this.response(auth, charge, false, "settlement_failed", collected.txHash),
        },
      };
    }
    if (collected.kind === "unknown") {
      // Left collecting on purpose: recovery finds the collection on-chain (and refunds it: the call never ran) or
      // closes the payment once the authorization has expired.
      return {
        ...refusal(
          "chain_unavailable",
          "The chain did not confirm this payment in time, so the skill was not called. If the payment lands, it is refunded to the payer (the PAYMENT-RESPONSE header names the transaction, when it was sent).",
        ),
        note: { settlement: this.response(auth, charge, false, "settlement_unconfirmed", collected.txHash) },
      };
    }
    this.collected = { call, callId, auth, charge, txHash: collected.txHash, pending: collected.pending };
    if (!(await deps.payments.markCollected(callId, collected.txHash, collected.pending))) {
      throw new Error(`x402 payment ${callId} was no longer collecting when its collection was mined`);
    }
    return undefined;
  }

  async settle(record: RecordCall): Promise<Settlement<X402Note>> {
    const { deps } = this;
    const { call, callId, auth, charge, txHash, pending } = this.open();
    const completed = await deps.settler.complete(callIdToBytes32(callId), pending);
    const note = { settlement: this.response(auth, charge, true, undefined, txHash) };
    if (completed.kind === "mined") {
      await recordSettlement(
        deps,
        { callId, sellerAccountId: call.skill.sellerAccountId, sellerMicros: charge.sellerMicros, feeMicros: charge.feeMicros },
        { collectTx: txHash, completeTx: completed.txHash },
        record.run,
      );
      return { note };
    }
    // The payer paid (its money is in the escrow) and gets its answer. The completion is owed: decided durably here,
    // sent again or found by recovery, which records it with the call's line then.
    deps.log?.(`x402 payment ${callId}: completion ${completed.kind}; left completing for recovery`, completed);
    await deps.ledger.db.transaction(
      async (tx) => {
        if (!(await deps.payments.markDecided(callId, "completing", tx))) throw new Error(`x402 payment ${callId} was not collected`);
      },
      { durable: true },
    );
    return { note };
  }

  async void(record: RecordCall): Promise<void> {
    const { deps } = this;
    const collected = this.collected;
    if (!collected) throw new Error("the call's x402 payment was not collected");
    const refunded = await deps.settler.refund(callIdToBytes32(collected.callId), collected.pending);
    await deps.ledger.db.transaction(async (tx) => {
      const closed =
        refunded.kind === "mined"
          ? await deps.payments.markRefunded(collected.callId, refunded.txHash, deps.now(), tx)
          : await deps.payments.markDecided(collected.callId, "refunding", tx);
      if (!closed) throw new Error(`x402 payment ${collected.callId} was not collected when its call failed`);
      await record.run(tx);
    });
    if (refunded.kind !== "mined")
      deps.log?.(`x402 payment ${collected.callId}: refund ${refunded.kind}; left refunding for recovery`, refunded);
  }

  /** A collected payment stays for recovery, which refunds it: the call did not end, so its payer got nothing. */
  async abandon(): Promise<void> {}

  unchargedNote(reserved: boolean): string {
    return reserved ? "Your payment is refunded." : "";
  }

  private open(): Collected {
    if (!this.collected) throw new Error("the call's x402 payment was not collected");
    return this.collected;
  }

  /** The PAYMENT-RESPONSE of this payment: the collection's transaction, where the payer's money moved. */
  private response(
    auth: Eip3009Authorization,
    charge: Charge,
    success: boolean,
    errorReason?: string,
    transaction?: string,
  ): SettleResponse {
    return {
      success,
      ...(errorReason ? { errorReason } : {}),
      transaction: transaction ?? "",
      network: networkOf(this.deps.asset),
      payer: auth.from,
      ...(success ? { amount: charge.chargedMicros.toString() } : {}),
    };
  }

  /** The requirements of `call`'s skill, as a PAYMENT-REQUIRED header says them, with the protocol's reason. */
  private paymentRequired(call: PaidCall, error?: string): PaymentRequired {
    const { skill } = call;
    const resource = { url: this.request.resourceUrl, description: skill.description || skill.name, mimeType: "application/json" };
    return paymentRequired(resource, x402Price(this.deps, skill).requirements, error);
  }

  /** A refusal of the payment, with the PAYMENT-REQUIRED header that says what to pay and, when given, why this did not. */
  private refused(call: PaidCall, code: PaymentRefusal["code"], message: string, error?: string): PaymentRefusal<X402Note> {
    return { ...refusal(code, message), note: { paymentRequired: this.paymentRequired(call, error) } };
  }
}

/**
 * The books of a payment completed on-chain, in one durable transaction: its x402_payment entry (the seller's earned,
 * the platform's fee), the payment marked settled, and the call's line (`line`). For a call just completed, and for
 * one recovery found completed (or, from before version 22, settled in one step: `completeTx` null).
 */
export async function recordSettlement(
  deps: Pick<X402PaymentDeps, "ledger" | "payments" | "now">,
  payment: { callId: string; sellerAccountId: string; sellerMicros: bigint; feeMicros: bigint },
  txs: { collectTx: string; completeTx: string | null },
  line: (tx: Sql) => Promise<void>,
): Promise<void> {
  const { ledger, payments } = deps;
  const { collectTx, completeTx } = txs;
  await ledger.db.transaction(
    async (tx) => {
      const { callId, sellerAccountId, sellerMicros, feeMicros } = payment;
      const entryId = await ledger.recordX402Payment(
        { callId, sellerAccountId, sellerMicros, feeMicros, txHash: completeTx ?? collectTx },
        tx,
      );
      if (!(await payments.markSettled(callId, collectTx.toLowerCase(), completeTx, entryId, deps.now(), tx))) {
        throw new Error(`x402 payment ${callId} was not open when its settlement was recorded`);
      }
      await line(tx);
    },
    { durable: true },
  );
}
