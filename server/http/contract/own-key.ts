import { baseUnits, dataEnvelope, operation, SELF, usdNumber } from "./common";
import { keyView } from "./keys";

/**
 * GET /v1/key (server/http/routes/own-key.ts): the calling key's own record, as GET /v1/keys lists it, and its budget:
 * what its spending limit leaves it and the account's available balance. Any valid key may read itself.
 */

export const ownKeyView = keyView
  .extend({
    remaining_usd: usdNumber.nullable().meta({
      description:
        "What the key may still spend in its current period (spend_limit_usd - spent_usd, never below 0), in USD; null without a limit.",
    }),
    remaining_base_units: baseUnits.nullable(),
    available_usd: usdNumber.meta({ description: "The account's available balance, in USD: what any of its keys may spend." }),
    available_base_units: baseUnits,
  })
  .meta({ id: "OwnKey" });

export const ownKeyOperations = [
  operation({
    method: "get",
    path: "/v1/key",
    tag: "Keys",
    summary: "The calling key's own record and budget",
    description:
      "Any valid key may read itself, whatever its scopes (an agent sees its own budget without usage:read): its id, name, prefix, scopes, allowed skills and expiry, its spending limit with what it spent, what remains and when it resets, and the account's available balance. Nothing about any other key.",
    auth: "api_key",
    scope: SELF,
    responses: [
      { status: 200, description: "The calling key, as GET /v1/keys lists it, and its budget.", schema: dataEnvelope(ownKeyView) },
    ],
    errors: [],
  }),
];
