import type { ApiKeyRecord } from "../identity/api-keys";
import type { Config } from "../config";
import type { Ledger } from "../ledger/ledger";
import type { Skill } from "../catalog/skills";
import type { Endpoint } from "./calls-store";
import { type HoldBook, LedgerHolds, LedgerPayment } from "./ledger-payment";
import type { CallResult } from "./call-result";
import type { Admission, CallPipeline } from "./pipeline";
import type { RateRule } from "./rate-limit";
import { refusal } from "../errors";
import { allowsSkill, isExpired } from "../identity/scopes";

/** A call made with an API key, as the HTTP layer hands it over (POST /v1/call, /v1/skills/:id/call, try, MCP). */
export interface CallRequest {
  endpoint: Endpoint;
  apiKey: ApiKeyRecord;
  skillRef: string;
  input: unknown;
  idempotency?: { key: string; requestHash: string };
  /** performance.now() when the request arrived; response times are measured from it. */
  startedAt: number;
  /** The call's max_price in base units (409 price_above_max above it: ./pipeline.ts); absent for any price. */
  maxPriceMicros?: bigint;
}

export interface CallServiceDeps {
  config: Pick<Config, "rateLimitPerMin" | "dailyCallCap">;
  /** The books: a keyed call's payment is a hold on its account's balance. */
  ledger: Ledger;
  /** Where a keyed call's hold and its end are written: the ledger's own connection (LedgerHolds) by default. */
  holds?: HoldBook;
  pipeline: CallPipeline;
  /** The clock keys' spending periods are read by (ms since the epoch); Date.now by default. A test moves it. */
  now?: () => number;
}

const MINUTE_MS = 60_000;

/**
 * Calls made with an API key: what is the key's own on the call pipeline (./pipeline.ts, which documents the order
 * of the checks). Its limits, checked before the input: the key's calls per minute (the headline limit, in the
 * RateLimit headers), the account's calls of a skill with a limit of its own, and the account's daily cap. Its
 * idempotency keys are the account's. Its payment is a hold on the account's balance, within the key's spending
 * limit (./ledger-payment.ts).
 */
export class CallService {
  private readonly now: () => number;
  private readonly holds: HoldBook;

  constructor(private readonly deps: CallServiceDeps) {
    this.now = deps.now ?? Date.now;
    this.holds = deps.holds ?? new LedgerHolds(deps.ledger);
  }

  /**
   * Runs a call as `req.apiKey`. The HTTP entries that authenticate a header refuse an expired key (401) and one
   * without `calls` (403) before this; they are refused here too, for the entries that do not (the dashboard's "try
   * it" picks a key by id, MCP's tool calls run inside one request): whichever way a key comes, it calls only while
   * live, with `calls`, and only the skills its allowed_skills names.
   */
  async execute(req: CallRequest): Promise<CallResult> {
    const { apiKey } = req;
    const accountId = apiKey.accountId;
    if (isExpired(apiKey, this.now())) {
      return { kind: "refused", refusal: refusal("key_expired", "This API key has expired: make a new key (Dashboard, API Keys).") };
    }
    if (!apiKey.scopes.includes("calls")) {
      return {
        kind: "refused",
        refusal: refusal("scope_missing", "This API key lacks the calls scope, which calling a skill needs: use a key that has it."),
      };
    }
    const payment = new LedgerPayment(this.deps.ledger, this.holds, { accountId, apiKeyId: apiKey.id }, this.now);
    return this.deps.pipeline.run(
      {
        endpoint: req.endpoint,
        skillRef: req.skillRef,
        input: req.input,
        startedAt: req.startedAt,
        idempotency: req.idempotency && { accountId, ...req.idempotency },
        maxPriceMicros: req.maxPriceMicros,
        admission: (skill) => this.admission(apiKey, skill),
        permits: (skill) =>
          allowsSkill(apiKey, skill)
            ? undefined
            : refusal("skill_not_allowed", `This API key may not call the skill "${skill.slug}": it is not in the key's allowed_skills.`),
      },
      payment,
    );
  }

  /** The key's limits for a call of `skill`. */
  private admission(apiKey: ApiKeyRecord, skill: Skill): Admission {
    const { config } = this.deps;
    const keyRule: RateRule = { key: `key:${apiKey.id}`, limit: apiKey.rateLimitPerMin ?? config.rateLimitPerMin, windowMs: MINUTE_MS };
    const rules = [keyRule];
    if (skill.rateLimitPerMin !== null) {
      rules.push({ key: `skill:${skill.id}:${apiKey.accountId}`, limit: skill.rateLimitPerMin, windowMs: MINUTE_MS });
    }
    const cap = apiKey.accountDailyCallCap ?? config.dailyCallCap;
    return {
      rules,
      describe: (rule) => (rule === keyRule ? "this API key" : `this skill "${skill.slug}"`),
      ...(cap > 0 ? { dailyCap: { accountId: apiKey.accountId, cap } } : {}),
    };
  }
}
