import { z } from "zod";
import { createDocument, type ZodOpenApiOperationObject, type ZodOpenApiPathsObject, type ZodOpenApiResponsesObject } from "zod-openapi";
import type { ErrorCode } from "../../errors";
import { ERROR_STATUS } from "../errors";
import { accountOperations } from "./account";
import { authOperations } from "./auth";
import { callOperations } from "./call";
import { catalogOperations } from "./catalog";
import { claimOperations } from "./claim";
import { type Auth, commonErrors, errorEnvelope, type Operation } from "./common";
import { keyOperations } from "./keys";
import { mcpOperations } from "./mcp";
import { mcpOAuthOperations } from "./mcp-oauth";
import { ownKeyOperations } from "./own-key";
import { platformOperations } from "./platform";
import { sellerOperations } from "./seller";
import { topupOperations } from "./topups";
import { walletOperations } from "./wallet";
import { withdrawalOperations } from "./withdrawals";
import { x402Operations } from "./x402";

/**
 * The API's OpenAPI 3.1 document, made from the same zod declarations the routes validate
 * requests with. Served at GET /openapi.json and committed as docs/openapi.json
 * (`npm run openapi` writes it; a test fails when the two differ).
 */

/** Every operation of the API, in the document's order. */
export const OPERATIONS: readonly Operation[] = [
  ...callOperations,
  ...catalogOperations,
  ...accountOperations,
  ...keyOperations,
  ...ownKeyOperations,
  ...sellerOperations,
  ...claimOperations,
  ...withdrawalOperations,
  ...walletOperations,
  ...topupOperations,
  ...authOperations,
  ...platformOperations,
  ...mcpOperations,
  ...mcpOAuthOperations,
  ...x402Operations,
];

/** The error codes an operation can answer: its own and its kind's, each once. */
export function errorCodesOf(op: Operation): ErrorCode[] {
  return [...new Set([...commonErrors(op), ...op.errors])];
}

const SECURITY: Record<Auth, ZodOpenApiOperationObject["security"]> = {
  none: [],
  api_key: [{ apiKey: [] }],
  session: [{ session: [] }],
  account: [{ apiKey: [] }, { session: [] }],
  provider: [],
};

function responsesOf(op: Operation): ZodOpenApiResponsesObject {
  const responses: ZodOpenApiResponsesObject = {};
  for (const success of op.responses) {
    responses[`${success.status}` as `${1 | 2 | 3 | 4 | 5}${string}`] = {
      description: success.description,
      ...(success.headers
        ? {
            headers: z.object(
              Object.fromEntries(
                Object.entries(success.headers).map(([name, header]) =>
                  typeof header === "string"
                    ? [name, z.string().meta({ description: header })]
                    : [name, z.string().optional().meta({ description: header.description })],
                ),
              ),
            ),
          }
        : {}),
      ...(success.schema ? { content: { [success.contentType ?? "application/json"]: { schema: success.schema } } } : {}),
    };
  }
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of errorCodesOf(op)) byStatus.set(ERROR_STATUS[code], [...(byStatus.get(ERROR_STATUS[code]) ?? []), code]);
  for (const [status, codes] of [...byStatus].sort(([a], [b]) => a - b)) {
    responses[`${status}` as `${1 | 2 | 3 | 4 | 5}${string}`] = {
      description: codes.join(", "),
      content: { "application/json": { schema: errorEnvelope(codes, op.errorFields) } },
    };
  }
  return responses;
}

function operationObject(op: Operation): ZodOpenApiOperationObject {
  const params =
    op.params || op.query || op.headers
      ? {
          requestParams: {
            ...(op.params ? { path: op.params } : {}),
            ...(op.query ? { query: op.query } : {}),
            ...(op.headers ? { header: op.headers } : {}),
          },
        }
      : {};
  return {
    operationId: `${op.method}${op.path.replace(/[{}]/g, "").replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ?? "").toUpperCase())}`,
    summary: op.summary,
    ...(op.description ? { description: op.description } : {}),
    tags: [op.tag],
    security: SECURITY[op.auth],
    ...params,
    ...(op.body
      ? { requestBody: { required: !op.bodyOptional, content: { [op.bodyContentType ?? "application/json"]: { schema: op.body } } } }
      : {}),
    responses: responsesOf(op),
  };
}

/** Builds the document (a few milliseconds; GET /openapi.json builds it once). */
export function buildOpenApiDocument(): ReturnType<typeof createDocument> {
  const paths: ZodOpenApiPathsObject = {};
  for (const op of OPERATIONS) {
    paths[op.path] ??= {};
    const item = paths[op.path];
    if (item[op.method]) throw new Error(`${op.method.toUpperCase()} ${op.path} is declared twice`);
    item[op.method] = operationObject(op);
  }
  return createDocument({
    openapi: "3.1.0",
    info: {
      title: "Skill Gateway API",
      version: "1.0.0",
      description:
        "A paid gateway for AI-agent skills: one atom_ key, per-call USDC billing. Every answer but a call's skill data and this document is the envelope { success, data } or { success: false, error, code }. Generated from server/http/contract/ (npm run openapi).",
    },
    paths,
    components: {
      securitySchemes: {
        apiKey: { type: "http", scheme: "bearer", description: "Authorization: Bearer atom_..." },
        session: {
          type: "apiKey",
          in: "cookie",
          name: "sg_session",
          description:
            "A dashboard session; requests that change state also send its X-CSRF-Token header. On a gateway served over https the cookie is __Host-sg_session (and the CSRF cookie __Host-sg_csrf).",
        },
      },
    },
  });
}
