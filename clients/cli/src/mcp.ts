import { type SkillGateway, costLine, failureText, priceAboveCapText, qualityLine } from "@skill-gateway/sdk";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { CallToolRequestSchema, type CallToolResult, ListToolsRequestSchema, type Tool } from "@modelcontextprotocol/sdk/types.js";
import { errorCodeFor, errorMessageFor, pinnedPriceError } from "./errors";
import { type ManifestSkill, pinnedCap } from "./manifest";
import { type McpSource, checkKey, describeSource, skillsOf } from "./mcp-source";
import { formatUsd, upTo } from "./skill-md";
import { CLI_VERSION } from "./version";

/**
 * `skill-gateway mcp`: the manifest's skills as MCP tools over stdio. The manifest is read on
 * every request, so a skill added or removed while the server runs shows on the next
 * tools/list. Tools keep the skills' own JSON Schemas, so the low-level Server is used rather
 * than McpServer.registerTool, which wants zod schemas.
 */

export const SERVER_NAME = "skill-gateway";
export const SERVER_VERSION = CLI_VERSION;

/**
 * The MCP tool for a manifest skill: name = slug, the skill's schema (an open object without one), the price in the
 * description, and the quality the gateway measured when the skill was added, in the hosted server's words.
 */
export function toolOf(skill: ManifestSkill): Tool {
  const schema = skill.inputSchema as Record<string, unknown> | null;
  const inputSchema = schema ? { ...schema, type: "object" as const } : { type: "object" as const };
  const own = skill.description.trim();
  return {
    name: skill.slug,
    title: skill.name,
    description: `${own ? `${own} ` : ""}Price: ${upTo(skill)}${formatUsd(skill.price)} USD per successful call (failed calls are free), through Skill Gateway.${skill.quality !== undefined ? ` ${qualityLine(skill.quality)}` : ""}`,
    inputSchema,
  };
}

/**
 * The result of a tool call of a pinned skill, in the hosted MCP server's shape (docs/clients.md, "One contract"):
 * the data as JSON text, the cost line ("Charged $0.001 for echo (call <id>)." or, for a replay, "Already paid: ...
 * (replayed)."), `structuredContent` `{data, metadata}` with POST /v1/call's metadata names, and in `_meta` what the
 * payer has left; or isError with the gateway's message said once (the SDK's failureText) and `{error, code,
 * metadata}`. The call carries the price pinned when the skill was added as its max_price: a skill whose price has
 * risen since is refused, uncharged, with the SDK's priceAboveCapText (the LangChain tools' words): only the owner, by
 * re-adding the skill, can accept the new price.
 */
export async function callTool(client: SkillGateway, skill: ManifestSkill, input: Record<string, unknown>): Promise<CallToolResult> {
  try {
    const { data, metadata } = await client.call(skill.slug, input, { maxPrice: pinnedCap(skill) });
    const wire = {
      skill_id: metadata.skillId,
      response_time_ms: metadata.responseTimeMs,
      price_paid: metadata.cost,
      ...(metadata.callId !== undefined ? { call_id: metadata.callId } : {}),
      ...(metadata.replayed ? { replayed: true } : {}),
    };
    const available = metadata.balanceAvailable;
    const remaining = metadata.keySpendRemaining;
    return {
      content: [
        { type: "text", text: JSON.stringify(data) ?? "null" },
        { type: "text", text: costLine(metadata) },
      ],
      structuredContent: { data, metadata: wire },
      ...(available !== undefined
        ? {
            _meta: { balance_available: String(available), ...(remaining !== undefined ? { key_spend_remaining: String(remaining) } : {}) },
          }
        : {}),
    };
  } catch (caught) {
    const error = pinnedPriceError(caught, skill);
    const gateway = caught as { callId?: string; details?: Record<string, unknown>; retryAfterMs?: number; price?: number };
    const priceRose = error !== caught;
    return {
      isError: true,
      content: [{ type: "text", text: priceRose ? priceAboveCapText(skill.slug, gateway.price, pinnedCap(skill)) : failureText(error) }],
      structuredContent: {
        error: errorMessageFor(error),
        code: errorCodeFor(error),
        metadata: { skill_id: skill.slug, price_paid: 0, ...(gateway.callId ? { call_id: gateway.callId } : {}) },
        ...(gateway.details ? { details: gateway.details } : {}),
        ...(gateway.retryAfterMs !== undefined ? { retry_after_sec: Math.ceil(gateway.retryAfterMs / 1000) } : {}),
      },
    };
  }
}

/** The server's instructions: what it serves (or why nothing), and how its tools are paid for. */
export function instructionsFor(description: string): string {
  return `Skill Gateway: paid skills as tools, one API key pays for all. ${description} Each tool's description has its price per successful call; failed calls are free. When working in a loop, mind the spend: every successful call is charged.`;
}

/**
 * An MCP server (not yet connected) serving a source's skills: a manifest's (a path, read on every request) or those
 * named by --skills. `description` is what the server said at start (./mcp-source.ts), given in its instructions.
 */
export function createMcpServer(client: SkillGateway, source: McpSource | string, description?: string): Server {
  const from: McpSource = typeof source === "string" ? { kind: "manifest", file: source } : source;
  const server = new Server(
    { name: SERVER_NAME, version: SERVER_VERSION },
    { capabilities: { tools: {} }, ...(description ? { instructions: instructionsFor(description) } : {}) },
  );
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: skillsOf(from).map(toolOf) }));
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    const name = request.params.name;
    const skill = skillsOf(from).find((s) => s.slug === name);
    if (!skill) {
      const where = from.kind === "manifest" ? `it is not in the manifest ${from.file}` : "it is not one of the skills named by --skills";
      return { isError: true, content: [{ type: "text", text: `No tool "${name}": ${where}.` }] };
    }
    return callTool(client, skill, request.params.arguments ?? {});
  });
  return server;
}

/**
 * Serves over stdin/stdout until the client closes the connection. Before that, one line each on stderr: the key's
 * check (a refused key stops here) and what is served from where (a broken manifest stops here, with its exit code).
 */
export async function runMcpStdio(
  client: SkillGateway,
  source: McpSource,
  options: { cwd: string; log: (line: string) => void },
): Promise<void> {
  options.log(`skill-gateway mcp: ${await checkKey(client)}`);
  const description = describeSource(source, options.cwd);
  options.log(`skill-gateway mcp: ${description}`);
  const server = createMcpServer(client, source, description);
  const closed = new Promise<void>((resolve) => {
    server.onclose = () => resolve();
  });
  const transport = new StdioServerTransport();
  await server.connect(transport);
  process.stdin.on("end", () => void server.close());
  await closed;
}
