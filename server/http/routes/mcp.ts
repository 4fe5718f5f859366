import { createHash } from "node:crypto";
import { performance } from "node:perf_hooks";
import express, { type NextFunction, type Request, type Response, type Router } from "express";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { CallToolRequestSchema, type CallToolResult, ListToolsRequestSchema, type Tool } from "@modelcontextprotocol/sdk/types.js";
import type { ApiKeyRecord, ApiKeys } from "../../identity/api-keys";
import type { Config } from "../../config";
import type { CallService } from "../../gateway/call-service";
import { IDEMPOTENCY_KEY } from "../../gateway/idempotency";
import type { Skill, SkillRegistry } from "../../catalog/skills";
import { computeCharge } from "../../ledger/fees";
import { microsToUsd } from "../../ledger/money";
import { authenticate, authorize, bearerToken, keyOperation } from "../auth";
import { InvalidTokenProblem, type McpOAuth, isApiKeyCredential, sameResource } from "../../identity/mcp-oauth";
import { mcpResourceOf, resourceMetadataUrlOf } from "./mcp-oauth";
import { allowsSkill } from "../../identity/scopes";
import { type CallResponse, callResponse } from "../call-answer";
import { GatewayError } from "../../errors";
import { ApiError } from "../errors";
import { jsonBody } from "../json-body";
import { parseRequest } from "../contract/common";
import { mcpQuery } from "../contract/mcp";
import { maxPriceOf } from "../contract/call";
import { BALANCE_AVAILABLE_HEADER, KEY_SPEND_REMAINING_HEADER } from "../call-answer";
import { excerpt } from "../../text";
import { costLine, failureLine, qualityLine } from "../tool-text";
import type { QualitySummary } from "../../gateway/quality";
import type { QualityRecorder } from "../../gateway/quality-recorder";
import { qualityOf } from "./read";

/** What the MCP server says it is in its `initialize` answer. */
const SERVER_INFO = { name: "skill-gateway", version: "1.0.0" };

/** The `_meta` key of a tools/call request that carries an idempotency key (the MCP form of the `Idempotency-Key` header). */
export const MCP_IDEMPOTENCY_META = "idempotency_key";

/** The `_meta` key of a tools/call request that carries the call's max_price (the MCP form of the `X-Max-Price` header). */
export const MCP_MAX_PRICE_META = "max_price";

/** The most skills a `?skills=` query may name: a bound on the work one request can ask for. */
const SELECTED_SKILLS_MAX = 100;

export interface McpRoutesParameters {
  config: Config;
  keys: ApiKeys;
  /** The OAuth 2.1 authorization server whose access tokens /mcp takes beside `atom_` keys (./mcp-oauth.ts). */
  oauth: McpOAuth;
  skills: SkillRegistry;
  /** The skills' measured quality, said in each tool's description. */
  quality: QualityRecorder;
  calls: CallService;
  log: (message: string, error?: unknown) => void;
}

/**
 * The hosted MCP server: `POST /mcp`, Streamable HTTP without sessions (a new MCP server and
 * transport per request), authenticated by the same `atom_` key as the call endpoints.
 * Every listed skill is a tool (or only those named in `?skills=a,b`), named by its slug;
 * calling one goes through the call service exactly as `POST /v1/call` does: the same holds,
 * idempotency, rate limits and usage rows, and no charge on failure. The HTTP-level refusals
 * (401, 404 for an unknown `?skills=` name, 405, 413, 400) are the spec's envelope and come
 * before MCP runs; everything a call decides comes back as a tool result, an error as
 * `isError: true` with the gateway's message, never as a thrown error.
 */
export function mcpRoutes(deps: McpRoutesParameters): Router {
  const router = express.Router();
  const json = jsonBody(deps.config.maxRequestBytes);

  const authenticated = mcpCredential(deps);

  router.post("/mcp", authenticated, json, async (req: Request, res: Response) => {
    const tools = selectedSkills(deps.skills, req.apiKey!, parseRequest(mcpQuery, req.query).skills);
    if (req.body === undefined) throw new ApiError("invalid_request", "Send a JSON-RPC message (MCP Streamable HTTP) as the body.");

    const server = mcpServer(deps, req.apiKey!, tools);
    // JSON answers rather than an SSE stream: every request here is answered in one response.
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on("close", () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, req.body);
  });

  // A stateless server has no stream to open (GET) and no session to end (DELETE).
  router.all("/mcp", (req: Request, _res: Response, next: NextFunction) => {
    next(
      new ApiError("method_not_allowed", `${req.method} /mcp is not served: this MCP server is stateless, send each message as a POST.`, {
        allow: "POST",
      }),
    );
  });

  return router;
}

/**
 * POST /mcp's credential: an `atom_` key as on every keyed route, or an OAuth access token of the gateway's own
 * authorization server (docs/mcp.md), which stands for the calls-only key its grant made. Each needs the `calls` scope.
 * A 401 carries `WWW-Authenticate: Bearer resource_metadata="..."` (RFC 9728 section 5.1), which is how a remote MCP
 * client finds where to get a token; a credential that was presented and refused adds `error="invalid_token"`
 * (RFC 6750 section 3.1), so that a mistyped key never looks like a missing one.
 */
function mcpCredential(deps: McpRoutesParameters) {
  const op = keyOperation("POST /mcp");
  return async (req: Request, _res: Response, next: NextFunction): Promise<void> => {
    const challenge = (invalid?: string) =>
      `Bearer ${invalid !== undefined ? `error="invalid_token", error_description="${invalid}", ` : ""}resource_metadata="${resourceMetadataUrlOf(deps.config, req)}"`;
    const header = req.headers.authorization;
    const token = header === undefined ? undefined : bearerToken(header);
    let key: ApiKeyRecord;
    try {
      key = token !== undefined && !isApiKeyCredential(token) ? await oauthKey(deps, req, token) : await authenticate(deps.keys, header);
    } catch (error) {
      if (error instanceof ApiError && error.status === 401) {
        const reason = error.code === "key_expired" ? "The credential has expired" : "The credential is not valid";
        error.headers["www-authenticate"] = challenge(header === undefined ? undefined : reason);
      }
      throw error;
    }
    authorize(key, op);
    req.apiKey = key;
    req.accountId = key.accountId;
    next();
  };
}

/** The live key an OAuth access token stands for, if the token is live, for this endpoint, and its grant's key is too. */
async function oauthKey(deps: McpRoutesParameters, req: Request, token: string): Promise<ApiKeyRecord> {
  const invalid = () =>
    new ApiError(
      "unauthorized",
      "Invalid access token: it is unknown, expired or revoked. Connect again, or use an API key (Bearer atom_...).",
    );
  let apiKeyId: string;
  try {
    const info = await deps.oauth.verifyAccessTokenOnce(req, token);
    if (info.resource === undefined || !sameResource(info.resource.href, mcpResourceOf(deps.config, req))) throw invalid();
    apiKeyId = String(info.extra?.apiKeyId);
  } catch (error) {
    if (error instanceof InvalidTokenProblem) throw invalid();
    throw error;
  }
  const checked = await deps.keys.checkById(apiKeyId);
  if (checked.kind === "expired")
    throw new ApiError("key_expired", "This connection expired (the expiry chosen when it was made): connect again from your MCP client.");
  if (checked.kind !== "valid") throw invalid();
  return checked.record;
}

/**
 * The skills a request's tools are made of: every listed one the key may call (its allowed_skills), or those of them
 * `?skills=` names: 404 naming any that is not listed, 403 skill_not_allowed naming any the key may not call (the query
 * narrows what the key may call, never widens it).
 */
function selectedSkills(registry: SkillRegistry, apiKey: ApiKeyRecord, query: string | undefined): () => Skill[] {
  const allowed = (skill: Skill) => allowsSkill(apiKey, skill);
  if (query === undefined) return () => registry.list().filter(allowed);
  const refs = [
    ...new Set(
      query
        .split(",")
        .map((ref) => ref.trim())
        .filter((ref) => ref !== ""),
    ),
  ];
  if (refs.length === 0)
    throw new ApiError("invalid_request", "skills is empty: name at least one skill slug or UUID, or leave it out for every skill.");
  if (refs.length > SELECTED_SKILLS_MAX) throw new ApiError("invalid_request", `skills names more than ${SELECTED_SKILLS_MAX} skills.`);
  const missing = refs.filter((ref) => registry.resolve(ref) === undefined);
  if (missing.length > 0)
    throw new ApiError(
      "skill_not_found",
      `Skill not found: ${missing.map((ref) => `"${excerpt(ref, 100)}"`).join(", ")}. Check the skills query.`,
    );
  const forbidden = refs.filter((ref) => !allowed(registry.resolve(ref)!));
  if (forbidden.length > 0)
    throw new ApiError(
      "skill_not_allowed",
      `This API key may not call ${forbidden.map((ref) => `"${excerpt(ref, 100)}"`).join(", ")}: not in the key's allowed_skills.`,
    );
  // Resolved again on each use: a skill deactivated meanwhile drops out rather than being called.
  return () => refs.map((ref) => registry.resolve(ref)).filter((skill): skill is Skill => skill !== undefined && allowed(skill));
}

/** One request's MCP server: its tools are the skills, each call made as `apiKey`. */
function mcpServer(deps: McpRoutesParameters, apiKey: ApiKeyRecord, skills: () => Skill[]): Server {
  const server = new Server(SERVER_INFO, { capabilities: { tools: {} } });

  server.setRequestHandler(ListToolsRequestSchema, async () => {
    const quality = await deps.quality.summaries();
    return { tools: skills().map((skill) => toolOf(deps, skill, quality.get(skill.id))) };
  });

  server.setRequestHandler(CallToolRequestSchema, async (request): Promise<CallToolResult> => {
    const startedAt = performance.now();
    const { name, arguments: input = {}, _meta } = request.params;
    // Only the tools this request lists can be called: `?skills=` narrows what an agent may spend on.
    const skill = skills().find((candidate) => candidate.slug === name);
    if (!skill) {
      // A skill the key may not call is not listed; calling it anyway is told apart from a name that is no skill.
      const unlisted = deps.skills.resolve(name);
      if (unlisted && !allowsSkill(apiKey, unlisted))
        return errorResult(
          "skill_not_allowed",
          `This API key may not call the skill "${unlisted.slug}": it is not in the key's allowed_skills.`,
        );
      return errorResult("skill_not_found", `Unknown tool "${name.slice(0, 100)}": no listed skill has that slug.`);
    }
    try {
      const response = await deps.calls.execute({
        endpoint: "call",
        apiKey,
        skillRef: skill.id,
        input,
        idempotency: idempotencyOf(skill, input, _meta),
        startedAt,
        maxPriceMicros: maxPriceOf(_meta?.[MCP_MAX_PRICE_META] ?? undefined, `_meta.${MCP_MAX_PRICE_META}`),
      });
      if (response.kind === "refused") return errorResult(response.refusal.code, response.refusal.message, response.refusal.details);
      return toolResult(callResponse(response));
    } catch (error) {
      if (error instanceof GatewayError) return errorResult(error.code, error.message);
      deps.log("internal error on an MCP tool call", error);
      return errorResult("internal_error", "Internal server error: the call was not charged.");
    }
  });

  return server;
}

/**
 * The most of a seller's description a tool list carries, in characters. A tool list goes into the context of every
 * agent that connects, and a seller's words there can read as instructions (tool poisoning) for calls the seller is
 * paid for: what an agent reads of them is bounded, one paragraph, and the whole description stays on the skill's
 * marketplace page (GET /v1/skills/:skillId).
 */
export const TOOL_DESCRIPTION_MAX_CHARS = 300;
/** The most of each `title` and `description` inside a tool's input schema, in characters: seller's words too. */
export const TOOL_SCHEMA_TEXT_MAX_CHARS = 120;

/**
 * A skill as an MCP tool: its slug, its schema (an object schema, as MCP requires), and in the description its price
 * and its measured quality ("Succeeded 99.2% of 1,250 calls this week, p95 340 ms.").
 */
export function toolOf(deps: Pick<McpRoutesParameters, "config">, skill: Skill, quality?: QualitySummary | null): Tool {
  const priceUsd = microsToUsd(computeCharge(skill.priceMicros, deps.config.feeMode, deps.config.feeBps).chargedMicros);
  const about = excerpt(skill.description, TOOL_DESCRIPTION_MAX_CHARS) || excerpt(skill.name, TOOL_DESCRIPTION_MAX_CHARS);
  return {
    name: skill.slug,
    title: excerpt(skill.name, TOOL_DESCRIPTION_MAX_CHARS),
    // A usage-priced skill charges what each call used, up to its max_price (what a call holds).
    description:
      skill.pricing === "usage"
        ? `${about}\n\nPrice: up to $${priceUsd} per call (charged for what the call used), only when the call succeeds. ${qualityLine(qualityOf(quality))}`
        : `${about}\n\nPrice: $${priceUsd} per call, charged only when the call succeeds. ${qualityLine(qualityOf(quality))}`,
    inputSchema: objectSchema(skill.inputSchema),
  };
}

/** Schema keywords whose value is a subschema, an array of them, or a map of them (JSON Schema drafts 4 to 2020-12). */
const SUBSCHEMA = [
  "items",
  "additionalItems",
  "additionalProperties",
  "not",
  "if",
  "then",
  "else",
  "contains",
  "propertyNames",
  "unevaluatedItems",
  "unevaluatedProperties",
];
const SUBSCHEMA_LISTS = ["allOf", "anyOf", "oneOf", "prefixItems", "items"];
const SUBSCHEMA_MAPS = ["properties", "patternProperties", "definitions", "$defs", "dependentSchemas", "dependencies"];

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value);

/** Bounded copies of input schemas, by the schema the catalogue holds (a reload makes new objects, and new copies). */
const boundedSchemas = new WeakMap<object, Record<string, unknown>>();

/**
 * A copy of a schema whose `title` and `description` keywords, wherever a subschema may stand, are excerpts of at most
 * TOOL_SCHEMA_TEXT_MAX_CHARS: the structure an agent needs to call the skill, without room for a seller's essay. Values
 * (`default`, `examples`, `enum`, `const`) are left as they are: changing them would change what validates.
 */
function boundSchemaText(schema: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...schema };
  for (const key of ["title", "description"])
    if (typeof out[key] === "string") out[key] = excerpt(out[key] as string, TOOL_SCHEMA_TEXT_MAX_CHARS);
  for (const key of SUBSCHEMA) if (isObject(out[key])) out[key] = boundSchemaText(out[key] as Record<string, unknown>);
  for (const key of SUBSCHEMA_LISTS)
    if (Array.isArray(out[key])) out[key] = (out[key] as unknown[]).map((item) => (isObject(item) ? boundSchemaText(item) : item));
  for (const key of SUBSCHEMA_MAPS)
    if (isObject(out[key]))
      out[key] = Object.fromEntries(
        Object.entries(out[key] as Record<string, unknown>).map(([name, item]) => [name, isObject(item) ? boundSchemaText(item) : item]),
      );
  return out;
}

/**
 * The skill's input schema as an MCP tool's `inputSchema`, which must be an object schema
 * (the SDK's client refuses a whole tool list over one that is not). A schema without a
 * `type` gets `"object"` (a call's input is always an object); one that describes anything
 * else, or whose `properties`/`required` are malformed, is replaced by `{type: "object"}`,
 * and the gateway still validates every call against the seller's schema.
 */
function objectSchema(schema: object | null): Tool["inputSchema"] {
  if (schema === null || Array.isArray(schema)) return { type: "object" };
  const s = schema as Record<string, unknown>;
  if (s.type !== undefined && s.type !== "object") return { type: "object" };
  if (s.properties !== undefined && (typeof s.properties !== "object" || s.properties === null || Array.isArray(s.properties)))
    return { type: "object" };
  if (s.required !== undefined && !(Array.isArray(s.required) && s.required.every((r) => typeof r === "string"))) return { type: "object" };
  let bounded = boundedSchemas.get(schema);
  if (!bounded) boundedSchemas.set(schema, (bounded = boundSchemaText(s)));
  return { ...bounded, type: "object" } as Tool["inputSchema"];
}

/** The idempotency key of a tools/call, from its `_meta`; the request hash covers the tool and its arguments. */
function idempotencyOf(
  skill: Skill,
  input: unknown,
  meta: Record<string, unknown> | undefined,
): { key: string; requestHash: string } | undefined {
  const key = meta?.[MCP_IDEMPOTENCY_META];
  if (key === undefined) return undefined;
  if (typeof key !== "string" || !IDEMPOTENCY_KEY.test(key)) {
    throw new ApiError("invalid_request", `_meta.${MCP_IDEMPOTENCY_META} must be 1 to 255 visible ASCII characters.`);
  }
  const requestHash = createHash("sha256").update(`mcp ${skill.id}\n`).update(JSON.stringify(input)).digest("hex");
  return { key, requestHash };
}

interface CallMetadata {
  skill_id: string;
  response_time_ms: number;
  price_paid: number;
  call_id?: string;
}

/**
 * The call service's answer as a tool result (docs/clients.md, "One contract"; the CLI's stdio server answers the
 * same). Success: the skill's data as JSON text, the cost line (./tool-text.ts: "Charged ..." or, for an idempotent
 * replay, "Already paid: ... (replayed)"), and `structuredContent` `{data, metadata}` with the metadata of
 * `POST /v1/call` (its `call_id` included; `replayed: true` on a replay), and in `_meta` what the payer has left
 * (`balance_available`, and `key_spend_remaining` for a key with a spending limit: the X-Balance-Available and
 * X-Key-Spend-Remaining headers of the REST call, USD strings). Any other status: `isError`, the gateway's message
 * saying once that nothing was charged (a 402's names the shortfall), and `{error, code, metadata}`, with a refusal's
 * `details` (a 402's numbers) and a 429's `retry_after_sec`.
 */
function toolResult(response: CallResponse): CallToolResult {
  const body = JSON.parse(response.body) as {
    success: boolean;
    data?: unknown;
    error?: string;
    code?: string;
    metadata?: CallMetadata;
    details?: Record<string, unknown>;
  };
  // The body names the call (call_id) since it carries its id; X-Call-Id is the same id, for an answer without one.
  const callId = body.metadata?.call_id ?? response.headers["x-call-id"];
  const replayed = response.headers["idempotent-replayed"] === "true";
  const metadata = {
    ...body.metadata,
    ...(callId ? { call_id: callId } : {}),
    ...(replayed ? { replayed: true } : {}),
  };
  if (response.status === 200 && body.success) {
    const available = response.headers[BALANCE_AVAILABLE_HEADER];
    const remaining = response.headers[KEY_SPEND_REMAINING_HEADER];
    return {
      content: [
        { type: "text", text: JSON.stringify(body.data) },
        { type: "text", text: costLine(metadata) },
      ],
      structuredContent: { data: body.data, metadata },
      ...(available !== undefined
        ? { _meta: { balance_available: available, ...(remaining !== undefined ? { key_spend_remaining: remaining } : {}) } }
        : {}),
    };
  }
  const retryAfter = response.headers["retry-after"];
  return {
    isError: true,
    content: [
      { type: "text", text: failureLine(body.error ?? "The call failed.", body.code, retryAfter ? Number(retryAfter) : undefined) },
    ],
    structuredContent: {
      error: body.error,
      code: body.code,
      metadata,
      ...(body.details ? { details: body.details } : {}),
      ...(retryAfter ? { retry_after_sec: Number(retryAfter) } : {}),
    },
  };
}

/**
 * A refusal before the call service ran (or before its call began: a price above the call's max_price), or a fault: an
 * error result, nothing charged. `extra` is the refusal's details, as the error envelope carries them.
 */
function errorResult(code: string, message: string, extra: Record<string, unknown> = {}): CallToolResult {
  return {
    isError: true,
    content: [{ type: "text", text: failureLine(message, code) }],
    structuredContent: { error: message, code, metadata: { price_paid: 0 }, ...extra },
  };
}
