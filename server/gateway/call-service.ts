import { uuidv7 } from "../db/ids";
import { performance } from "node:perf_hooks";
import type { ApiKeyRecord } from "../identity/api-keys";
import type { Config } from "../config";
import { type ErrorCode, GatewayError } from "../errors";
import { computeCharge } from "../ledger/fees";
import type { Hold, HoldResult, Ledger } from "../ledger/ledger";
import { usdDisplay } from "../ledger/money";
import type { CallOutcome, CallsStore, Endpoint } from "./calls-store";
import type { ForwardResult, Forwarder } from "./forward";
import type { IdempotencyKeys } from "./idempotency";
import type { Sql } from "../db/sql";
import type { CallDailyCap, CallLimiter, RateDecision, RateRule } from "./rate-limit";
import type { Skill, SkillRegistry } from "../catalog/skills";

export interface CallRequest {
  endpoint: Endpoint;
  apiKey: ApiKeyRecord;
  skillRef: string;
  input: unknown;
  idempotency?: { key: string; requestHash: string };
  /** performance.now() when the request arrived; response times are measured from it. */
  startedAt: number;
}

/**
 * How a call ended, as the gateway decided it: the backend's data, or the code and message of
 * the refusal or failure. The HTTP layer renders it (CallAnswers) into the status and body.
 */
export interface CallEnd {
  endpoint: Endpoint;
  skillSlug: string;
  responseTimeMs: number;
  chargedMicros: bigint;
  result: { ok: true; data: unknown } | { ok: false; code: ErrorCode; message: string };
}

/** A call's answer as the client gets it: the status and the JSON body, serialized. */
export interface CallAnswer {
  status: number;
  /** Sent byte for byte, and stored for an idempotent replay in the same commit as the charge. */
  body: string;
}

/**
 * The HTTP layer's rendering of a call's end (server/http/call-answer.ts). The call service
 * renders before the commit of the charge, because the final body is stored for an idempotent
 * replay and its status is counted in the calls log, in that commit; what the body says is HTTP's.
 */
export interface CallAnswers {
  /** The answer; undefined when the backend's data cannot be serialized again (JSON nested too deep). */
  render(end: CallEnd): CallAnswer | undefined;
}

/** What a call came to: a stored answer replayed, or the answer of this call with what its headers need. */
export type CallResult =
  | ({ kind: "replayed" } & CallAnswer)
  | ({
      kind: "answered";
      callId: string;
      /** The code of a refusal or failure; absent on success. */
      code?: ErrorCode;
      /** The per-key rate limit as it stands after this call. */
      rate: RateDecision;
      /** When a refused call may be tried again (rate limit, daily cap). */
      retryAfterMs?: number;
    } & CallAnswer);

export interface CallServiceDeps {
  config: Config;
  /** The books; its database (`ledger.db`) holds the calls log and the idempotency keys too, written in the charge's transactions. */
  ledger: Ledger;
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
  /** Told about every call once it is committed to the calls log (for metrics and the request's log line). */
  onCall?: (call: { skill: string; outcome: CallOutcome; chargedMicros: bigint; latencyMs: number }) => void;
  /** The clock keys' spending periods are read by (ms since the epoch); Date.now by default. A test moves it. */
  now?: () => number;
}

const MINUTE_MS = 60_000;

const FAILURE_CODE: Record<Extract<ForwardResult, { kind: "failed" }>["reason"], ErrorCode> = {
  backend_error: "skill_error",
  timeout: "skill_timeout",
  unreachable: "skill_unreachable",
  invalid_json: "skill_invalid_response",
  response_too_large: "skill_invalid_response",
  forbidden: "skill_backend_forbidden",
};

/** One call on its way through the checks: the request, its skill, its id, and how to say its idempotency key is settled. */
interface Call {
  req: CallRequest;
  skill: Skill;
  callId: string;
  /** The key's fate (completed, or given up) is committed: the backstop in execute() must not give it up again. */
  keySettled: () => void;
}

/**
 * The paid call path. Checks run in this documented order, and the first that fails
 * decides the answer (test/gateway/call-order.test.ts pins it):
 *
 *   1. skill exists (404)                5. input fits the skill's schema (400)
 *   2. idempotency key (replay/409/422)  6. hold: the balance covers the price (402 insufficient_balance),
 *   3. rate limits: key, skill (429)        then the key's spending limit allows it (402 key_spend_limit_reached)
 *   4. daily cap of the account (429)    7. forward to the backend (400 / 502)
 *                                        8. capture (200) or release
 *
 * (Authentication, 401, and body parsing, 400/413, happen before, in the HTTP layer, which
 * also turns the result into status, headers and body: the service names codes, not statuses.)
 * Money moves only in steps 6 and 8. Every path after a hold ends in exactly one capture
 * or release, and a charge is durable before its response is returned.
 *
 * Transactions: the hold is one of its own, not durable (a hold lost in a crash is a hold
 * released). The capture, the calls log's line and the idempotent response commit in one
 * durable transaction; a release, its line and the key's fate in one that is not; a refusal's
 * line and the key given up in one that is not. Nothing but their own statements is awaited
 * inside them: the backend is called between the hold and the capture, outside any.
 */
export class CallService {
  constructor(private readonly deps: CallServiceDeps) {}

  async execute(req: CallRequest): Promise<CallResult> {
    const { skills, idempotency } = this.deps;
    const skill = skills.resolve(req.skillRef);
    if (!skill) throw new GatewayError("skill_not_found", `Skill not found: "${req.skillRef}". Check the skill_id slug or UUID.`);

    const accountId = req.apiKey.accountId;
    const idem = req.idempotency;
    if (idem) {
      const begun = await idempotency.begin(accountId, idem.key, idem.requestHash);
      if (begun.kind === "replay") {
        // The stored response may belong to a charge still in the open batch: replay it only
        // once that charge is on disk, as the first answer was.
        await this.deps.ledger.db.durable();
        return { kind: "replayed", status: begun.status, body: begun.body };
      }
      if (begun.kind === "mismatch")
        throw new GatewayError("idempotency_key_reused", "This Idempotency-Key was used with a different request body.");
      if (begun.kind === "in_progress")
        throw new GatewayError("idempotency_key_in_use", "A request with this Idempotency-Key is still in progress; retry later.");
    }

    let keySettled = false;
    try {
      const response = await this.run({ req, skill, callId: uuidv7(), keySettled: () => (keySettled = true) });
      return response;
    } finally {
      // The backstop: a call that ended in a fault gives its key up, so a retry runs again.
      if (idem && !keySettled) await idempotency.abandon(accountId, idem.key);
    }
  }

  private async run(call: Call): Promise<CallResult> {
    const { config, ledger, limiter, dailyCap, forwarder } = this.deps;
    const { req, skill } = call;
    const accountId = req.apiKey.accountId;

    const rules: RateRule[] = [
      { key: `key:${req.apiKey.id}`, limit: req.apiKey.rateLimitPerMin ?? config.rateLimitPerMin, windowMs: MINUTE_MS },
    ];
    if (skill.rateLimitPerMin !== null) {
      rules.push({ key: `skill:${skill.id}:${accountId}`, limit: skill.rateLimitPerMin, windowMs: MINUTE_MS });
    }
    const decision = await limitsAnswer(limiter.admit(rules));
    if (!decision.allowed) {
      const which = decision.rule === rules[0] ? "API key" : `skill "${skill.slug}"`;
      return this.fail(
        call,
        decision,
        "rate_limited",
        `Rate limit exceeded: ${decision.rule.limit} calls per minute for this ${which}.`,
        decision.retryAfterMs,
      );
    }

    const cap = req.apiKey.accountDailyCallCap ?? config.dailyCallCap;
    if (cap > 0) {
      const daily = await limitsAnswer(dailyCap.admit(accountId, cap));
      if (!daily.allowed) {
        return this.fail(
          call,
          decision,
          "daily_limit_reached",
          `Daily call limit of ${cap} reached; it resets at 00:00 UTC.`,
          daily.retryAfterMs,
        );
      }
    }

    const problems = await this.deps.skills.validateInput(skill, req.input);
    if (problems.length > 0) {
      return this.fail(call, decision, "invalid_input", `Input does not match the skill's schema: ${problems.join("; ")}`);
    }

    const charge = computeCharge(skill.priceMicros, config.feeMode, config.feeBps);
    let hold: Hold | null = null;
    if (charge.chargedMicros > 0n) {
      const held = await ledger.hold({
        accountId,
        sellerAccountId: skill.sellerAccountId,
        skillId: skill.id,
        charge,
        apiKeyId: req.apiKey.id,
        nowMs: this.deps.now?.() ?? Date.now(),
      });
      if (!held.ok && held.reason === "key_spend_limit_reached") {
        return this.fail(call, decision, "key_spend_limit_reached", spendLimitMessage(held));
      }
      if (!held.ok) {
        const message = (await ledger.hasExitShortfall(accountId))
          ? "Insufficient balance: an exit from the escrow is pending for this account, and its money is frozen until the exit completes or is cancelled."
          : `Insufficient balance: this call costs ${usdDisplay(held.neededMicros)} and ${usdDisplay(held.availableMicros)} is available. Add funds.`;
        return this.fail(call, decision, "insufficient_balance", message);
      }
      hold = held.hold;
    }

    // From here every path ends the hold exactly once: captured on success, released on
    // any other outcome, including a gateway fault (a response that cannot be serialized,
    // a capture that did not become durable). The finally block is the backstop.
    let settled = false;
    try {
      const forwarded = await forwarder.forward(skill, call.callId, req.input);
      const chargedMicros = hold?.amountMicros ?? 0n;
      // An answer that parsed but cannot be serialized again is the backend's failure, as an
      // answer that does not parse is: 502, not the gateway's 500.
      const success = forwarded.kind === "ok" ? this.render(req, skill, chargedMicros, { ok: true, data: forwarded.data }) : undefined;
      const result: Exclude<ForwardResult, { kind: "ok" }> | { kind: "ok"; answer: CallAnswer } =
        forwarded.kind !== "ok"
          ? forwarded
          : success === undefined
            ? {
                kind: "failed",
                reason: "invalid_json",
                status: forwarded.status,
                message: "skill backend answered JSON nested too deeply to pass on",
              }
            : { kind: "ok", answer: success };

      if (result.kind === "ok") {
        const { status, body } = result.answer;
        // Capture, the calls log and the idempotent response commit together, and the
        // response waits until they are on disk.
        await ledger.db.transaction(
          async (tx) => {
            if (hold) {
              const captured = await ledger.capture(hold.id, tx);
              if (!captured.ok) throw new Error(`hold ${hold.id} was not open at capture`);
            }
            await this.record(tx, call, status, "success", chargedMicros, hold);
            if (req.idempotency) {
              await this.deps.idempotency.complete(accountId, req.idempotency.key, status, body, tx, { required: true });
            }
          },
          // Charges share commits (and flushes) with the others of this replica: they all post to the platform's
          // balance row, whose lock each would otherwise hold through a flush of its own.
          { durable: true, group: true },
        );
        settled = true;
        call.keySettled();
        this.told(call, "success", chargedMicros);
        return { kind: "answered", callId: call.callId, rate: decision, status, body };
      }

      const code: ErrorCode = result.kind === "rejected" ? "skill_rejected_input" : FAILURE_CODE[result.reason];
      const outcome: CallOutcome = result.kind === "rejected" ? "skill_rejected_input" : "skill_error";
      const { status, body } = this.refusal(
        req,
        skill,
        code,
        result.kind === "rejected" ? result.message : `Skill error: ${result.message}. You were not charged.`,
      );
      // A backend's refusal of the input is deterministic, so a retry gets the same answer;
      // a backend failure is not, so its key is given up and a retry runs again.
      const keep = result.kind === "rejected";
      await ledger.db.transaction(async (tx) => {
        if (hold) await ledger.release(hold.id, tx);
        await this.record(tx, call, status, outcome, 0n, hold);
        await this.settleKey(tx, req, keep ? { status, body } : undefined);
      });
      settled = true;
      call.keySettled();
      this.told(call, outcome, 0n);
      return { kind: "answered", callId: call.callId, code, rate: decision, status, body };
    } finally {
      if (hold && !settled) await ledger.release(hold.id);
    }
  }

  /**
   * The answer to `result`, rendered by the HTTP layer; undefined when the backend's data cannot
   * be serialized: JSON nested so deep that JSON.stringify runs out of stack (JSON.parse does not
   * recurse; it can).
   */
  private render(req: CallRequest, skill: Skill, chargedMicros: bigint, result: CallEnd["result"]): CallAnswer | undefined {
    const end: CallEnd = { endpoint: req.endpoint, skillSlug: skill.slug, responseTimeMs: elapsedMs(req), chargedMicros, result };
    try {
      return this.deps.answers.render(end);
    } catch (error) {
      if (error instanceof RangeError) return undefined;
      throw error;
    }
  }

  /** The answer to a call that was not charged: the code and message, and a price of 0. */
  private refusal(req: CallRequest, skill: Skill, code: ErrorCode, message: string): CallAnswer {
    const answer = this.render(req, skill, 0n, { ok: false, code, message });
    if (!answer) throw new Error(`the answer to a refused call (${code}) could not be rendered`);
    return answer;
  }

  /** Ends a call refused before forwarding: nothing was held, nothing is charged, and its key is given up. */
  private async fail(
    call: Call,
    rate: RateDecision,
    code: ErrorCode & CallOutcome,
    message: string,
    retryAfterMs?: number,
  ): Promise<CallResult> {
    const { status, body } = this.refusal(call.req, call.skill, code, message);
    await this.deps.ledger.db.transaction(async (tx) => {
      await this.record(tx, call, status, code, 0n, null);
      await this.settleKey(tx, call.req, undefined);
    });
    call.keySettled();
    this.told(call, code, 0n);
    return { kind: "answered", callId: call.callId, code, rate, retryAfterMs, status, body };
  }

  /** Stores the answer under the call's idempotency key, or gives the key up when `kept` is undefined. */
  private async settleKey(tx: Sql, req: CallRequest, kept: CallAnswer | undefined): Promise<void> {
    const idem = req.idempotency;
    if (!idem) return;
    if (kept) await this.deps.idempotency.complete(req.apiKey.accountId, idem.key, kept.status, kept.body, tx);
    else await this.deps.idempotency.abandon(req.apiKey.accountId, idem.key, tx);
  }

  /** Writes the call's line in the calls log, in `tx`, the transaction of the capture or release it reports. */
  private async record(
    tx: Sql,
    call: Call,
    httpStatus: number,
    outcome: CallOutcome,
    chargedMicros: bigint,
    hold: Hold | null,
  ): Promise<void> {
    const { req, skill } = call;
    await this.deps.calls.record(
      {
        id: call.callId,
        accountId: req.apiKey.accountId,
        apiKeyId: req.apiKey.id,
        skillId: skill.id,
        endpoint: req.endpoint,
        httpStatus,
        outcome,
        chargedMicros,
        holdId: hold?.id ?? null,
        latencyUs: elapsedMs(req) * 1000,
        createdAtMs: Date.now(),
      },
      tx,
    );
  }

  /** Tells onCall about a call whose line is committed (after the transaction: a rolled back or retried one is not told twice). */
  private told(call: Call, outcome: CallOutcome, chargedMicros: bigint): void {
    this.deps.onCall?.({ skill: call.skill.slug, outcome, chargedMicros, latencyMs: elapsedMs(call.req) });
  }
}

const PER_PERIOD = { day: "per day", month: "per month", total: "in total" } as const;

/**
 * The refusal of a call its key's spending limit does not allow: the limit, its period, what is spent, and when it
 * resets (a UTC boundary, to the second) or that it never does.
 */
export function spendLimitMessage(refused: Extract<HoldResult, { reason: "key_spend_limit_reached" }>): string {
  const spent = `${usdDisplay(refused.spentMicros)} spent, this call costs ${usdDisplay(refused.neededMicros)}`;
  const resets =
    refused.resetsAtMs === null
      ? "it does not reset: raise or remove the limit to go on"
      : `it resets at ${new Date(refused.resetsAtMs).toISOString().replace(/\.\d{3}Z$/, "Z")}`;
  if (refused.neededMicros > refused.limitMicros) {
    // Waiting for the reset would not help: this call alone costs more than the whole limit.
    return `This call costs ${usdDisplay(refused.neededMicros)}, more than this key's whole spending limit of ${usdDisplay(refused.limitMicros)} ${PER_PERIOD[refused.period]}: raise the limit to make it.`;
  }
  return `This key's spending limit of ${usdDisplay(refused.limitMicros)} ${PER_PERIOD[refused.period]} is reached (${spent}); ${resets}.`;
}

function elapsedMs(req: CallRequest): number {
  return performance.now() - req.startedAt;
}

/**
 * The limits' decision; a limiter that cannot decide (REDIS_URL's Redis down or too slow: the shared limits
 * fail fast) refuses the call with 503 limits_unavailable before anything is held. Failing open would let a
 * key past its limits on every replica for as long as Redis is down.
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
