import { z } from "zod";
import { dataEnvelope, hexAddress, operation, usdNumber } from "./common";

/**
 * What the gateway says about itself: the platform's settings, liveness, readiness and this
 * contract (server/http/routes/platform.ts, health.ts, openapi.ts).
 */

const readinessChecks = z.record(z.string(), z.strictObject({ ok: z.boolean(), detail: z.string() }));

/** GET /healthz's answer. */
export const livenessView = z.strictObject({ status: z.literal("ok") });
/** GET /readyz's answer when every check passes. */
export const readinessView = z.strictObject({ status: z.literal("ready"), checks: readinessChecks });

/** GET /v1/platform's answer. */
export const platformView = z.strictObject({
  chain_id: z.number().int().nullable(),
  escrow: hexAddress.nullable(),
  usdc: hexAddress.nullable(),
  min_deposit: usdNumber.nullable(),
  card_topup_max: usdNumber.meta({ description: "The largest card top-up, USD." }),
  skill_price_min: usdNumber.meta({ description: "The lowest price per call a seller may set, USD." }),
  skill_price_max: usdNumber.meta({ description: "The highest price per call a seller may set, USD." }),
  fee_bps: z.number().int(),
  fee_mode: z.enum(["on_top", "included"]),
  email_delivery: z.enum(["smtp", "outbox"]),
  sign_in: z.strictObject({ email: z.boolean(), siwe: z.boolean(), github: z.boolean(), google: z.boolean() }),
});

export const platformOperations = [
  operation({
    method: "get",
    path: "/v1/platform",
    tag: "Platform",
    summary: "The gateway's chain, contracts, fee and sign-in methods",
    auth: "none",
    responses: [
      {
        status: 200,
        description: "The chain fields are null when the gateway runs without a chain.",
        schema: dataEnvelope(platformView),
      },
    ],
    errors: ["chain_unavailable", "chain_not_configured"],
  }),
  operation({
    method: "get",
    path: "/healthz",
    tag: "Platform",
    summary: "Liveness: the process answers",
    auth: "none",
    responses: [{ status: 200, description: "Alive.", schema: dataEnvelope(livenessView) }],
    errors: [],
  }),
  operation({
    method: "get",
    path: "/readyz",
    tag: "Platform",
    summary: "Readiness: the ledger commits, the chain answers, the money path keeps up",
    auth: "none",
    responses: [
      {
        status: 200,
        description: "Ready.",
        schema: dataEnvelope(readinessView),
      },
    ],
    errors: ["not_ready"],
    errorFields: { checks: readinessChecks },
  }),
  operation({
    method: "get",
    path: "/openapi.json",
    tag: "Platform",
    summary: "This document: the API's contract, OpenAPI 3.1",
    auth: "none",
    responses: [
      {
        status: 200,
        description: "The OpenAPI document (not in the envelope).",
        schema: z.looseObject({ openapi: z.literal("3.1.0"), info: z.looseObject({}), paths: z.looseObject({}) }),
      },
    ],
    errors: [],
  }),
];
