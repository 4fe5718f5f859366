import { uuidv7 } from "../db/ids";
import { performance } from "node:perf_hooks";
import type { ApiKeyRecord } from "../identity/api-keys";
import type { Config } from "../config";
import { ApiError, type ErrorCode } from "../http/errors";
import { type Endpoint, callMetadata, errorEnvelope, successEnvelope } from "../http/envelope";
import { computeCharge } from "../ledger/fees";
import type { Hold, Ledger } from "../ledger/ledger";
import { microsToUsd } from "../ledger/money";
import type { CallOutcome, CallsStore } from "./calls-store";
import type { ForwardResult, Forwarder } from "./forward";
import type { IdempotencyKeys } from "./idempotency";
import type { DailyCap, RateDecision, RateLimiter, RateRule } from "./rate-limit";
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

export interface CallResponse {
  status: number;
  /** The JSON body, already serialized (a replayed response is sent byte for byte). */
  body: string;
  headers: Record<string, string>;
}

export interface CallServiceDeps {
  config: Config;
  ledger: Ledger;
  skills: SkillRegistry;
  calls: CallsStore;
  idempotency: IdempotencyKeys;
  limiter: RateLimiter;
  dailyCap: DailyCap;
  forwarder: Forwarder;
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

/**
 * The paid call path. Checks run in this documented order, and the first that fails
 * decides the answer (test/gateway/call-order.test.ts pins it):
 *
 *   1. skill exists (404)            5. input fits the skill's schema (400)
 *   2. idempotency key (replay/409/422)  6. balance covers the price: hold (402)
 *   3. rate limits: key, skill (429)     7. forward to the backend (400 / 502)
 *   4. daily cap of the account (429)    8. capture (200) or release
 *
 * (Authentication, 401, and body parsing, 400/413, happen before, in the HTTP layer.)
 * Money moves only in steps 6 and 8. Every path after a hold ends in exactly one capture
 * or release, and a charge is durable before its response is returned.
 */
export class CallService {
  constructor(private readonly deps: CallServiceDeps) {}

  async execute(req: CallRequest): Promise<CallResponse> {
    const { skills, idempotency } = this.deps;
    const skill = skills.resolve(req.skillRef);
    if (!skill) throw new ApiError("skill_not_found", `Skill not found: "${req.skillRef}". Check the skill_id slug or UUID.`);

    const accountId = req.apiKey.accountId;
    const idem = req.idempotency;
    if (idem) {
      const begun = this.deps.ledger.commit.run(() => idempotency.begin(accountId, idem.key, idem.requestHash));
      if (begun.kind === "replay") {
        // The stored response may belong to a charge still in the open batch: replay it only
        // once that charge is on disk, as the first answer was.
        await this.deps.ledger.commit.durable();
        return { status: begun.status, body: begun.body, headers: { "idempotent-replayed": "true" } };
      }
      if (begun.kind === "mismatch")
        throw new ApiError("idempotency_key_reused", "This Idempotency-Key was used with a different request body.");
      if (begun.kind === "in_progress")
        throw new ApiError("idempotency_key_in_use", "A request with this Idempotency-Key is still in progress; retry later.");
    }

    let stored = false;
    try {
      const response = await this.run(req, skill, () => (stored = true));
      return response;
    } finally {
      if (idem && !stored) this.deps.ledger.commit.run(() => idempotency.abandon(accountId, idem.key));
    }
  }

  private async run(req: CallRequest, skill: Skill, markStored: () => void): Promise<CallResponse> {
    const { config, ledger, limiter, dailyCap, forwarder } = this.deps;
    const callId = uuidv7();
    const accountId = req.apiKey.accountId;

    const rules: RateRule[] = [
      { key: `key:${req.apiKey.id}`, limit: req.apiKey.rateLimitPerMin ?? config.rateLimitPerMin, windowMs: MINUTE_MS },
    ];
    if (skill.rateLimitPerMin !== null) {
      rules.push({ key: `skill:${skill.id}:${accountId}`, limit: skill.rateLimitPerMin, windowMs: MINUTE_MS });
    }
    const decision = limiter.admit(rules);
    const headers = rateHeaders(decision);
    if (!decision.allowed) {
      const which = decision.rule === rules[0] ? "API key" : `skill "${skill.slug}"`;
      return this.fail(
        req,
        skill,
        callId,
        "rate_limited",
        `Rate limit exceeded: ${decision.rule.limit} calls per minute for this ${which}.`,
        "rate_limited",
        {
          ...headers,
          "retry-after": String(Math.max(1, Math.ceil(decision.retryAfterMs / 1000))),
        },
      );
    }

    const cap = req.apiKey.accountDailyCallCap ?? config.dailyCallCap;
    if (cap > 0) {
      const daily = dailyCap.admit(accountId, cap);
      if (!daily.allowed) {
        return this.fail(
          req,
          skill,
          callId,
          "daily_limit_reached",
          `Daily call limit of ${cap} reached; it resets at 00:00 UTC.`,
          "daily_limit_reached",
          {
            ...headers,
            "retry-after": String(Math.ceil(daily.retryAfterMs / 1000)),
          },
        );
      }
    }

    const problems = await this.deps.skills.validateInput(skill, req.input);
    if (problems.length > 0) {
      return this.fail(
        req,
        skill,
        callId,
        "invalid_input",
        `Input does not match the skill's schema: ${problems.join("; ")}`,
        "invalid_input",
        headers,
      );
    }

    const charge = computeCharge(skill.priceMicros, config.feeMode, config.feeBps);
    let hold: Hold | null = null;
    if (charge.chargedMicros > 0n) {
      const held = ledger.hold({ accountId, sellerAccountId: skill.sellerAccountId, skillId: skill.id, charge });
      if (!held.ok) {
        const message = ledger.hasExitShortfall(accountId)
          ? "Insufficient balance: an exit from the escrow is pending for this account, and its money is frozen until the exit completes or is cancelled."
          : `Insufficient balance: this call costs ${microsToUsd(held.neededMicros)} USD and ${microsToUsd(held.availableMicros)} USD is available. Add funds.`;
        return this.fail(req, skill, callId, "insufficient_balance", message, "insufficient_balance", headers);
      }
      hold = held.hold;
    }

    // From here every path ends the hold exactly once: captured on success, released on
    // any other outcome, including a gateway fault (a response that cannot be serialized,
    // a capture that did not become durable). The finally block is the backstop.
    let settled = false;
    try {
      const forwarded = await forwarder.forward(skill, callId, req.input);
      const chargedMicros = hold?.amountMicros ?? 0n;
      // An answer that parsed but cannot be serialized again is the backend's failure, as an
      // answer that does not parse is: 502, not the gateway's 500.
      const success = forwarded.kind === "ok" ? this.successBody(req, skill, forwarded.data, chargedMicros) : undefined;
      const result: Exclude<ForwardResult, { kind: "ok" }> | { kind: "ok"; body: string } =
        forwarded.kind !== "ok"
          ? forwarded
          : success === undefined
            ? {
                kind: "failed",
                reason: "invalid_json",
                status: forwarded.status,
                message: "skill backend answered JSON nested too deeply to pass on",
              }
            : { kind: "ok", body: success };

      if (result.kind === "ok") {
        const { body } = result;
        // Capture, the calls log and the idempotent response commit together, and the
        // response waits until they are on disk.
        await ledger.commit.runDurable(() => {
          if (hold) {
            const captured = ledger.capture(hold.id);
            if (!captured.ok) throw new Error(`hold ${hold.id} was not open at capture`);
          }
          this.record(req, skill, callId, 200, "success", chargedMicros, hold);
          if (req.idempotency) this.deps.idempotency.complete(req.apiKey.accountId, req.idempotency.key, 200, body);
        });
        settled = true;
        markStored();
        return { status: 200, body, headers: { ...headers, "x-call-id": callId } };
      }

      const code: ErrorCode = result.kind === "rejected" ? "skill_rejected_input" : FAILURE_CODE[result.reason];
      const outcome: CallOutcome = result.kind === "rejected" ? "skill_rejected_input" : "skill_error";
      const status = result.kind === "rejected" ? 400 : 502;
      const body = this.errorBody(
        req,
        skill,
        code,
        result.kind === "rejected" ? result.message : `Skill error: ${result.message}. You were not charged.`,
      );
      // A backend's refusal of the input is deterministic, so a retry gets the same answer;
      // a backend failure is not, so its key is given up and a retry runs again.
      const keep = result.kind === "rejected" ? req.idempotency : undefined;
      ledger.commit.run(() => {
        if (hold) ledger.release(hold.id);
        this.record(req, skill, callId, status, outcome, 0n, hold);
        if (keep) this.deps.idempotency.complete(req.apiKey.accountId, keep.key, status, body);
      });
      settled = true;
      if (keep) markStored();
      return { status, body, headers: { ...headers, "x-call-id": callId } };
    } finally {
      if (hold && !settled) ledger.release(hold.id);
    }
  }

  /**
   * The 200's body, or undefined when the backend's data cannot be serialized: JSON nested
   * so deep that JSON.stringify runs out of stack (JSON.parse does not recurse; it can).
   */
  private successBody(req: CallRequest, skill: Skill, data: unknown, chargedMicros: bigint): string | undefined {
    try {
      return JSON.stringify(successEnvelope(req.endpoint, data, { skillId: skill.slug, responseTimeMs: elapsedMs(req), chargedMicros }));
    } catch (error) {
      if (error instanceof RangeError) return undefined;
      throw error;
    }
  }

  /** Ends a call refused before forwarding: nothing was held, nothing is charged. */
  private fail(
    req: CallRequest,
    skill: Skill,
    callId: string,
    code: ErrorCode,
    message: string,
    outcome: CallOutcome,
    headers: Record<string, string>,
  ): CallResponse {
    const status = new ApiError(code, message).status;
    this.deps.ledger.commit.run(() => this.record(req, skill, callId, status, outcome, 0n, null));
    return { status, body: this.errorBody(req, skill, code, message), headers: { ...headers, "x-call-id": callId } };
  }

  private errorBody(req: CallRequest, skill: Skill, code: ErrorCode, message: string): string {
    const metadata = callMetadata(req.endpoint, { skillId: skill.slug, responseTimeMs: elapsedMs(req), chargedMicros: 0n });
    return JSON.stringify(errorEnvelope(code, message, { metadata }));
  }

  private record(
    req: CallRequest,
    skill: Skill,
    callId: string,
    httpStatus: number,
    outcome: CallOutcome,
    chargedMicros: bigint,
    hold: Hold | null,
  ): void {
    this.deps.calls.record({
      id: callId,
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
    });
  }
}

function elapsedMs(req: CallRequest): number {
  return performance.now() - req.startedAt;
}

/** IETF RateLimit headers for the headline (per-key) limit. */
function rateHeaders(d: RateDecision): Record<string, string> {
  return {
    "ratelimit-limit": String(d.rule.limit),
    "ratelimit-remaining": String(d.remaining),
    "ratelimit-reset": String(Math.max(0, Math.ceil(d.resetMs / 1000))),
  };
}
