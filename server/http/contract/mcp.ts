import { z } from "zod";
import { operation } from "./common";

/** The hosted MCP server (server/http/routes/mcp.ts): MCP's own JSON-RPC messages, behind the gateway's envelope refusals. */

/** POST /mcp's query: which skills are its tools. */
export const mcpQuery = z.object({
  skills: z.string({ error: "skills must be given once, as a comma-separated list of skill slugs or UUIDs." }).optional().meta({
    description:
      "A comma-separated list of skill slugs or UUIDs: only these are tools (403 skill_not_allowed for one the key's allowed_skills leaves out). Default: every listed skill the key may call.",
  }),
});

const jsonRpc = z.looseObject({ jsonrpc: z.literal("2.0") }).meta({ description: "A JSON-RPC 2.0 message of MCP (Streamable HTTP)." });

export const mcpOperations = [
  operation({
    method: "post",
    path: "/mcp",
    tag: "MCP",
    summary: "The hosted MCP server: every listed skill is a tool",
    description:
      "Stateless Streamable HTTP, JSON answers. A tool call goes through the call path exactly as POST /v1/call does; what it decides comes back as a tool result. A tools/call's _meta may carry idempotency_key and max_price (as the Idempotency-Key and X-Max-Price headers: a dearer skill is an error result with code price_above_max, nothing charged); a charged result's _meta carries balance_available and, for a key with a spending limit, key_spend_remaining (USD strings, as the X-Balance-Available and X-Key-Spend-Remaining headers).",
    auth: "api_key",
    scope: "calls",
    query: mcpQuery,
    body: z.union([jsonRpc, z.array(jsonRpc)]),
    responses: [
      { status: 200, description: "The JSON-RPC answer.", schema: z.union([jsonRpc, z.array(jsonRpc)]) },
      { status: 202, description: "A notification or response, accepted." },
    ],
    errors: ["skill_not_found", "skill_not_allowed", "not_found", "unsupported_media_type", "method_not_allowed"],
  }),
];

// A stateless server has no stream to open (GET) and no session to end (DELETE): both are refused.
for (const method of ["get", "delete"] as const) {
  mcpOperations.push(
    operation({
      method,
      path: "/mcp",
      tag: "MCP",
      summary: `Not served: the MCP server is stateless (${method.toUpperCase()} answers 405 with Allow: POST)`,
      auth: "none",
      responses: [],
      errors: ["method_not_allowed"],
    }),
  );
}
