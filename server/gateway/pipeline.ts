import { performance } from "node:perf_hooks";
import type { Config } from "../config";
import { uuidv7 } from "../db/ids";
import type { Database, Sql } from "../db/sql";
import { type ErrorCode, GatewayError, type Refusal, refusal } from "../errors";
import { excerpt } from "../text";
import { microsToUsd, usdDisplay } from "../ledger/money";
import { type Charge, computeCharge } from "../ledger/fees";
import type { Skill, SkillRegistry } from "../catalog/skills";
import type { CallOutcome, CallsStore, Endpoint } from "./calls-store";
import type { ForwardResult, Forwarder } from "./forward";
import type { IdempotencyKeys } from "./idempotency";
import type { Admit, CallPayment, PaidCall, PaymentRefusal, RecordCall, Settlement } from "./payment";
import type { CallAnswer, CallAnswers, CallEnd, CallResult } from "./call-result";
import type { CallDailyCap, CallLimiter, RateDecision, RateRule } from "./rate-limit";
import type { RefusalCounter } from "./refusal-counter";
import type { LimitRefusal } from "./refusals-store";
import { forwardedIdempotencyKey } from "./signature";
import { type CallWrite, type CallWriteStores, writeCall } from "./call-write";
import { readUsageCharge } from "./usage-charge";

/** A call as an entry (keyed: ./call-service.ts; x402: server/x402/x402-service.ts) hands it to the pipeline. */
export interface PipelineRequest {
  endpoint: Endpoint;
  skillRef: string;
  input: unknown;
  /** performance.now() when the request arrived; response times are measured from it. */
  startedAt: number;
  /** The caller's Idempotency-Key, scoped to its account, and the hash of the request it was sent with. */
  idempotency?: { accountId: string; key: string; requestHash: string };
  /** The caller's limits for `skill`, checked before its input; undefined when the caller has none of its own (x402). */
  admission?(skill: Skill): Admission;
  /**
   * Whether the caller may call `skill` at all (a key's allowed_skills): a refusal (403 skill_not_allowed) or undefined.
   * Checked as soon as the skill is known, before anything is held, counted or remembered; absent for x402 callers.
   */
  permits?(skill: Skill): Refusal | undefined;
  /**
   * The most the caller accepts to pay for this call (base units, compared with what the call would charge: the price,
   * plus the fee when it is charged on top): a dearer skill is refused with 409 price_above_max right after the checks
   * of `permits`, with nothing held, counted or remembered. Absent: any price.
   */
  maxPriceMicros?: bigint;
}

/** The per-minute rules a call must pass (the first is the headline limit, in the RateLimit headers), and a daily cap. */
export interface Admission {
  rules: RateRule[];
  /** Whose limit `rule` is, for the refusal: "this API key", `this skill "echo"`. */
  describe(rule: RateRule): string;
  /** The account's cap on calls per UTC day; absent when it has none. */
  dailyCap?: { accountId: string; cap: number };
}

export interface PipelineDeps {
  config: Pick<Config, "feeMode" | "feeBps">;
  /** The database of the books: the calls log and the idempotency keys are written in the payments' transactions. */
  db: Database;
  skills: SkillRegistry;
  calls: CallsStore;
  idempotency: IdempotencyKeys;
  /** The per-minute limits: this process's (RateLimiter) or every replica's (RedisRateLimiter). */
  limiter: CallLimiter;
  /** The per-account daily cap: this process's (DailyCap) or every replica's (RedisDailyCap). */
  dailyCap: CallDailyCap;
  forwarder: Forwarder;
  /** The HTTP layer's rendering of answers. */
  answers: CallAnswers;
  /** Counts the calls a caller's own limits refused, which get no line in the calls log each. */
  refusals: RefusalCounter;
  /**
   * Told about every call once its line in the calls log is committed (for metrics, the request's log line and the
   * skills' quality roll-up): `code` is the error code a failed call ended with, absent for a success.
   */
  onCall?: (call: {
    skill: string;
    skillId: string;
    outcome: CallOutcome;
    code?: ErrorCode;
    chargedMicros: bigint;
    latencyMs: number;
  }) => void;
}

/** How a backend's failure is named to the client. */
const FAILURE_CODE: Record<Extract<ForwardResult, { kind: "failed" }>["reason"], ErrorCode> = {
  backend_error: "skill_error",
  timeout: "skill_timeout",
  unreachable: "skill_unreachable",
  invalid_json: "skill_invalid_response",
  response_too_large: "skill_invalid_response",
  forbidden: "skill_backend_forbidden",
};

/** What a caller is told of an answer that broke the skill's output schema: nothing of the answer or the schema. */
export const OUTPUT_BROKEN = "the skill answered something it promised not to";

/** The refusals a call's line in the calls log can name; any other code is not an outcome of a call. */
const REFUSAL_OUTCOMES = {
  invalid_input: true,
  insufficient_balance: true,
  key_spend_limit_reached: true,
  payment_settlement_failed: true,
} as const satisfies Partial<Record<ErrorCode & CallOutcome, true>>;

/** One call on its way through the steps. */
interface Call<N> {
  req: PipelineRequest;
  skill: Skill;
  callId: string;
  payment: CallPayment<N>;
  /** The idempotency key's fate (completed, or given up) is committed: the backstop in run() must not give it up again. */
  keySettled: boolean;
}

/**
 * The call path, one for every way to pay (./payment.ts). Its steps run in this documented order, and the first
 * that refuses decides the answer (the tables of test/gateway/call-order.test.ts and test/x402/x402-order.test.ts
 * pin it for each way to pay):
 *
 *   1. resolve: the skill exists (404); the caller may call it (403 skill_not_allowed: a key's allowed_skills); its
 *      price is not above the call's max_price (409 price_above_max)
 *   2. the idempotency key, when one is sent: replay, in use (409), reused with another body (422)
 *   3. admit: the payment is offered (x402: a PAYMENT-SIGNATURE that parses, 402); the caller's rate limits (429)
 *      and daily cap (429), for a caller that has them (a key)
 *   4. validate: the input fits the skill's schema (400)
 *   5. reserve: the payment holds the price (keyed: balance, then the key's spending limit, 402; x402: the payment
 *      verifies, 402, its seller can be credited, 503, the payer's per-skill rate limit, 429, the authorization
 *      was never presented before, 402; then it is collected into the escrow, 402 when the chain refuses)
 *   6. forward to the backend (400 the backend's refusal; 502 its failure)
 *   7. render the answer (502 when the backend's data cannot be passed on, or breaks the skill's output schema:
 *      skill_bad_output; for a usage-priced skill, when its backend's signed charge is missing, malformed, wrongly
 *      signed or above max_price: skill_bad_charge)
 *   8. settle the payment or void it (never refused: the money was taken where it can be in step 5), and record
 *      the call
 *
 * A usage-priced skill's call reserves its max_price in step 5 and settles, in step 8, what its backend reported (the
 * rest is given back in the same transaction; a report of 0 gives it all back and still answers 200).
 *
 * A free call (price 0) has no payment: steps 3's offer, 5 and 8's money are skipped, and it is recorded alone.
 * (Authentication, 401, an expired key, 401 key_expired, the key's scope, 403 scope_missing, and body parsing,
 * 400/413, happen before, in that order, in the HTTP layer, which also turns the result into status, headers and
 * body: the pipeline names codes, not statuses. The call service checks a key's expiry and scope again for the
 * entries that do not authenticate a header: the dashboard's "try it" and MCP's tool calls.)
 *
 * Money moves only in steps 5 and 8. Every path after a reservation ends in exactly one settle or void, or, on a
 * fault, the payment's abandon: a reservation never outlives its call. The calls log's line and the idempotent
 * answer are written in the transaction that settles or voids the payment, so they commit with it or not at all;
 * a settled call's is durable before its answer is returned. A refusal before step 6 is recorded (with the key
 * given up) in a transaction of its own, for a payer whose refusals are logged.
 */
export class CallPipeline {
  /** Where a call's line and its key's fate are written. */
  private readonly stores: CallWriteStores;

  constructor(private readonly deps: PipelineDeps) {
    this.stores = { calls: deps.calls, idempotency: deps.idempotency.store };
  }

  async run<N>(req: PipelineRequest, payment: CallPayment<N>): Promise<CallResult<N>> {
    const { skills, idempotency } = this.deps;
    const skill = skills.resolve(req.skillRef);
    if (!skill) {
      return {
        kind: "refused",
        refusal: refusal("skill_not_found", `Skill not found: "${excerpt(req.skillRef, 100)}". Check the skill_id slug or UUID.`),
      };
    }
    // Before the idempotency key and everything after: a skill the caller may not call costs nothing, and leaves no trace.
    const forbidden = req.permits?.(skill);
    if (forbidden) return { kind: "refused", refusal: forbidden };
    // So is a price above what the caller accepts: a price raised since the caller looked is refused, not charged. A
    // usage-priced skill's is its max_price, what its call would hold: a call is never held for more than allowed.
    if (req.maxPriceMicros !== undefined) {
      const priceMicros = computeCharge(skill.priceMicros, this.deps.config.feeMode, this.deps.config.feeBps).chargedMicros;
      if (priceMicros > req.maxPriceMicros) return { kind: "refused", refusal: priceAboveMax(skill, priceMicros, req.maxPriceMicros) };
    }

    const idem = req.idempotency;
    if (idem) {
      const begun = await idempotency.begin(idem.accountId, idem.key, idem.requestHash);
      if (begun.kind === "replay") {
        // The stored response may belong to a charge still in the open batch: replay it only once that charge is on
        // disk, as the first answer was.
        await this.deps.db.durable();
        return { kind: "replayed", status: begun.status, body: begun.body };
      }
      if (begun.kind === "mismatch") {
        return {
          kind: "refused",
          refusal: refusal("idempotency_key_reused", "This Idempotency-Key was used with a different request body."),
        };
      }
      if (begun.kind === "in_progress") {
        return {
          kind: "refused",
          refusal: refusal("idempotency_key_in_use", "A request with this Idempotency-Key is still in progress; retry later."),
        };
      }
    }

    const call: Call<N> = { req, skill, callId: uuidv7(), payment, keySettled: false };
    try {
      return await this.steps(call);
    } finally {
      // The backstop: a call that ended in a fault gives its key up, so a retry runs again.
      if (idem && !call.keySettled) await idempotency.abandon(idem.accountId, idem.key);
    }
  }

  private async steps<N>(call: Call<N>): Promise<CallResult<N>> {
    const { config, skills } = this.deps;
    const { req, skill, payment } = call;
    const charge = computeCharge(skill.priceMicros, config.feeMode, config.feeBps);
    const paid: PaidCall | undefined = charge.chargedMicros > 0n ? { skill, charge, callId: call.callId, input: req.input } : undefined;

    // 3. admit
    if (paid) {
      const unoffered = payment.offer(paid);
      if (unoffered) return this.refuse(call, unoffered);
    }
    let rate: RateDecision | undefined;
    const admission = req.admission?.(skill);
    if (admission) {
      rate = await limitsAnswer(this.deps.limiter.admit(admission.rules));
      if (!rate.allowed) {
        return this.refuse(call, rateRefusal(rate.rule, admission.describe(rate.rule)), rate, rate.retryAfterMs);
      }
      const cap = admission.dailyCap;
      if (cap) {
        const daily = await limitsAnswer(this.deps.dailyCap.admit(cap.accountId, cap.cap));
        if (!daily.allowed) {
          const refused = refusal("daily_limit_reached", `Daily call limit of ${cap.cap} reached; it resets at 00:00 UTC.`);
          return this.refuse(call, refused, rate, daily.retryAfterMs);
        }
      }
    }

    // 4. validate
    const problems = await skills.validateInput(skill, req.input);
    if (problems.length > 0) {
      return this.refuse(call, refusal("invalid_input", `Input does not match the skill's schema: ${problems.join("; ")}`), rate);
    }

    // 5. reserve
    if (paid) {
      const unreserved = await payment.reserve(paid, this.admitOne);
      if (unreserved) return this.refuse(call, unreserved, rate);
    }

    // From here every path ends the reservation exactly once: settled on success, voided on any other outcome. A
    // fault (an answer that cannot be rendered, a commit that failed) leaves it to the payment's abandon.
    let ended = false;
    try {
      const forwarded = await this.forward(call, paid !== undefined, paid ? charge.chargedMicros : 0n);
      if (forwarded.kind === "ok") {
        const { chargedMicros, captured } = forwarded;
        const settled = await this.settle(call, paid !== undefined, forwarded.answer, chargedMicros, captured);
        ended = true;
        this.told(call, "success", chargedMicros);
        return { kind: "answered", callId: call.callId, rate, note: settled.note, budget: settled.budget, ...forwarded.answer };
      }

      const { code, message, outcome, keep, outputProblem } = forwarded;
      const answer = this.refusalAnswer(call, code, message);
      // A backend's refusal of the input is deterministic, so a retry gets the same answer; a backend failure is not,
      // so its key is given up and a retry runs again. What the seller is shown of a broken output contract is
      // committed with the call's line (or not at all).
      const record = this.recordOf(call, answer.status, outcome, 0n, keep ? answer : undefined, {
        ...(outputProblem !== undefined
          ? {
              outputFailure: {
                callId: call.callId,
                skillId: call.skill.id,
                endpoint: call.req.endpoint,
                problem: outputProblem,
                createdAtMs: Date.now(),
              },
            }
          : {}),
      });
      if (paid) await payment.void(record);
      else await this.deps.db.transaction(record.run);
      ended = true;
      this.told(call, outcome, 0n, code);
      return { kind: "answered", callId: call.callId, code, rate, ...answer };
    } finally {
      if (paid && !ended) await payment.abandon();
    }
  }

  /** 6 and 7: the backend's answer rendered, or the failure the call ends in. */
  private async forward<N>(
    call: Call<N>,
    reserved: boolean,
    chargedMicros: bigint,
  ): Promise<
    /** `chargedMicros`: what the answer says was paid; `captured`: a usage-priced call's charge, less than what was held. */
    | { kind: "ok"; answer: CallAnswer; chargedMicros: bigint; captured?: Charge }
    | {
        kind: "failed";
        code: ErrorCode;
        message: string;
        outcome: CallOutcome;
        keep: boolean;
        /** The first problem of an answer that broke the skill's output schema, for its seller. */
        outputProblem?: string;
      }
  > {
    // Every attempt of one call of the caller's (one Idempotency-Key) reaches the backend under one key of its own.
    const idem = call.req.idempotency;
    const idempotencyKey = idem ? forwardedIdempotencyKey(idem.accountId, idem.key) : call.callId;
    const forwarded = await this.deps.forwarder.forward(call.skill, call.callId, call.req.input, idempotencyKey);
    if (forwarded.kind === "rejected") {
      return { kind: "failed", code: "skill_rejected_input", message: forwarded.message, outcome: "skill_rejected_input", keep: true };
    }
    const note = call.payment.unchargedNote(reserved);
    const failed = (code: ErrorCode, message: string) =>
      ({
        kind: "failed",
        code,
        message: `Skill error: ${message}.${note ? ` ${note}` : ""}`,
        outcome: "skill_error",
        keep: false,
      }) as const;
    if (forwarded.kind === "failed") return failed(FAILURE_CODE[forwarded.reason], forwarded.message);
    // A usage-priced call is charged what its backend reported, signed (./usage-charge.ts): a report that cannot be
    // trusted is the backend's failure, and nobody pays for it.
    let captured: Charge | undefined;
    if (call.skill.pricing === "usage" && reserved) {
      const usage = readUsageCharge(call.skill, call.callId, forwarded.reported, this.deps.config);
      if (!usage.ok) {
        return { ...failed("skill_bad_charge", `the skill did not report a valid charge (${usage.problem})`), outcome: "skill_bad_charge" };
      }
      captured = usage.charge;
      chargedMicros = captured.chargedMicros;
    }
    // An answer that parsed but cannot be serialized again is the backend's failure, as an answer that does not
    // parse is: 502, not the gateway's 500, and paid by nobody.
    const answer = this.render(call, chargedMicros, { ok: true, data: forwarded.data });
    if (!answer) return failed("skill_invalid_response", "skill backend answered JSON nested too deeply to pass on");
    // The skill's output contract: a 2xx that is not what it promised is not delivered work, so it is not paid for.
    // Checked after rendering, so that the answer is known to be one that can be passed on (and copied to a worker).
    const outputProblem = await this.deps.skills.validateOutput(call.skill, forwarded.data);
    if (outputProblem !== undefined) {
      return { ...failed("skill_bad_output", OUTPUT_BROKEN), outcome: "skill_bad_output", outputProblem };
    }
    return { kind: "ok", answer, chargedMicros, ...(captured ? { captured } : {}) };
  }

  /** 8, on success: the payment settled (or a free call recorded), with the call's line and idempotent answer. */
  private async settle<N>(
    call: Call<N>,
    reserved: boolean,
    success: CallAnswer,
    chargedMicros: bigint,
    captured: Charge | undefined,
  ): Promise<Settlement<N>> {
    const record = this.recordOf(call, success.status, "success", chargedMicros, success, { required: true });
    if (!reserved) {
      // Free calls share commits (and flushes) with the charges of this replica, as a charge does.
      await this.deps.db.transaction(record.run, { durable: true, group: true });
      call.keySettled = true;
      return {};
    }
    const settled = await call.payment.settle(record, captured);
    call.keySettled = true;
    return settled;
  }

  /**
   * Ends a call refused before it was forwarded: nothing was reserved, nothing is charged, and its key is given up.
   * Its line is written for a payer whose refusals are logged; the answer names the call only then. A refusal by the
   * caller's own limits is counted instead (RefusalCounter): a flood of them must not grow the calls log.
   */
  private async refuse<N>(call: Call<N>, refused: PaymentRefusal<N>, rate?: RateDecision, retryAfterMs?: number): Promise<CallResult<N>> {
    const { payment } = call;
    const limited = refused.code === "rate_limited" || refused.code === "daily_limit_reached";
    const answer = this.refusalAnswer(call, refused.code, refused.message, refused.details, payment.logsRefusals && !limited);
    if (limited && payment.logsRefusals) {
      this.deps.refusals.count({ ...payment.payer, skillId: call.skill.id, outcome: refused.code as LimitRefusal });
      this.told(call, refused.code as LimitRefusal, 0n, refused.code);
    }
    const logged = payment.logsRefusals && !limited;
    if (logged) {
      const outcome = outcomeOf(refused.code);
      await this.deps.db.transaction(this.recordOf(call, answer.status, outcome, 0n, undefined).run);
      call.keySettled = true;
      this.told(call, outcome, 0n, refused.code);
    }
    return {
      kind: "answered",
      ...(logged ? { callId: call.callId } : {}),
      code: refused.code,
      rate,
      retryAfterMs,
      note: refused.note,
      ...answer,
    };
  }

  /** The pipeline's limits for a payment that checks a limit of its own in its reservation (x402's per payer). */
  private readonly admitOne: Admit = async (rule, who) => {
    const decision = await limitsAnswer(this.deps.limiter.admit([rule]));
    return decision.allowed ? undefined : rateRefusal(rule, who);
  };

  /**
   * The answer to a call's end, rendered by the HTTP layer; undefined when the backend's data cannot be serialized:
   * JSON nested so deep that JSON.stringify runs out of stack (JSON.parse does not recurse; it can).
   */
  private render<N>(call: Call<N>, chargedMicros: bigint, result: CallEnd["result"], logged = true): CallAnswer | undefined {
    const end: CallEnd = {
      endpoint: call.req.endpoint,
      skillSlug: call.skill.slug,
      responseTimeMs: elapsedMs(call),
      chargedMicros,
      // Named only when the call has a line in the calls log, as X-Call-Id is (refuse).
      ...(logged ? { callId: call.callId } : {}),
      result,
    };
    try {
      return this.deps.answers.render(end);
    } catch (error) {
      if (error instanceof RangeError) return undefined;
      throw error;
    }
  }

  /**
   * The answer to a call that was not charged: the code and message (and a refusal's details), and a price of 0; the
   * call's id unless `logged` is false (a refusal that writes no line in the calls log).
   */
  private refusalAnswer<N>(call: Call<N>, code: ErrorCode, message: string, details?: Record<string, unknown>, logged = true): CallAnswer {
    const answer = this.render(call, 0n, { ok: false, code, message, ...(details ? { details } : {}) }, logged);
    if (!answer) throw new Error(`the answer to a refused call (${code}) could not be rendered`);
    return answer;
  }

  /**
   * What a call's end writes with its payment (./call-write.ts): its line in the calls log, and its idempotency key's
   * fate: the answer `kept` under it (`required`: the key must still be in progress), or the key given up.
   */
  private recordOf<N>(
    call: Call<N>,
    httpStatus: number,
    outcome: CallOutcome,
    chargedMicros: bigint,
    kept: CallAnswer | undefined,
    more: { required?: boolean; outputFailure?: CallWrite["outputFailure"] } = {},
  ): RecordCall {
    const { payer, holdId } = call.payment;
    const idem = call.req.idempotency;
    // Stamped when written (an x402 payment's chain transaction comes first), so the line's latency is the call's.
    const writeNow = (): CallWrite => ({
      line: {
        id: call.callId,
        accountId: payer.accountId,
        apiKeyId: payer.apiKeyId,
        skillId: call.skill.id,
        endpoint: call.req.endpoint,
        httpStatus,
        outcome,
        chargedMicros,
        holdId,
        latencyUs: elapsedMs(call) * 1000,
        createdAtMs: Date.now(),
      },
      ...(more.outputFailure ? { outputFailure: more.outputFailure } : {}),
      ...(idem
        ? {
            idempotency: {
              accountId: idem.accountId,
              key: idem.key,
              answer: kept ? { status: kept.status, body: kept.body } : null,
              required: more.required ?? false,
            },
          }
        : {}),
    });
    const stores = this.stores;
    return {
      get write() {
        return writeNow();
      },
      run: (tx: Sql) => writeCall(stores, writeNow(), tx),
    };
  }

  /** Tells onCall about a call whose line is committed (after the transaction: a rolled back or retried one is not told twice). */
  private told<N>(call: Call<N>, outcome: CallOutcome, chargedMicros: bigint, code?: ErrorCode): void {
    this.deps.onCall?.({ skill: call.skill.slug, skillId: call.skill.id, outcome, code, chargedMicros, latencyMs: elapsedMs(call) });
  }
}

/**
 * The refusal of a call whose skill costs more than the caller's max_price: the current price in the message, and both
 * numbers in `details` (USD, as the API's JSON writes it).
 */
function priceAboveMax(skill: Skill, priceMicros: bigint, maxPriceMicros: bigint): Refusal<"price_above_max"> {
  return refusal(
    "price_above_max",
    `The skill "${skill.slug}" costs ${skill.pricing === "usage" ? "up to " : ""}${usdDisplay(priceMicros)} per call, above this call's max_price of ${usdDisplay(maxPriceMicros)}: nothing was charged. Accept the new price with a max_price of at least ${usdDisplay(priceMicros)}.`,
    { details: { details: { price: microsToUsd(priceMicros), max_price: microsToUsd(maxPriceMicros) } } },
  );
}

/** The refusal of a call over a per-minute limit. */
function rateRefusal(rule: RateRule, who: string): Refusal<"rate_limited"> {
  return refusal("rate_limited", `Rate limit exceeded: ${rule.limit} calls per minute for ${who}.`);
}

/** The calls log's outcome for a refusal; a code that is not one is a bug of the path that returned it. */
function outcomeOf(code: ErrorCode): CallOutcome {
  if (Object.hasOwn(REFUSAL_OUTCOMES, code)) return code as keyof typeof REFUSAL_OUTCOMES;
  throw new Error(`a call refused with ${code} has no outcome in the calls log`);
}

function elapsedMs<N>(call: Call<N>): number {
  return performance.now() - call.req.startedAt;
}

/**
 * The limits' decision; a limiter that cannot decide (REDIS_URL's Redis down or too slow: the shared limits fail
 * fast) refuses the call with 503 limits_unavailable before anything is held. Failing open would let a caller past
 * its limits on every replica for as long as Redis is down.
 */
async function limitsAnswer<T>(decision: Promise<T>): Promise<T> {
  try {
    return await decision;
  } catch (error) {
    throw new GatewayError(
      "limits_unavailable",
      "The gateway's rate limits could not be checked; the call did not run. Try again shortly.",
      {
        cause: error,
      },
    );
  }
}
