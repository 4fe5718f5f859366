import express, { type Router } from "express";
import type { ApiKeys } from "../../accounts/api-keys";
import type { Config } from "../../config";
import type { CallsLog } from "../../gateway/calls-log";
import type { Skill, SkillRegistry } from "../../gateway/skills";
import { computeCharge } from "../../ledger/fees";
import type { Ledger } from "../../ledger/ledger";
import { microsToUsd } from "../../ledger/money";
import { requireApiKey } from "../auth";
import { dataEnvelope } from "../envelope";
import { ApiError } from "../errors";

/**
 * Read endpoints for clients and the dashboard (DESIGN.md section 2): the public skill
 * list, and the caller's balance and usage. All answer in the spec's envelope.
 */
export function readRoutes(deps: { config: Config; keys: ApiKeys; skills: SkillRegistry; ledger: Ledger; calls: CallsLog }): Router {
  const router = express.Router();
  const auth = requireApiKey(deps.keys);

  const describe = (skill: Skill) => ({
    id: skill.id,
    slug: skill.slug,
    name: skill.name,
    description: skill.description,
    /** The listed price per call, in USD. */
    price: microsToUsd(skill.priceMicros),
    /** What a caller pays per call, in USD: the price, plus the fee when it is charged on top. */
    price_per_call: microsToUsd(computeCharge(skill.priceMicros, deps.config.feeMode, deps.config.feeBps).chargedMicros),
    currency: "USDC",
    rate_limit_per_min: skill.rateLimitPerMin,
    input_schema: skill.inputSchema,
  });

  router.get("/v1/skills", (_req, res) => {
    res.json(dataEnvelope(deps.skills.list().map(describe)));
  });

  router.get("/v1/skills/:skillId", (req, res) => {
    const skill = deps.skills.resolve(req.params.skillId);
    if (!skill) throw new ApiError("skill_not_found", `Skill not found: "${req.params.skillId}".`);
    res.json(dataEnvelope(describe(skill)));
  });

  router.get("/v1/balance", auth, (req, res) => {
    const { availableMicros, heldMicros } = deps.ledger.balance(req.apiKey!.accountId);
    res.json(
      dataEnvelope({
        currency: "USDC",
        available: microsToUsd(availableMicros),
        held: microsToUsd(heldMicros),
        available_base_units: availableMicros.toString(),
        held_base_units: heldMicros.toString(),
      }),
    );
  });

  router.get("/v1/usage", auth, (req, res) => {
    const limit = intParam(req.query.limit, "limit", 50, 1, 500);
    const before = intParam(req.query.before, "before", Number.MAX_SAFE_INTEGER, 0, Number.MAX_SAFE_INTEGER);
    const rows = deps.calls.recent(req.apiKey!.accountId, limit, before);
    res.json(
      dataEnvelope({
        calls: rows.map((r) => ({
          id: r.id,
          skill_id: r.skillSlug ?? r.skillId,
          skill_uuid: r.skillId,
          endpoint: r.endpoint === "call" ? "/v1/call" : "/v1/skills/:skillId/call",
          status: r.outcome === "success" ? "success" : "failed",
          outcome: r.outcome,
          http_status: r.httpStatus,
          cost: microsToUsd(r.chargedMicros),
          cost_base_units: r.chargedMicros.toString(),
          response_time_ms: Math.round(r.latencyUs / 10) / 100,
          created_at: new Date(r.createdAtMs).toISOString(),
        })),
        /** Pass as ?before= to read the next page. */
        next_before: rows.length === limit ? rows[rows.length - 1].createdAtMs : null,
      }),
    );
  });

  return router;
}

function intParam(raw: unknown, name: string, fallback: number, min: number, max: number): number {
  if (raw === undefined) return fallback;
  if (typeof raw !== "string" || !/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
    throw new ApiError("invalid_request", `${name} must be an integer from ${min} to ${max}.`);
  }
  return Number(raw);
}
