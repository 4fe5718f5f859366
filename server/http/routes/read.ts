import express, { type Router } from "express";
import type { ApiKeys } from "../../identity/api-keys";
import type { Config } from "../../config";
import type { CallsStore } from "../../gateway/calls-store";
import type { Skill, SkillRegistry } from "../../catalog/skills";
import { computeCharge } from "../../ledger/fees";
import type { Ledger } from "../../ledger/ledger";
import type { AddressesStore } from "../../settlement/addresses-store";
import { microsToUsd } from "../../ledger/money";
import { requireAccount } from "../auth";
import type { Sessions } from "../../identity/sessions";
import { displayNameOf } from "../../identity/display-name";
import { dataEnvelope } from "../envelope";
import { ApiError } from "../errors";
import { dailyQuery, usageQuery } from "../contract/account";
import { parseRequest } from "../contract/common";

/**
 * Read endpoints for clients and the dashboard (docs/design.md §2): the public skill
 * list, and the caller's balance and usage. All answer in the spec's envelope.
 */
export function readRoutes(deps: {
  config: Config;
  keys: ApiKeys;
  sessions: Sessions;
  skills: SkillRegistry;
  ledger: Ledger;
  calls: CallsStore;
  addresses: AddressesStore;
}): Router {
  const router = express.Router();
  const auth = requireAccount(deps.keys, deps.sessions);

  const sellers = sellerDirectory(deps.ledger, deps.addresses);
  const describe = async (skill: Skill) => ({
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
    seller: await sellers(skill.sellerAccountId),
  });

  router.get("/v1/skills", async (_req, res) => {
    res.json(dataEnvelope(await Promise.all(deps.skills.list().map(describe))));
  });

  router.get("/v1/skills/:skillId", async (req, res) => {
    const skill = deps.skills.resolve(req.params.skillId);
    if (!skill) throw new ApiError("skill_not_found", `Skill not found: "${req.params.skillId}".`);
    res.json(dataEnvelope(await describe(skill)));
  });

  router.get("/v1/balance", auth, async (req, res) => {
    const { availableMicros, heldMicros } = await deps.ledger.balance(req.accountId!);
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

  router.get("/v1/usage", auth, async (req, res) => {
    const { limit, before } = parseRequest(usageQuery, req.query);
    const rows = await deps.calls.recent(req.accountId!, limit, before);
    res.json(
      dataEnvelope({
        calls: rows.map((r) => ({
          id: r.id,
          skill_id: r.skillSlug ?? r.skillId,
          skill_uuid: r.skillId,
          skill_name: r.skillName,
          endpoint: r.endpoint === "call" ? "/v1/call" : "/v1/skills/:skillId/call",
          status: r.outcome === "success" ? "success" : "failed",
          outcome: r.outcome,
          http_status: r.httpStatus,
          cost: microsToUsd(r.chargedMicros),
          cost_base_units: r.chargedMicros.toString(),
          response_time_ms: Math.round(r.latencyUs / 10) / 100,
          created_at: new Date(r.createdAtMs).toISOString(),
          batch_number: r.batchNumber,
          settlement: r.chargedMicros === 0n ? "not_charged" : (r.batchStatus ?? "unsettled"),
        })),
        /** Pass as ?before= to read the next page. */
        // A page may run past `limit` to finish its last millisecond (CallsStore.recent).
        next_before: rows.length >= limit ? rows[rows.length - 1].createdAtMs : null,
      }),
    );
  });

  router.get("/v1/usage/daily", auth, async (req, res) => {
    const { days } = parseRequest(dailyQuery, req.query);
    const todayDay = Math.floor(Date.now() / DAY_MS);
    const firstDay = todayDay - days + 1;
    const byDay = new Map((await deps.calls.daily(req.accountId!, firstDay * DAY_MS)).map((d) => [d.day, d]));
    const out = [];
    for (let day = firstDay; day <= todayDay; day++) {
      const d = byDay.get(day);
      const spendMicros = d?.spendMicros ?? 0n;
      out.push({
        date: new Date(day * DAY_MS).toISOString().slice(0, 10),
        spend: microsToUsd(spendMicros),
        spend_base_units: spendMicros.toString(),
        calls: d?.calls ?? 0,
      });
    }
    res.json(dataEnvelope({ currency: "USDC", days: out }));
  });

  return router;
}

const DAY_MS = 86_400_000;

/**
 * Who sells a skill, as the marketplace shows it: the display name the seller chose (PATCH
 * /v1/account), else the account's name. That name is often its e-mail address (that is how
 * e-mail sign-up names it), which is not for strangers to see: such a seller is shown by its
 * escrow address instead, which is public on-chain anyway.
 */
function sellerDirectory(ledger: Ledger, addresses: AddressesStore) {
  return async (accountId: string): Promise<{ name: string; address: string | null }> => {
    const addr = (await addresses.addressesOf(accountId))[0] ?? null;
    const displayName = await displayNameOf(ledger.db, accountId);
    if (displayName !== null) return { name: displayName, address: addr };
    const name = (await ledger.getAccount(accountId))?.name ?? "";
    const shortAddress = addr ? `${addr.slice(0, 6)}…${addr.slice(-4)}` : "an unnamed seller";
    return { name: name === "" || name.includes("@") ? shortAddress : name, address: addr };
  };
}
