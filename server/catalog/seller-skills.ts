import { randomBytes, randomUUID } from "node:crypto";
import type { Config } from "../config";
import { SKILL_DESCRIPTION_RULE, SKILL_NAME_RULE, type SkillRegistry, SkillValidationError } from "./skills";
import type { SkillListingRecord, SkillPricing, SkillsStore } from "./skills-store";
import { usdDisplay } from "../ledger/money";
import { type Refusal, refusal } from "../errors";
import { checkText } from "../text";
import type { BackendCheck, CheckBackend } from "./backend-check";

/** What a seller sets on a skill (all of it at creation; any of it in an edit, the slug excepted). */
export interface SellerSkillFields {
  slug: string;
  name: string;
  description: string;
  /** `fixed`: `priceMicros` per call; `usage`: what the backend reports (X-Skill-Charge), at most `priceMicros`. */
  pricing: SkillPricing;
  /** The price per call (`fixed`), or the most one call may cost (`usage`: max_price). */
  priceMicros: bigint;
  backendUrl: string;
  timeoutMs: number;
  rateLimitPerMin: number | null;
  inputSchema: object | null;
  /** What the skill promises its 2xx answers are (its output contract); null for no promise. */
  outputSchema: object | null;
}

/** A seller's view of its skill: everything but the signing secret, which it sees once, at creation. */
export interface SellerSkill extends SellerSkillFields {
  id: string;
  listed: boolean;
  createdAtMs: number;
  updatedAtMs: number;
}

/** An edit's fields; `priceField` says which field the seller set the amount with (`price` or `max_price`). */
export type SellerSkillPatch = Partial<Omit<SellerSkillFields, "slug">> & { listed?: boolean; priceField?: PriceField };

/** The field a skill's amount is set and shown by: `price` for a fixed price, `max_price` for usage pricing. */
export type PriceField = "price" | "max_price";

/** The field a skill priced `pricing` names its amount by. */
export const priceFieldOf = (pricing: SkillPricing): PriceField => (pricing === "usage" ? "max_price" : "price");

/**
 * Why an amount given as `given` does not fit a skill priced `pricing`, or undefined when it does: a fixed-price skill
 * has a `price`, a usage-priced one a `max_price` (the most a call may cost), never the other.
 */
export function priceFieldProblem(pricing: SkillPricing, given: PriceField): string | undefined {
  if (given === priceFieldOf(pricing)) return undefined;
  return pricing === "usage"
    ? "A usage-priced skill has a max_price (the most one call may cost), not a price: send max_price."
    : 'A fixed-price skill has a price, not a max_price: send price, or "pricing": "usage" with max_price.';
}

/** Why a seller's skill was not saved: invalid_request (a field out of bounds), slug_taken, or not_found (not theirs). */
export type SellerSkillRefusal = Refusal<"invalid_request" | "slug_taken" | "not_found">;

/** Limits on what a seller may set, beyond the price bounds of the configuration. */
export const SKILL_LIMITS = {
  nameChars: SKILL_NAME_RULE.maxChars,
  descriptionChars: SKILL_DESCRIPTION_RULE.maxChars,
  timeoutMsMin: 100,
  timeoutMsMax: 120_000,
  rateLimitPerMinMax: 1_000_000,
} as const;

const toSellerSkill = (record: SkillListingRecord): SellerSkill => {
  const { inputSchemaJson, outputSchemaJson, ...rest } = record;
  return {
    ...rest,
    inputSchema: inputSchemaJson === null ? null : JSON.parse(inputSchemaJson),
    outputSchema: outputSchemaJson === null ? null : JSON.parse(outputSchemaJson),
  };
};

/**
 * Skills as their sellers manage them. Any account can sell: a skill names its seller's
 * account, whose `earned` bucket receives the seller share of each paid call (accounts of
 * kind 'user' have that bucket as well as 'seller' ones), and settlement credits it on-chain
 * to the account's linked address. A seller sees and changes only its own skills; another's
 * skill is answered as an unknown one. Writes go straight to the catalogue's table, durably
 * (a new skill's signing secret is shown once, so it must not be lost), and then refresh the
 * in-memory catalogue the call path reads before they resolve. A new skill's backend gets a signed
 * test call first (../gateway/backend-check.ts): a dead one is refused, whatever else answers is
 * listed, with the answer shown to the seller.
 */
export class SellerSkills {
  private readonly store: SkillsStore;

  constructor(
    private readonly registry: SkillRegistry,
    private readonly config: Pick<Config, "minSkillPriceMicros" | "maxSkillPriceMicros">,
    private readonly checkBackend: CheckBackend,
  ) {
    this.store = registry.store;
  }

  async list(sellerAccountId: string): Promise<SellerSkill[]> {
    return (await this.store.listingsOf(sellerAccountId)).map(toSellerSkill);
  }

  async get(sellerAccountId: string, ref: string): Promise<SellerSkill | undefined> {
    const record = await this.store.ownListing(sellerAccountId, ref);
    return record && toSellerSkill(record);
  }

  /**
   * Lists a new skill; its signing secret is returned here and never again, with what its backend answered to
   * the test call, signed with that secret. A backend that gives no answer at all is refused (invalid_request).
   */
  async create(
    sellerAccountId: string,
    fields: SellerSkillFields,
  ): Promise<{ ok: true; skill: SellerSkill; signingSecret: string; backendCheck: BackendCheck } | SellerSkillRefusal> {
    const own = this.checkFields(fields);
    if (!own.ok) return own;
    fields = { ...fields, ...own.fields };
    const invalid = this.catalogueCheck(fields);
    if (invalid) return invalid;
    // Before the test call, so that a taken slug cannot make the gateway call a host for nothing (the insert below
    // stays the guard against a race).
    if (await this.store.slugTaken(fields.slug)) return refusal("slug_taken", "That slug is taken: choose another.");
    const id = randomUUID();
    const signingSecret = randomBytes(32).toString("hex");
    const backendCheck = await this.checkBackend({ backendUrl: fields.backendUrl, signingSecret, timeoutMs: fields.timeoutMs });
    if (!backendCheck.reachable) return refusal("invalid_request", backendCheck.message);
    const now = Date.now();
    const inserted = await this.store.db.transaction(
      (tx) =>
        this.store.insertIfSlugFree(
          {
            id,
            slug: fields.slug,
            name: fields.name,
            description: fields.description,
            pricing: fields.pricing,
            priceMicros: fields.priceMicros,
            sellerAccountId,
            backendUrl: fields.backendUrl,
            // A seller's own listing: its backend is held to the public-address rule, allowlisted origin or not.
            operatorListed: false,
            timeoutMs: fields.timeoutMs,
            rateLimitPerMin: fields.rateLimitPerMin,
            inputSchemaJson: fields.inputSchema ? JSON.stringify(fields.inputSchema) : null,
            outputSchemaJson: fields.outputSchema ? JSON.stringify(fields.outputSchema) : null,
            signingSecret,
          },
          now,
          tx,
        ),
      { durable: true },
    );
    if (!inserted) return refusal("slug_taken", "That slug is taken: choose another.");
    await this.registry.changed(id);
    return { ok: true, skill: (await this.get(sellerAccountId, id))!, signingSecret, backendCheck };
  }

  /**
   * Edits the seller's own skill; `listed: true` lists an unlisted one again. The slug never changes. A new
   * backend URL gets the same test call as a listing (refused when nothing answers; the answer returned).
   * The skill is read and written in one transaction, its row locked, so two edits at once (two
   * replicas) apply one after the other, each to what the other left.
   */
  async update(
    sellerAccountId: string,
    ref: string,
    patch: SellerSkillPatch,
  ): Promise<{ ok: true; skill: SellerSkill; backendCheck?: BackendCheck } | SellerSkillRefusal> {
    // What the patch holds is checked on its own before anything goes out: a refused edit makes no test call.
    const own = this.checkFields(patch);
    if (!own.ok) return own;
    patch = { ...patch, ...own.fields };
    // A new backend URL gets the listing's test call first, outside the transaction (it may take seconds).
    let backendCheck: BackendCheck | undefined;
    if (patch.backendUrl !== undefined) {
      const before = await this.store.ownListing(sellerAccountId, ref);
      if (!before) return refusal("not_found", "No such skill among yours.");
      if (before.backendUrl !== patch.backendUrl) {
        const signingSecret = (await this.store.ownSigningSecret(sellerAccountId, before.id)) ?? "";
        const timeoutMs = patch.timeoutMs ?? before.timeoutMs;
        backendCheck = await this.checkBackend({ backendUrl: patch.backendUrl, signingSecret, timeoutMs });
        if (!backendCheck.reachable) return refusal("invalid_request", backendCheck.message);
      }
    }
    const outcome = await this.store.db.transaction(
      async (tx): Promise<{ ok: true; id: string } | SellerSkillRefusal> => {
        const record = await this.store.ownListing(sellerAccountId, ref, tx);
        if (!record) return refusal("not_found", "No such skill among yours.");
        const current = toSellerSkill(record);
        const { priceField, listed: _listed, ...changes } = patch;
        const next: SellerSkillFields = { ...current, ...definedOnly(changes) };
        // The amount is named by the pricing the skill will have; a change of pricing brings its amount with it.
        if (priceField !== undefined) {
          const problem = priceFieldProblem(next.pricing, priceField);
          if (problem) return refusal("invalid_request", problem);
        } else if (next.pricing !== current.pricing) {
          return refusal(
            "invalid_request",
            `A change to "pricing": "${next.pricing}" needs the skill's ${priceFieldOf(next.pricing)} too.`,
          );
        }
        // CPU only (bounds, and compiling a small schema): the route checked the costly ones first. The name and
        // description were checked in the patch: stored ones are not judged again, so that a skill listed before the
        // text policy can still be edited and unlisted.
        const { name: _name, description: _description, ...bounded } = next;
        const own = this.checkFields(bounded);
        if (!own.ok) return own;
        const invalid = this.catalogueCheck(next);
        if (invalid) return invalid;
        await this.store.updateOwn(
          sellerAccountId,
          current.id,
          {
            name: next.name,
            description: next.description,
            pricing: next.pricing,
            priceMicros: next.priceMicros,
            backendUrl: next.backendUrl,
            timeoutMs: next.timeoutMs,
            rateLimitPerMin: next.rateLimitPerMin,
            inputSchemaJson: next.inputSchema ? JSON.stringify(next.inputSchema) : null,
            outputSchemaJson: next.outputSchema ? JSON.stringify(next.outputSchema) : null,
            listed: patch.listed ?? current.listed,
          },
          Date.now(),
          tx,
        );
        return { ok: true, id: current.id };
      },
      { durable: true },
    );
    if (!outcome.ok) return outcome;
    await this.registry.changed(outcome.id);
    return { ok: true, skill: (await this.get(sellerAccountId, outcome.id))!, ...(backendCheck ? { backendCheck } : {}) };
  }

  /** Takes the seller's skill off the marketplace: calls to it get 404; its history stays. */
  unlist(sellerAccountId: string, ref: string): Promise<{ ok: true; skill: SellerSkill } | SellerSkillRefusal> {
    return this.update(sellerAccountId, ref, { listed: false });
  }

  /**
   * Checks the fields a seller gave, each on its own (CPU only, so it runs before the test call): the price range, the
   * timeout and rate limit bounds, and the name and description under the text policy (../text.ts), which it returns
   * normalized.
   */
  private checkFields(
    fields: Partial<SellerSkillFields> & { priceField?: PriceField },
  ): { ok: true; fields: Partial<Pick<SellerSkillFields, "name" | "description">> } | SellerSkillRefusal {
    const invalid = (message: string) => refusal("invalid_request", message);
    const { minSkillPriceMicros: min, maxSkillPriceMicros: max } = this.config;
    const normalized: Partial<Pick<SellerSkillFields, "name" | "description">> = {};
    if (fields.pricing !== undefined && fields.pricing !== "fixed" && fields.pricing !== "usage") {
      return invalid('pricing must be "fixed" or "usage".');
    }
    // A usage-priced skill's max_price is held to the bounds of a price: it is what each of its calls holds.
    if (fields.priceMicros !== undefined && (fields.priceMicros < min || fields.priceMicros > max)) {
      const name = (fields.priceField ?? priceFieldOf(fields.pricing ?? "fixed")) === "max_price" ? "max_price" : "Price";
      return invalid(`${name} must be between ${usdDisplay(min)} and ${usdDisplay(max)}.`);
    }
    if (fields.name !== undefined) {
      const name = checkText(fields.name, SKILL_NAME_RULE);
      if (!name.ok) return name;
      normalized.name = name.text;
    }
    if (fields.description !== undefined) {
      const description = checkText(fields.description, SKILL_DESCRIPTION_RULE);
      if (!description.ok) return description;
      normalized.description = description.text;
    }
    const timeoutMs = fields.timeoutMs;
    if (
      timeoutMs !== undefined &&
      (!Number.isInteger(timeoutMs) || timeoutMs < SKILL_LIMITS.timeoutMsMin || timeoutMs > SKILL_LIMITS.timeoutMsMax)
    ) {
      return invalid(`timeout_ms must be an integer from ${SKILL_LIMITS.timeoutMsMin} to ${SKILL_LIMITS.timeoutMsMax}.`);
    }
    const limit = fields.rateLimitPerMin;
    if (limit !== undefined && limit !== null && (!Number.isInteger(limit) || limit < 1 || limit > SKILL_LIMITS.rateLimitPerMinMax)) {
      return invalid(`rate_limit_per_min must be null or an integer from 1 to ${SKILL_LIMITS.rateLimitPerMinMax}.`);
    }
    return { ok: true, fields: normalized };
  }

  /** What the catalogue checks of the whole skill as it would be saved: its slug, backend URL and schema. */
  private catalogueCheck(fields: SellerSkillFields): SellerSkillRefusal | undefined {
    try {
      this.registry.check(fields);
    } catch (error) {
      if (error instanceof SkillValidationError) return refusal("invalid_request", `${error.message}.`);
      throw error;
    }
    return undefined;
  }
}

function definedOnly<T extends object>(patch: T): Partial<T> {
  return Object.fromEntries(Object.entries(patch).filter(([, v]) => v !== undefined)) as Partial<T>;
}
