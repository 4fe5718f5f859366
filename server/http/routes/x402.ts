import { performance } from "node:perf_hooks";
import express, { type Request, type Response, type Router } from "express";
import { encodePaymentRequiredHeader, encodePaymentResponseHeader } from "@x402/core/http";
import type { Config } from "../../config";
import type { X402Service } from "../../x402";
import { skillParametersBody } from "../contract/call";
import { parseRequest } from "../contract/common";
import { callResponse } from "../call-answer";
import { ApiError } from "../errors";
import { jsonBody } from "../json-body";
import { publicBase } from "../public-url";
import { x402DiscoveryQuery } from "../contract/x402";

/** The headers of x402 v2 over HTTP (x402-foundation/x402, specs/transports-v2/http.md). */
const PAYMENT_SIGNATURE = "payment-signature";
const PAYMENT_REQUIRED = "PAYMENT-REQUIRED";
const PAYMENT_RESPONSE = "PAYMENT-RESPONSE";

/**
 * Pay-per-call with x402, beside the spec's key-authenticated call endpoints (which stay as they are):
 *
 *   POST /x402/skills/:skillId/call   the skill's parameters, flat. Without payment: 402 in the spec's error
 *                                     envelope and a PAYMENT-REQUIRED header; with a PAYMENT-SIGNATURE that
 *                                     verifies, the call runs and, once its settlement is mined, 200 in the spec's
 *                                     success envelope with a PAYMENT-RESPONSE header naming the transaction.
 *   GET  /x402/discovery/resources    the x402-payable skills, in the protocol's discovery list format (what a
 *                                     facilitator's bazaar serves), so x402 clients and indexes can find them.
 *
 * No account, no key: these routes sit behind the per-address limit of unauthenticated requests.
 */
export function x402Routes(deps: { config: Config; x402?: X402Service }): Router {
  const router = express.Router();
  const json = jsonBody(deps.config.maxRequestBytes);
  const service = (): X402Service => {
    if (!deps.x402) {
      throw new ApiError(
        "chain_not_configured",
        "This gateway takes no x402 payments: it runs without an escrow chain or an x402 settlement key.",
      );
    }
    return deps.x402;
  };

  router.post("/x402/skills/:skillId/call", json, async (req: Request, res: Response) => {
    const startedAt = performance.now();
    const x402 = service();
    const input = parseRequest(skillParametersBody, req.body ?? {});
    const header = req.headers[PAYMENT_SIGNATURE];
    const result = await x402.call({
      skillRef: String(req.params.skillId),
      input,
      paymentHeader: Array.isArray(header) ? header[0] : header,
      resourceUrl: `${publicBase(deps.config, req)}${req.originalUrl.split("?")[0]}`,
      startedAt,
    });
    const { status, body, headers } = callResponse(result);
    res.set(headers);
    const note = result.kind === "answered" ? result.note : undefined;
    if (note?.paymentRequired) res.set(PAYMENT_REQUIRED, encodePaymentRequiredHeader(note.paymentRequired));
    if (note?.settlement) res.set(PAYMENT_RESPONSE, encodePaymentResponseHeader(note.settlement));
    // Browser clients read these across origins only if they are exposed.
    res.set("access-control-expose-headers", `${PAYMENT_REQUIRED}, ${PAYMENT_RESPONSE}, X-Call-Id`);
    res.status(status).type("application/json").send(body);
  });

  router.get("/x402/discovery/resources", async (req: Request, res: Response) => {
    const x402 = service();
    const query = parseRequest(x402DiscoveryQuery, req.query);
    const base = publicBase(deps.config, req);
    const all = query.type === undefined || query.type === "http" ? await x402.payable() : [];
    const page = all.slice(query.offset, query.offset + query.limit);
    res.json({
      x402Version: 2,
      items: page.map((skill) => ({
        resource: `${base}/x402/skills/${encodeURIComponent(skill.slug)}/call`,
        type: "http",
        x402Version: 2,
        accepts: [x402.price(skill).requirements],
        lastUpdated: new Date().toISOString(),
        description: skill.description || skill.name,
        mimeType: "application/json",
        serviceName: skill.name,
        extensions: { bazaar: bazaarExtension(skill.inputSchema) },
      })),
      pagination: { limit: query.limit, offset: query.offset, total: all.length },
    });
  });

  return router;
}

/**
 * The bazaar discovery extension (x402-foundation/x402, extensions/bazaar) of a skill's endpoint: a JSON POST whose
 * body is the skill's parameters, described by the skill's input schema (any object when it has none).
 */
function bazaarExtension(inputSchema: object | null) {
  return {
    info: { input: { type: "http", method: "POST", bodyType: "json", body: {} } },
    schema: {
      $schema: "https://json-schema.org/draft/2020-12/schema",
      type: "object",
      properties: {
        input: {
          type: "object",
          properties: {
            type: { type: "string", const: "http" },
            method: { type: "string", enum: ["POST"] },
            bodyType: { type: "string", enum: ["json"] },
            body: inputSchema ?? { type: "object" },
          },
          required: ["type", "bodyType", "body"],
          additionalProperties: false,
        },
      },
      required: ["input"],
    },
  };
}
