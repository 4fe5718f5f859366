import express, { type Router } from "express";
import type { ApiKeys } from "../../identity/api-keys";
import type { Config } from "../../config";
import type { Skill, SkillRegistry } from "../../catalog/skills";
import { computeCharge } from "../../ledger/fees";
import type { Ledger } from "../../ledger/ledger";
import type { QualitySummary } from "../../gateway/quality";
import type { QualityRecorder } from "../../gateway/quality-recorder";
import type { AddressesStore } from "../../settlement/addresses-store";
import { microsToUsd } from "../../ledger/money";
import { requireAccount } from "../auth";
import type { Sessions } from "../../identity/sessions";
import { displayNameOf } from "../../identity/display-name-store";
import { dataEnvelopeOf } from "../envelope";
import { z } from "zod";
import { balanceView } from "../contract/account";
import { skillView } from "../contract/catalog";
import { ApiError } from "../errors";
import { excerpt } from "../../text";

/** The most of a client's skill reference an error message quotes back (sanitized: ../../text.ts excerpt). */
const QUOTED_REF_MAX_CHARS = 100;

const skillsView = z.array(skillView);

/**
 * Read endpoints for clients and the dashboard (docs/design.md §2): the public skill
 * list, and the caller's balance (its usage: ./usage.ts). All answer in the spec's envelope.
 */
export function readRoutes(deps: {
  config: Pick<Config, "feeMode" | "feeBps">;
  keys: ApiKeys;
  sessions: Sessions;
  skills: SkillRegistry;
  ledger: Ledger;
  addresses: AddressesStore;
  quality: QualityRecorder;
}): Router {
  const router = express.Router();
  /** The key-or-session check of a route, with the scope its declaration (server/http/contract/) names. */
  const auth = (route: string) => requireAccount(deps.keys, deps.sessions, route);

  const sellers = sellerDirectory(deps.ledger, deps.addresses);
  /** A skill as the contract's Skill declares it (tsc checks each field against skillView). */
  const describe = async (skill: Skill, quality: Map<string, QualitySummary | null>): Promise<z.input<typeof skillView>> => ({
    id: skill.id,
    slug: skill.slug,
    name: skill.name,
    description: skill.description,
    pricing: skill.pricing,
    /** The listed price per call, in USD; a usage-priced skill's is the most a call may cost, its max_price. */
    ...(skill.pricing === "usage" ? { max_price: microsToUsd(skill.priceMicros) } : { price: microsToUsd(skill.priceMicros) }),
    /** What a caller pays per call (for usage pricing: at most), in USD: the price, plus the fee when it is charged on top. */
    price_per_call: microsToUsd(computeCharge(skill.priceMicros, deps.config.feeMode, deps.config.feeBps).chargedMicros),
    currency: "USDC",
    rate_limit_per_min: skill.rateLimitPerMin,
    // JSON objects (a listing refuses anything else), typed as the records the contract names.
    input_schema: skill.inputSchema as Record<string, unknown> | null,
    ...(skill.outputSchema ? { output_schema: skill.outputSchema as Record<string, unknown> } : {}),
    seller: await sellers(skill.sellerAccountId),
    quality: qualityOf(quality.get(skill.id)),
  });

  router.get("/v1/skills", async (_req, res) => {
    const quality = await deps.quality.summaries();
    res.json(dataEnvelopeOf(skillsView, await Promise.all(deps.skills.list().map((skill) => describe(skill, quality)))));
  });

  router.get("/v1/skills/:skillId", async (req, res) => {
    const skill = deps.skills.resolve(req.params.skillId);
    if (!skill) throw new ApiError("skill_not_found", `Skill not found: "${excerpt(req.params.skillId, QUOTED_REF_MAX_CHARS)}".`);
    res.json(dataEnvelopeOf(skillView, await describe(skill, await deps.quality.summaries())));
  });

  router.get("/v1/balance", auth("GET /v1/balance"), async (req, res) => {
    const { availableMicros, heldMicros } = await deps.ledger.balance(req.accountId!);
    res.json(
      dataEnvelopeOf(balanceView, {
        currency: "USDC",
        available: microsToUsd(availableMicros),
        held: microsToUsd(heldMicros),
        available_base_units: availableMicros.toString(),
        held_base_units: heldMicros.toString(),
      }),
    );
  });

  return router;
}

/** A skill's quality as the API names it (server/http/contract/catalog.ts qualityView); null while too few calls say. */
export function qualityOf(summary: QualitySummary | null | undefined) {
  return summary
    ? { calls_7d: summary.calls, success_rate_7d: summary.successRate, p50_ms_7d: summary.p50Ms, p95_ms_7d: summary.p95Ms }
    : null;
}

/**
 * Who sells a skill, as the marketplace shows it: the display name the seller chose (PATCH
 * /v1/account), else its payout address, shortened (public on-chain anyway), else "an unnamed
 * seller". Never the account's own name: that records how it signed up (an e-mail address, a
 * GitHub login, a Google subject), which is the seller's business and not for strangers to see.
 */
function sellerDirectory(ledger: Ledger, addresses: AddressesStore) {
  return async (accountId: string): Promise<{ name: string; address: string | null }> => {
    const addr = (await addresses.addressesOf(accountId))[0] ?? null;
    const displayName = await displayNameOf(ledger.db, accountId);
    if (displayName !== null) return { name: displayName, address: addr };
    return { name: addr ? `${addr.slice(0, 6)}…${addr.slice(-4)}` : "an unnamed seller", address: addr };
  };
}
