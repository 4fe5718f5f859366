import type { SkillGateway } from "@skill-gateway/sdk";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { CallToolRequestSchema, type CallToolResult, ListToolsRequestSchema, type Tool } from "@modelcontextprotocol/sdk/types.js";
import { errorCodeFor, errorMessageFor, pinnedPriceError } from "./errors";
import { type ManifestSkill, pinnedCap, readManifest } from "./manifest";
import { formatUsd } from "./skill-md";

/**
 * `skill-gateway mcp`: the manifest's skills as MCP tools over stdio. The manifest is read on
 * every request, so a skill added or removed while the server runs shows on the next
 * tools/list. Tools keep the skills' own JSON Schemas, so the low-level Server is used rather
 * than McpServer.registerTool, which wants zod schemas.
 */

export const SERVER_NAME = "skill-gateway";
export const SERVER_VERSION = "0.1.0";

/** The MCP tool for a manifest skill: name = slug, the skill's schema (an open object without one), the price in the description. */
export function toolOf(skill: ManifestSkill): Tool {
  const schema = skill.inputSchema as Record<string, unknown> | null;
  const inputSchema = schema ? { ...schema, type: "object" as const } : { type: "object" as const };
  const own = skill.description.trim();
  return {
    name: skill.slug,
    title: skill.name,
    description: `${own ? `${own} ` : ""}Price: ${formatUsd(skill.price)} USD per successful call (failed calls are free), through Skill Gateway.`,
    inputSchema,
  };
}

/**
 * The result of a tool call of a pinned skill: the data (structured when it is an object) and the cost, or isError with
 * the gateway's message. The call carries the price pinned when the skill was added as its max_price: a skill whose
 * price has risen since is refused, uncharged, with a message saying to re-add it to accept the new price.
 */
export async function callTool(client: SkillGateway, skill: ManifestSkill, input: Record<string, unknown>): Promise<CallToolResult> {
  try {
    const { data, metadata } = await client.call(skill.slug, input, { maxPrice: pinnedCap(skill) });
    const cost = `Cost: ${formatUsd(metadata.cost)} USD${metadata.callId ? ` (call ${metadata.callId})` : ""}.`;
    const result: CallToolResult = {
      content: [
        { type: "text", text: JSON.stringify(data) ?? "null" },
        { type: "text", text: cost },
      ],
      _meta: {
        "skill-gateway/cost": metadata.cost,
        "skill-gateway/callId": metadata.callId ?? null,
        ...(metadata.balanceAvailable !== undefined ? { "skill-gateway/balanceAvailable": metadata.balanceAvailable } : {}),
        ...(metadata.keySpendRemaining !== undefined ? { "skill-gateway/keySpendRemaining": metadata.keySpendRemaining } : {}),
      },
    };
    if (typeof data === "object" && data !== null && !Array.isArray(data)) result.structuredContent = data as Record<string, unknown>;
    return result;
  } catch (caught) {
    const error = pinnedPriceError(caught, skill);
    return {
      isError: true,
      content: [{ type: "text", text: `${errorMessageFor(error)} (${errorCodeFor(error)})` }],
      _meta: { "skill-gateway/cost": 0, "skill-gateway/code": errorCodeFor(error) },
    };
  }
}

/** An MCP server (not yet connected) serving the manifest's skills. */
export function createMcpServer(client: SkillGateway, manifestFile: string): Server {
  const server = new Server({ name: SERVER_NAME, version: SERVER_VERSION }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: readManifest(manifestFile).skills.map(toolOf) }));
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    const name = request.params.name;
    const skill = readManifest(manifestFile).skills.find((s) => s.slug === name);
    if (!skill)
      return { isError: true, content: [{ type: "text", text: `No tool "${name}": it is not in the manifest ${manifestFile}.` }] };
    return callTool(client, skill, request.params.arguments ?? {});
  });
  return server;
}

/** Serves over stdin/stdout until the client closes the connection. */
export async function runMcpStdio(client: SkillGateway, manifestFile: string): Promise<void> {
  // Read once up front so a broken manifest fails at start, with one line and an exit code.
  readManifest(manifestFile);
  const server = createMcpServer(client, manifestFile);
  const closed = new Promise<void>((resolve) => {
    server.onclose = () => resolve();
  });
  const transport = new StdioServerTransport();
  await server.connect(transport);
  process.stdin.on("end", () => void server.close());
  await closed;
}
