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

function responsesOf(op: Operation, errorResponses: ErrorResponses): ZodOpenApiResponsesObject {
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
    responses[`${status}` as `${1 | 2 | 3 | 4 | 5}${string}`] = errorResponses.of(status, codes, op.errorFields);
  }
  return responses;
}

type ErrorResponse = NonNullable<ZodOpenApiResponsesObject[`${1 | 2 | 3 | 4 | 5}${string}`]>;

/**
 * The document's error answers, each written once under components/responses and referred to by every operation that
 * answers it: 57 operations answer 429 rate_limited, and each used to carry the whole envelope. A response is named by
 * its status and codes (`429-rate_limited`), and by the operation that first declares its extra fields when it has
 * some (`402-insufficient_balance-postV1Call`): two operations share a response only when they share the same codes
 * and the same fields, the same schemas under the same names.
 */
class ErrorResponses {
  private readonly byKey = new Map<string, ErrorResponse>();
  /** Each set of extra fields (its names and schemas), by the operation that declares it first. */
  private readonly fieldsNames = new Map<string, string>();
  private readonly schemaNumbers = new Map<z.ZodType, number>();

  constructor(operations: readonly Operation[]) {
    for (const op of operations) {
      if (op.errorFields && !this.fieldsNames.has(this.fieldsKey(op.errorFields))) {
        this.fieldsNames.set(this.fieldsKey(op.errorFields), operationId(op));
      }
    }
  }

  /** The fields' names and the identities of their schemas, as one string. */
  private fieldsKey(fields: Record<string, z.ZodType>): string {
    const numberOf = (schema: z.ZodType) => {
      if (!this.schemaNumbers.has(schema)) this.schemaNumbers.set(schema, this.schemaNumbers.size);
      return this.schemaNumbers.get(schema);
    };
    return Object.entries(fields)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([name, schema]) => `${name}:${numberOf(schema)}`)
      .join(",");
  }

  of(status: number, codes: readonly ErrorCode[], fields: Record<string, z.ZodType> | undefined): ErrorResponse {
    const id = [status, ...codes, ...(fields ? [this.fieldsNames.get(this.fieldsKey(fields))] : [])].join("-");
    let response = this.byKey.get(id);
    if (!response) {
      response = { id, description: codes.join(", "), content: { "application/json": { schema: errorEnvelope(codes, fields) } } };
      this.byKey.set(id, response);
    }
    return response;
  }
}

/** The operation's id in the document: its method and path in camelCase (postV1Call, getV1SkillsSkillId). */
function operationId(op: Operation): string {
  return `${op.method}${op.path.replace(/[{}]/g, "").replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ?? "").toUpperCase())}`;
}

function operationObject(op: Operation, errorResponses: ErrorResponses): ZodOpenApiOperationObject {
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
    operationId: operationId(op),
    summary: op.summary,
    ...(op.description ? { description: op.description } : {}),
    tags: [op.tag],
    security: SECURITY[op.auth],
    ...params,
    ...(op.body
      ? { requestBody: { required: !op.bodyOptional, content: { [op.bodyContentType ?? "application/json"]: { schema: op.body } } } }
      : {}),
    responses: responsesOf(op, errorResponses),
  };
}

/** Builds the document (a few milliseconds; GET /openapi.json builds it once). */
export function buildOpenApiDocument(): ReturnType<typeof createDocument> {
  const errorResponses = new ErrorResponses(OPERATIONS);
  const paths: ZodOpenApiPathsObject = {};
  for (const op of OPERATIONS) {
    paths[op.path] ??= {};
    const item = paths[op.path];
    if (item[op.method]) throw new Error(`${op.method.toUpperCase()} ${op.path} is declared twice`);
    item[op.method] = operationObject(op, errorResponses);
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
