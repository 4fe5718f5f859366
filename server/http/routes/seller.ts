import express, { type NextFunction, type Request, type Response, type Router } from "express";
import { rateLimit } from "express-rate-limit";
import { jsonBody } from "../json-body";
import {
  type SellerSkill,
  type SellerSkillFields,
  type SellerSkillPatch,
  type PriceField,
  SellerSkills,
  priceFieldOf,
  priceFieldProblem,
} from "../../catalog/seller-skills";
import type { SkillPricing } from "../../catalog/skills-store";
import type { Sessions } from "../../identity/sessions";
import { type LinkAddressStores, linkAddress, normalizeAddress } from "../../settlement/addresses";
import type { Config } from "../../config";
import type { EgressPolicy } from "../../gateway/egress";
import { type BackendCheck, backendChecker } from "../../gateway/backend-check";
import type { SkillRegistry } from "../../catalog/skills";
import type { SchemaField } from "../../catalog/schema-guard";
import type { CallsStore } from "../../gateway/calls-store";
import type { QualityRecorder } from "../../gateway/quality-recorder";
import { type QualityTotals, faultOf, percentileMs, successRate } from "../../gateway/quality";
import type { Ledger } from "../../ledger/ledger";
import { microsToUsd } from "../../ledger/money";
import { z } from "zod";
import { parseParams, parseRequest } from "../contract/common";
import {
  OUTPUT_FAILURES_LIMIT,
  type UpdateSellerSkillBody,
  createSellerSkillBody,
  editedSellerSkillView,
  listedSellerSkillView,
  outputFailureView,
  payoutAddressBody,
  payoutAddressSetView,
  payoutAddressView,
  sellerSkillParams,
  sellerSkillView,
  sellerStatsQuery,
  sellerStatsView,
  updateSellerSkillBody,
} from "../contract/seller";
import { qualityOf } from "./read";
import { dataEnvelopeOf } from "../envelope";
import { ApiError, refuse } from "../errors";
import { requireSession } from "../session-cookies";

const sellerSkillsView = z.array(sellerSkillView);
const outputFailuresView = z.array(outputFailureView);

/**
 * A seller's skill as the contract's SellerSkill declares it (tsc checks each field against sellerSkillView). Its
 * schemas are JSON objects (the listing refuses anything else), typed as the records the contract names.
 */
const view = (skill: SellerSkill): z.input<typeof sellerSkillView> => ({
  id: skill.id,
  slug: skill.slug,
  name: skill.name,
  description: skill.description,
  pricing: skill.pricing,
  ...(priceFieldOf(skill.pricing) === "price" ? { price: microsToUsd(skill.priceMicros) } : { max_price: microsToUsd(skill.priceMicros) }),
  backend_url: skill.backendUrl,
  timeout_ms: skill.timeoutMs,
  rate_limit_per_min: skill.rateLimitPerMin,
  input_schema: skill.inputSchema as Record<string, unknown> | null,
  ...(skill.outputSchema ? { output_schema: skill.outputSchema as Record<string, unknown> } : {}),
  listed: skill.listed,
  created_at: new Date(skill.createdAtMs).toISOString(),
  updated_at: new Date(skill.updatedAtMs).toISOString(),
});

/** Some calls' figures as GET /v1/seller/skills/:id/stats names them. */
const figuresView = (t: QualityTotals) => {
  let seller = 0;
  let buyer = 0;
  let gateway = 0;
  for (const [code, calls] of t.failures) {
    const fault = faultOf(code);
    if (fault === "seller") seller += calls;
    else if (fault === "buyer") buyer += calls;
    else gateway += calls;
  }
  return {
    calls: t.calls,
    successes: t.successes,
    seller_failures: seller,
    buyer_failures: buyer,
    gateway_failures: gateway,
    success_rate: successRate(t),
    p50_ms: percentileMs(t.latency, 50),
    p95_ms: percentileMs(t.latency, 95),
    p99_ms: percentileMs(t.latency, 99),
    revenue: microsToUsd(t.chargedMicros),
    revenue_base_units: t.chargedMicros.toString(),
  };
};

const dayText = (ms: number) => new Date(ms).toISOString().slice(0, 10);

const checkView = (check: BackendCheck) => ({
  reachable: check.reachable,
  ok: check.ok,
  status: check.status,
  latency_ms: check.latencyMs,
  snippet: check.snippet,
  message: check.message,
});

/**
 * The egress policy at listing time (server/gateway/egress.ts): the URL and every address its
 * host resolves to now. The call path checks again on every connection; this is so that the
 * seller hears why at once instead of its callers getting 502s.
 */
async function checkSchema(skills: SkillRegistry, schema: object, field: SchemaField = "input_schema"): Promise<void> {
  const problem = await skills.schemaProblem(schema, field);
  if (problem) throw new ApiError("invalid_request", `invalid ${field === "input_schema" ? "input" : "output"} schema: ${problem}`);
}

/** A new listing's amount: its `price`, or with usage pricing its `max_price`, the one its pricing names and never the other. */
function listingAmount(pricing: SkillPricing, price: bigint | undefined, maxPrice: bigint | undefined): bigint {
  const given: PriceField[] = [];
  if (price !== undefined) given.push("price");
  if (maxPrice !== undefined) given.push("max_price");
  for (const field of given) {
    const problem = priceFieldProblem(pricing, field);
    if (problem) throw new ApiError("invalid_request", problem);
  }
  const amount = pricing === "usage" ? maxPrice : price;
  if (amount === undefined) {
    throw new ApiError("invalid_request", pricing === "usage" ? "max_price is required for a usage-priced skill." : "price is required.");
  }
  return amount;
}

async function checkBackend(egress: EgressPolicy, backendUrl: string): Promise<void> {
  // A URL a seller names is the seller's, whatever its origin: the operator's allowlist is not for it.
  const checked = await egress.checkListing(backendUrl, "seller");
  if (!checked.ok) throw new ApiError("invalid_request", `${checked.message}. Skill backends must be reachable on the public internet.`);
}

/** The fields a seller sets, from the body as its contract parsed it; absent fields stay absent (an edit leaves them as they are). */
function sellerFields(body: UpdateSellerSkillBody): SellerSkillPatch {
  const fields: SellerSkillPatch = {};
  if (body.name !== undefined) fields.name = body.name;
  if (body.description !== undefined) fields.description = body.description;
  if (body.pricing !== undefined) fields.pricing = body.pricing;
  if (body.price !== undefined && body.max_price !== undefined) {
    throw new ApiError("invalid_request", "Send price (a fixed price) or max_price (usage pricing), not both.");
  }
  if (body.price !== undefined) [fields.priceMicros, fields.priceField] = [body.price, "price"];
  if (body.max_price !== undefined) [fields.priceMicros, fields.priceField] = [body.max_price, "max_price"];
  if (body.backend_url !== undefined) fields.backendUrl = body.backend_url;
  if (body.timeout_ms !== undefined) fields.timeoutMs = body.timeout_ms;
  if (body.rate_limit_per_min !== undefined) fields.rateLimitPerMin = body.rate_limit_per_min;
  if (body.input_schema !== undefined) fields.inputSchema = body.input_schema;
  if (body.output_schema !== undefined) fields.outputSchema = body.output_schema;
  if (body.listed !== undefined) fields.listed = body.listed;
  return fields;
}

/**
 * The signed-in account's skills, as their seller (a dashboard session):
 *   POST   /v1/seller/skills         lists a new skill after a signed test call to its backend (refused when
 *                                    nothing answers); the answer holds its signing secret, this once, and
 *                                    what the backend answered (backend_check)
 *   GET    /v1/seller/skills         the account's skills, listed or not
 *   PATCH  /v1/seller/skills/:id     edits one (by UUID or slug); { listed: true } lists it again; a new
 *                                    backend_url gets the same test call (backend_check in the answer)
 *   GET    /v1/seller/skills/:id/output-failures  its latest calls whose answers broke its output schema,
 *                                    with the first problem found (never the caller or the answer)
 *   DELETE /v1/seller/skills/:id     unlists it: calls get 404 from then on
 *   GET    /v1/seller/payout-address the address settlement pays the account's earnings to
 *   PUT    /v1/seller/payout-address { address } sets it, if the account has none yet and has
 *                                    proved it controls that address by signing in with it (SIWE)
 * Another account's skill is answered as an unknown one: 404.
 */
/** What an unknown skill, another seller's and a malformed reference get alike: 404. */
const NO_SUCH_SKILL = "No such skill among yours.";

/** Listings and backend changes (each a test call to the backend) per account per minute. */
const LISTING_CHECKS_PER_MIN = 30;

export function sellerRoutes(deps: {
  sessions: Sessions;
  ledger: Ledger;
  /** Linked addresses and the exits a link adopts. */
  settlement: LinkAddressStores;
  skills: SkillRegistry;
  config: Config;
  egress: EgressPolicy;
  /** The calls log: the output failures of the seller's skills. */
  calls: CallsStore;
  /** The skills' quality roll-up: the stats of the seller's skills. */
  quality: QualityRecorder;
}): Router {
  const router = express.Router();
  const session = requireSession(deps.sessions);
  const json = jsonBody(65_536);
  const sellerSkills = new SellerSkills(
    deps.skills,
    deps.config,
    // A test call needs no more of the answer than its first lines: at most 64 KiB is read.
    backendChecker({ egress: deps.egress, maxResponseBytes: Math.min(deps.config.maxResponseBytes, 64 * 1024) }),
  );

  // A listing, or a new backend URL, makes one signed test call to a host the seller names: at most
  // LISTING_CHECKS_PER_MIN a minute per account, so the gateway is nobody's free prober (per replica).
  const checks = rateLimit({
    windowMs: 60_000,
    limit: LISTING_CHECKS_PER_MIN,
    keyGenerator: (req: Request) => `seller:${req.session!.accountId}`,
    standardHeaders: "draft-8",
    legacyHeaders: false,
    handler: (_req: Request, _res: Response, next: NextFunction) =>
      next(
        new ApiError(
          "rate_limited",
          `Too many listings or backend changes: at most ${LISTING_CHECKS_PER_MIN} a minute. Try again shortly.`,
        ),
      ),
  });

  router.post("/v1/seller/skills", session, checks, json, async (req, res) => {
    const body = parseRequest(createSellerSkillBody, req.body);
    const pricing = body.pricing ?? "fixed";
    const priceMicros = listingAmount(pricing, body.price, body.max_price);
    const fields: SellerSkillFields = {
      slug: body.slug,
      name: body.name,
      description: body.description ?? "",
      pricing,
      priceMicros,
      backendUrl: body.backend_url,
      timeoutMs: body.timeout_ms ?? deps.config.defaultSkillTimeoutMs,
      rateLimitPerMin: body.rate_limit_per_min ?? null,
      inputSchema: body.input_schema ?? null,
      outputSchema: body.output_schema ?? null,
    };
    await checkBackend(deps.egress, fields.backendUrl);
    if (fields.inputSchema) await checkSchema(deps.skills, fields.inputSchema);
    if (fields.outputSchema) await checkSchema(deps.skills, fields.outputSchema, "output_schema");
    const result = await sellerSkills.create(req.session!.accountId, fields);
    if (!result.ok) refuse(result);
    res.status(201).json(
      dataEnvelopeOf(listedSellerSkillView, {
        ...view(result.skill),
        signing_secret: result.signingSecret,
        backend_check: checkView(result.backendCheck),
      }),
    );
  });

  router.get("/v1/seller/skills", session, async (req, res) => {
    res.json(dataEnvelopeOf(sellerSkillsView, (await sellerSkills.list(req.session!.accountId)).map(view)));
  });

  router.patch("/v1/seller/skills/:id", session, checks, json, async (req, res) => {
    const { id } = parseParams(sellerSkillParams, req.params, NO_SUCH_SKILL);
    const patch = sellerFields(parseRequest(updateSellerSkillBody, req.body));
    if (patch.backendUrl !== undefined) await checkBackend(deps.egress, patch.backendUrl);
    if (patch.inputSchema) await checkSchema(deps.skills, patch.inputSchema);
    if (patch.outputSchema) await checkSchema(deps.skills, patch.outputSchema, "output_schema");
    const result = await sellerSkills.update(req.session!.accountId, id, patch);
    if (!result.ok) refuse(result);
    res.json(
      dataEnvelopeOf(editedSellerSkillView, {
        ...view(result.skill),
        ...(result.backendCheck ? { backend_check: checkView(result.backendCheck) } : {}),
      }),
    );
  });

  // The calls whose answers broke the skill's output schema: what the seller needs to fix its backend (or its
  // schema), and nothing of the buyers' (no caller, no value of the answer: call_output_failures holds none).
  router.get("/v1/seller/skills/:id/output-failures", session, async (req, res) => {
    const { id } = parseParams(sellerSkillParams, req.params, NO_SUCH_SKILL);
    const skill = await sellerSkills.get(req.session!.accountId, id);
    if (!skill) throw new ApiError("not_found", NO_SUCH_SKILL);
    const failures = await deps.calls.outputFailures(skill.id, OUTPUT_FAILURES_LIMIT);
    res.json(
      dataEnvelopeOf(
        outputFailuresView,
        failures.map((f) => ({
          call_id: f.callId,
          endpoint: f.endpoint,
          problem: f.problem,
          created_at: new Date(f.createdAtMs).toISOString(),
        })),
      ),
    );
  });

  // The skill's figures from the quality roll-up (hourly counts), day by day: what its seller needs to see how it
  // serves its buyers, and nothing of who they are.
  router.get("/v1/seller/skills/:id/stats", session, async (req, res) => {
    const { id } = parseParams(sellerSkillParams, req.params, NO_SUCH_SKILL);
    const skill = await sellerSkills.get(req.session!.accountId, id);
    if (!skill) throw new ApiError("not_found", NO_SUCH_SKILL);
    const { days } = parseRequest(sellerStatsQuery, req.query);
    const stats = await deps.quality.stats(skill.id, days);
    const summaries = await deps.quality.summaries();
    const failures = [...stats.totals.failures]
      .map(([code, calls]) => ({ code, fault: faultOf(code), calls }))
      .sort((a, b) => b.calls - a.calls || (a.code < b.code ? -1 : 1));
    res.json(
      dataEnvelopeOf(sellerStatsView, {
        skill_id: skill.id,
        slug: skill.slug,
        from: dayText(stats.fromMs),
        to: dayText(stats.days[stats.days.length - 1].dayMs),
        quality: qualityOf(summaries.get(skill.id)),
        totals: figuresView(stats.totals),
        days: stats.days.map((d) => ({ date: dayText(d.dayMs), ...figuresView(d.totals) })),
        failures,
        output_contract_failures: stats.totals.failures.get("skill_bad_output") ?? 0,
        // skill_bad_charge is the usage-priced skills' (issue 27 §1): its count, whenever calls end with it.
        charge_header_failures: (stats.totals.failures as Map<string, number>).get("skill_bad_charge") ?? 0,
      }),
    );
  });

  router.delete("/v1/seller/skills/:id", session, async (req, res) => {
    const { id } = parseParams(sellerSkillParams, req.params, NO_SUCH_SKILL);
    const result = await sellerSkills.unlist(req.session!.accountId, id);
    if (!result.ok) refuse(result);
    res.json(dataEnvelopeOf(sellerSkillView, view(result.skill)));
  });

  router.get("/v1/seller/payout-address", session, async (req, res) => {
    const [address] = await deps.settlement.addresses.addressesOf(req.session!.accountId);
    res.json(dataEnvelopeOf(payoutAddressView, { address: address ?? null }));
  });

  router.put("/v1/seller/payout-address", session, json, async (req, res) => {
    const accountId = req.session!.accountId;
    const address = normalizeAddress(parseRequest(payoutAddressBody, req.body).address);
    if (!address) throw new ApiError("invalid_request", "address must be a 0x-prefixed 20-byte hex address.");
    // Linking an address also credits the deposits waiting for it, so it must be shown to be
    // this account's: either it already is (its embedded wallet), or the account has signed in
    // with it (SIWE proves control of the key or smart account).
    const linked = await deps.settlement.addresses.addressesOf(accountId);
    const proved = (await deps.sessions.identitiesOf(accountId)).some((i) => i.provider === "siwe" && i.subject.toLowerCase() === address);
    if (!linked.includes(address) && !proved) {
      throw new ApiError(
        "payout_address_refused",
        "Sign in with that wallet first (POST /auth/siwe/verify while signed in links it), then set it here.",
      );
    }
    // Resolves once the link (and the deposits it credits) is durable.
    const result = await linkAddress(deps.ledger, { accountId, address }, deps.settlement);
    if (!result.ok) {
      const message =
        result.reason === "second_address"
          ? `This account is paid at ${linked[0]}: settlement pays one address per account, and it cannot change once set.`
          : result.reason === "address_taken"
            ? "That address belongs to another account."
            : "That address cannot be linked to this account; ask an operator.";
      throw new ApiError("payout_address_refused", message);
    }
    res.json(dataEnvelopeOf(payoutAddressSetView, { address: result.address, created: result.created }));
  });

  return router;
}
