import { z } from "zod";
import { operation } from "./common";
import { skillCallMetadata, skillCallSuccess, skillIdParams, skillParametersBody } from "./call";

/** GET /x402/discovery/resources's query: the protocol's discovery list parameters. */
export const x402DiscoveryQuery = z.object({
  type: z.string().max(32).optional().meta({ description: "Only resources of this type (`http`: all of this gateway's)." }),
  limit: z.coerce.number().int().min(1).max(100).default(100),
  offset: z.coerce.number().int().min(0).max(1_000_000).default(0),
});

const requirements = z
  .object({
    scheme: z.literal("exact"),
    network: z.string().meta({ description: "CAIP-2: eip155:<chain id>." }),
    asset: z.string().meta({ description: "The escrow's USDC." }),
    amount: z.string().meta({ description: "The price in USDC base units, per the gateway's fee mode." }),
    payTo: z.string().meta({ description: "The escrow, which credits the seller 90% and the treasury 10% when it settles." }),
    maxTimeoutSeconds: z.number().int(),
    extra: z.object({ name: z.string(), version: z.string() }).meta({ description: "The token's EIP-712 domain." }),
  })
  .meta({ id: "X402PaymentRequirements" });

const discoveryList = z
  .object({
    x402Version: z.literal(2),
    items: z.array(
      z.object({
        resource: z.string(),
        type: z.literal("http"),
        x402Version: z.literal(2),
        accepts: z.array(requirements),
        lastUpdated: z.string(),
        description: z.string().optional(),
        mimeType: z.string().optional(),
        serviceName: z.string().optional(),
        extensions: z.record(z.string(), z.unknown()).optional(),
      }),
    ),
    pagination: z.object({ limit: z.number().int(), offset: z.number().int(), total: z.number().int() }),
  })
  .meta({ id: "X402DiscoveryList" });

const X402_CALL_ERRORS = [
  "payment_required",
  "payment_invalid",
  "payment_reused",
  "payment_settlement_failed",
  "skill_not_found",
  "usage_pricing_unsupported",
  "invalid_input",
  "skill_rejected_input",
  "skill_error",
  "skill_timeout",
  "skill_unreachable",
  "skill_invalid_response",
  "skill_bad_output",
  "skill_backend_forbidden",
  "chain_unavailable",
  "chain_not_configured",
] as const;

export const x402Operations = [
  operation({
    method: "post",
    path: "/x402/skills/{skillId}/call",
    tag: "x402",
    summary: "Call a skill, paying for this one call with x402 (no account, no key)",
    description:
      "x402 v2, `exact` scheme, EIP-3009. Without a PAYMENT-SIGNATURE header: 402 with a PAYMENT-REQUIRED header (base64 JSON: " +
      "x402Version, resource, accepts). With one that verifies (signature, amount, validity window, funds, unused nonce), the " +
      "payment is collected into the escrow on-chain (collectX402) before the call runs; once the skill answered with data it " +
      "is credited to the seller (completeX402) and the answer carries a PAYMENT-RESPONSE header naming the collection's " +
      "transaction. A failed skill's payment is refunded to the payer (refundX402). The body is the " +
      "skill's parameters, flat; the metadata is camelCase, as on POST /v1/skills/{skillId}/call.",
    auth: "none",
    params: skillIdParams,
    body: skillParametersBody,
    bodyOptional: true,
    responses: [
      {
        status: 200,
        description: "The skill's answer, and what the call cost, paid on-chain.",
        schema: skillCallSuccess,
        headers: { "payment-response": "Base64 JSON: { success, transaction, network, payer, amount }." },
      },
    ],
    errors: [...X402_CALL_ERRORS],
    errorFields: { metadata: skillCallMetadata },
  }),
  operation({
    method: "get",
    path: "/x402/discovery/resources",
    tag: "x402",
    summary: "The skills payable with x402, in the protocol's discovery list format",
    auth: "none",
    query: x402DiscoveryQuery,
    responses: [{ status: 200, description: "One resource per payable skill, with its payment requirements.", schema: discoveryList }],
    errors: ["chain_not_configured"],
  }),
];
