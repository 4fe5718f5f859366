import { ToolMessage } from "@langchain/core/messages";
import { type DynamicStructuredTool, tool, type ToolRunnableConfig } from "@langchain/core/tools";
import type { JSONSchema } from "@langchain/core/utils/json_schema";
import { type CallMetadata, type SkillGateway, costLine, pinnedCap } from "@skill-gateway/sdk";
import { type SkillToolFailure, failureOf } from "./errors";

/** The JSON Schema of a skill that declares none: any object. */
export const OPEN_SCHEMA = { type: "object", properties: {}, additionalProperties: true } as const;

/** What a tool knows of its skill: from GET /v1/skills/:slug, or pinned in the manifest. */
export interface SkillSpec {
  slug: string;
  name: string;
  description: string;
  /** What a call costs the caller, in USD; for a usage-priced skill, the most a call costs. */
  price: number;
  /** `usage`: each call costs what it used, up to `price` (the description says "up to"). */
  pricing?: "fixed" | "usage";
  inputSchema: unknown;
}

/**
 * The artifact of a tool call (ToolMessage.artifact; the model does not see it): the data and
 * the call's metadata (cost, callId, ...) on success, the failure otherwise.
 */
export type SkillToolArtifact = { ok: true; data: unknown; metadata: CallMetadata } | { ok: false; error: SkillToolFailure };

/** A Skill Gateway skill as a LangChain tool: `content_and_artifact`, content a string. */
export type SkillTool = DynamicStructuredTool<JSONSchema, Record<string, unknown>, Record<string, unknown>, string | ToolMessage>;

export function formatUsd(usd: number): string {
  return `$${Number(usd.toPrecision(12))}`;
}

/** The tool's description: the skill's own words, then its price. */
export function describe(spec: SkillSpec): string {
  const own = spec.description.replace(/\s+/g, " ").trim();
  const price = `Price: ${spec.pricing === "usage" ? "up to " : ""}${formatUsd(spec.price)} USD per successful call (failed calls are free), through Skill Gateway.`;
  return own ? `${own} ${price}` : price;
}

/** The tool's argument schema: the skill's JSON Schema as an object schema, or OPEN_SCHEMA. */
export function schemaOf(inputSchema: unknown): JSONSchema {
  if (typeof inputSchema !== "object" || inputSchema === null || Array.isArray(inputSchema)) return { ...OPEN_SCHEMA };
  return { ...(inputSchema as Record<string, unknown>), type: "object" } as JSONSchema;
}

/**
 * What LangChain checks a tool's arguments against before the call: any input. LangChain refuses arguments that break
 * the tool's schema with one generic sentence ("Received tool input did not match expected schema") thrown at the
 * agent, so a model never learns which argument was wrong; the gateway checks the same schema and answers 400 with the
 * field and the reason, which the tool returns to the model (failureOf) uncharged. The model is still shown the
 * skill's schema (`tool.schema`, what bindTools sends).
 */
const ANY_INPUT = {} as JSONSchema;

/**
 * Makes `made` check its arguments against ANY_INPUT, leaving the skill's schema as the one it shows. LangChain's
 * StructuredTool.call validates synchronously against `this.schema` before its first await (for a JSON Schema): the
 * open schema is in place for exactly that check, and the skill's is back before anything else can read it.
 */
function checkedByTheGateway(made: SkillTool): SkillTool {
  const shown = made.schema;
  const call = made.call.bind(made) as (...args: unknown[]) => Promise<unknown>;
  made.call = ((...args: unknown[]) => {
    made.schema = ANY_INPUT;
    try {
      return call(...args);
    } finally {
      made.schema = shown;
    }
  }) as typeof made.call;
  return made;
}

/**
 * The tool for a known skill (no network until it is called). A call returns the skill's data
 * as a JSON string; an expected failure (400, 402, 409 price_above_max, 429, 502) returns one line
 * the model can act on (a bad argument: the gateway's words naming it, not LangChain's generic refusal), as a ToolMessage with status "error" when invoked with a ToolCall; other
 * failures throw. Every call carries `spec.price`, the price the description states, as its
 * max_price: a skill whose price has risen since is refused, uncharged, rather than charged more
 * than the model was told (a free skill is held to SMALLEST_CAP_USD, as a cap must be above 0).
 */
/** How a tool reports its calls. */
export interface SkillToolOptions {
  /**
   * Add the cost line after the data in what the model reads ("Charged $0.001 for echo (call <id>)." or, for a
   * replay, "Already paid: ... (replayed)."), the hosted and stdio MCP servers' words. Default false: the data alone;
   * the artifact has the metadata either way.
   */
  costNote?: boolean;
}

export function toolFromSpec(client: SkillGateway, spec: SkillSpec, options: SkillToolOptions = {}): SkillTool {
  const maxPrice = pinnedCap(spec);
  const run = async (input: Record<string, unknown>, config?: ToolRunnableConfig): Promise<[string | ToolMessage, SkillToolArtifact]> => {
    try {
      // Whatever the model sent: the gateway checks it against the skill's schema (see ANY_INPUT).
      const { data, metadata } = await client.call(spec.slug, (input ?? {}) as object, { signal: config?.signal, maxPrice });
      const text = JSON.stringify(data) ?? "null";
      return [options.costNote ? `${text}\n${costLine(metadata)}` : text, { ok: true, data, metadata }];
    } catch (error) {
      const failure = failureOf(error, spec.slug);
      if (!failure) throw error;
      const artifact: SkillToolArtifact = { ok: false, error: failure };
      const toolCallId = config?.toolCall?.id;
      // A ToolMessage returned as the content is passed through as is: the only way to mark it an error.
      if (toolCallId)
        return [
          new ToolMessage({ status: "error", content: failure.message, artifact, tool_call_id: toolCallId, name: spec.slug }),
          artifact,
        ];
      return [failure.message, artifact];
    }
  };
  const made = tool(run, {
    name: spec.slug,
    description: describe(spec),
    schema: schemaOf(spec.inputSchema),
    responseFormat: "content_and_artifact",
  }) as unknown as SkillTool;
  return checkedByTheGateway(made);
}

/**
 * The tool for a skill of the marketplace: fetches it (GET /v1/skills/:slug) for its name, description, price and schema.
 * The price fetched now is the tool's: its calls are held to it.
 */
export async function skillTool(client: SkillGateway, slug: string, options: SkillToolOptions = {}): Promise<SkillTool> {
  const skill = await client.skills.get(slug);
  return toolFromSpec(
    client,
    {
      slug: skill.slug,
      name: skill.name,
      description: skill.description,
      price: skill.price_per_call,
      ...(skill.pricing === "usage" ? { pricing: "usage" as const } : {}),
      inputSchema: skill.input_schema,
    },
    options,
  );
}
