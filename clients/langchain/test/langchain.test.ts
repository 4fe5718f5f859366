// In a clone the SDK is not built: its source stands in (clients/typescript/source.cjs).
import "../../typescript/source.cjs";
import fs from "node:fs";
import path from "node:path";
import { ToolMessage } from "@langchain/core/messages";
import { isStructuredTool } from "@langchain/core/tools";
import { ManifestError, SkillGateway, failureText, priceAboveCapText, readManifest } from "@skill-gateway/sdk";
import { expect } from "chai";
import { type TestStack, startStack } from "../../../test/helpers/gateway";
import { scratchDirs } from "../../../test/helpers/scratch-dirs";
import { type SkillToolArtifact, OPEN_SCHEMA, failureOf, skillTool, skillToolkit } from "../src";

async function rejectionOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected a rejection");
}

const UPPERCASE_SCHEMA = { type: "object", properties: { text: { type: "string" } }, required: ["text"], additionalProperties: false };

const scratch = scratchDirs("sg-langchain-");
after(() => scratch.removeAll());

describe("@skill-gateway/langchain against a real gateway", function () {
  let stack: TestStack;
  let client: SkillGateway;

  before(async function () {
    stack = await startStack();
    await stack.addSkill("uppercase", "/echo", {
      description: "Echoes text: a stand-in for an upper-casing skill.",
      priceMicros: 2_000n,
      inputSchema: UPPERCASE_SCHEMA,
    });
    await stack.addSkill("limited", "/echo", { priceMicros: 1_000n, rateLimitPerMin: 1 });
    // No retries: a 502 or a 429 reaches the tool at once.
    client = new SkillGateway({ apiKey: stack.key, baseUrl: stack.url, maxRetries: 0 });
  });
  after(async function () {
    await stack?.close();
  });

  it("makes a real @langchain/core tool whose name, description (with the price) and schema come from the skill", async function () {
    const uppercase = await skillTool(client, "uppercase");
    expect(isStructuredTool(uppercase)).to.equal(true);
    expect(uppercase.name).to.equal("uppercase");
    expect(uppercase.description).to.equal(
      "Echoes text: a stand-in for an upper-casing skill. Price: $0.002 USD per successful call (failed calls are free), through Skill Gateway.",
    );
    expect(uppercase.schema).to.deep.equal(UPPERCASE_SCHEMA);
    expect(uppercase.responseFormat).to.equal("content_and_artifact");

    const echo = await skillTool(client, "echo");
    expect(echo.description).to.match(/^Price: \$0\.001 USD per successful call/);
    expect(echo.schema).to.deep.equal(OPEN_SCHEMA);
  });

  it("tool.invoke(args) returns the skill's data as JSON and charges exactly the price", async function () {
    const echo = await skillTool(client, "echo");
    const before = await stack.available();
    const out = await echo.invoke({ text: "hi", n: 2 });
    expect(typeof out).to.equal("string");
    expect(JSON.parse(out as string)).to.deep.include({ text: "hi", n: 2 });
    expect(before - (await stack.available())).to.equal(1_000n);
  });

  it("with costNote, adds the MCP servers' cost line after the data (an option of the toolkit)", async function () {
    const [echo] = await skillToolkit(client, { slugs: ["echo"], costNote: true });
    const out = (await echo.invoke({ text: "hi" })) as string;
    const [data, cost] = out.split("\n");
    expect(JSON.parse(data)).to.deep.include({ text: "hi" });
    expect(cost).to.match(/^Charged \$0\.001 for echo \(call [0-9a-f-]{36}\)\.$/);
    expect(await (await skillTool(client, "echo")).invoke({ text: "hi" })).to.not.include("Charged");
  });

  it("a ToolCall produces a ToolMessage with the call id, the data as content and the cost in the artifact", async function () {
    const uppercase = await skillTool(client, "uppercase");
    const before = await stack.available();
    const message = await uppercase.invoke({ id: "call_1", name: "uppercase", args: { text: "hello" }, type: "tool_call" });
    expect(message).to.be.instanceOf(ToolMessage);
    const tm = message as ToolMessage;
    expect(tm.tool_call_id).to.equal("call_1");
    expect(tm.name).to.equal("uppercase");
    expect(tm.status).to.equal("success");
    expect(JSON.parse(tm.content as string)).to.deep.include({ text: "hello" });
    const artifact = tm.artifact as SkillToolArtifact;
    expect(artifact.ok).to.equal(true);
    if (artifact.ok) expect(artifact.metadata.cost).to.equal(0.002);
    expect(before - (await stack.available())).to.equal(2_000n);
  });

  it("a bad argument reaches the model as the gateway's field-level message, not LangChain's generic refusal; nothing is charged", async function () {
    const uppercase = await skillTool(client, "uppercase");
    const before = await stack.available();
    const out = (await uppercase.invoke({ wrong: 1 } as Record<string, unknown>)) as string;
    // The gateway's 400 names what is wrong (the required text, the unexpected wrong), in the SDK's words for a model.
    expect(out).to.not.include("did not match expected schema");
    expect(out).to.match(/^Input does not match the skill's schema: .*text.* Nothing was charged\. Fix the arguments and call again\.$/);
    expect(out).to.equal(failureText(await rejectionOf(client.call("uppercase", { wrong: 1 }))));

    const message = (await uppercase.invoke({ id: "call_5", name: "uppercase", args: { text: 7 }, type: "tool_call" })) as ToolMessage;
    expect(message.status).to.equal("error");
    expect(message.content).to.match(/^Input does not match the skill's schema: .*text.*string/);
    const artifact = message.artifact as SkillToolArtifact;
    expect(artifact.ok ? null : [artifact.error.status, artifact.error.code]).to.deep.equal([400, "invalid_input"]);
    expect(await stack.available()).to.equal(before);
    // The model is still shown the skill's own schema.
    expect(uppercase.schema).to.deep.equal(UPPERCASE_SCHEMA);
  });

  it("a zero balance reaches the model as a clear insufficient-balance message; nothing is charged", async function () {
    const broke = await stack.addBuyer("0");
    const poor = new SkillGateway({ apiKey: broke.key, baseUrl: stack.url, maxRetries: 0 });
    const echo = await skillTool(poor, "echo");
    const out = await echo.invoke({ text: "hi" });
    expect(out).to.be.a("string");
    // Each thing said once, in the SDK's words (tool-text.ts): the gateway's numbers and its "Add funds.", not prefixed again.
    expect(out).to.equal("Insufficient balance: this call costs $0.001 and $0.00 is available. Add funds. Nothing was charged.");
    expect(out as string).not.to.include("\n");

    const message = (await echo.invoke({ id: "call_2", name: "echo", args: { text: "hi" }, type: "tool_call" })) as ToolMessage;
    expect(message).to.be.instanceOf(ToolMessage);
    expect(message.tool_call_id).to.equal("call_2");
    expect(message.status).to.equal("error");
    expect(message.content).to.match(/^Insufficient balance: /);
    expect((message.artifact as SkillToolArtifact).ok).to.equal(false);
    expect(await stack.available(broke.accountId)).to.equal(0n);
  });

  it("a key's spending limit reaches the model as its own message, not as one to add funds; nothing is charged", async function () {
    // The limit covers one call of echo ($0.001), not two.
    const limited = await stack.gw.keys.create(stack.buyerId, { spendLimit: { limitMicros: 1_500n, period: "day" } });
    const capped = new SkillGateway({ apiKey: limited.key, baseUrl: stack.url, maxRetries: 0 });
    const echo = await skillTool(capped, "echo");
    expect(
      ((await echo.invoke({ id: "call_3", name: "echo", args: { text: "hi" }, type: "tool_call" })) as ToolMessage).status,
    ).to.not.equal("error");
    const before = await stack.available();
    const message = (await echo.invoke({ id: "call_4", name: "echo", args: { text: "hi" }, type: "tool_call" })) as ToolMessage;
    expect(message.status).to.equal("error");
    expect(message.content).to.match(
      /^This key's spending limit of \$0\.0015 per day is reached \(.*\); it resets at \S+Z\. Nothing was charged\. Paid calls with this API key are refused until the limit allows them\.$/,
    );
    const artifact = message.artifact as SkillToolArtifact;
    expect(artifact.ok ? null : [artifact.error.status, artifact.error.code]).to.deep.equal([402, "key_spend_limit_reached"]);
    expect(await stack.available()).to.equal(before);
  });

  it("a failing skill (502) reaches the model as a clear message; nothing is charged", async function () {
    const fail = await skillTool(client, "fail");
    const before = await stack.available();
    const out = await fail.invoke({});
    // The gateway's message already says "You were not charged.": not said twice.
    expect(out as string).to.match(/^Skill error: .*\. You were not charged\. You may retry, or do without it\.$/);
    const message = (await fail.invoke({ id: "call_3", name: "fail", args: {}, type: "tool_call" })) as ToolMessage;
    expect(message.status).to.equal("error");
    expect(message.tool_call_id).to.equal("call_3");
    const artifact = message.artifact as SkillToolArtifact;
    expect(artifact.ok ? null : artifact.error.status).to.equal(502);
    expect(await stack.available()).to.equal(before);
  });

  it("input the skill's backend refuses (400) reaches the model as a clear message; nothing is charged", async function () {
    const reject = await skillTool(client, "reject");
    const before = await stack.available();
    const out = await reject.invoke({});
    expect(out as string).to.match(/^field x is required\. Nothing was charged\. Fix the arguments and call again\.$/);
    expect(await stack.available()).to.equal(before);
  });

  it("a rate limit reaches the model as a clear message", async function () {
    const limited = await skillTool(client, "limited");
    await limited.invoke({ n: 1 });
    const before = await stack.available();
    const out = await limited.invoke({ n: 2 });
    expect(out as string).to.match(
      /^Rate limit exceeded: 1 calls per minute for this skill "limited"\. Nothing was charged\. Retry (after \d+ s|later)\.$/,
    );
    expect(await stack.available()).to.equal(before);
  });

  it("holds every call to the price the tool was made at: a higher one reaches the model as a clear message; nothing is charged", async function () {
    await stack.addSkill("rising", "/echo", { priceMicros: 1_000n });
    const fetched = await skillTool(client, "rising");
    const [pinnedTool] = await skillToolkit(client, { manifest: writeManifest([pinned("rising", 0.001, null)]) });
    expect(JSON.parse((await fetched.invoke({ n: 1 })) as string)).to.deep.equal({ n: 1 });
    await stack.addSkill("rising", "/echo", { priceMicros: 200_000n });
    const before = await stack.available();
    for (const tool of [fetched, pinnedTool]) {
      const message = (await tool.invoke({ id: "call_9", name: "rising", args: { n: 2 }, type: "tool_call" })) as ToolMessage;
      expect(message.status).to.equal("error");
      // Not the gateway's advice (a higher max_price, which a model cannot send): only the tool's owner can accept it.
      expect(message.content).to.equal(
        'The skill "rising" now costs $0.2 per call, more than the $0.001 cap its tool was given: nothing was charged. You cannot raise the cap: tell your owner, who must re-add the skill to accept the new price, and do without it until then.',
      );
      const artifact = message.artifact as SkillToolArtifact;
      expect(artifact.ok ? null : [artifact.error.status, artifact.error.code]).to.deep.equal([409, "price_above_max"]);
    }
    expect(await stack.available()).to.equal(before);
    // A tool made again takes the new price, and its calls go through.
    const remade = await skillTool(client, "rising");
    expect(remade.description).to.contain("$0.2 USD");
    expect(JSON.parse((await remade.invoke({ n: 3 })) as string)).to.deep.equal({ n: 3 });
    expect(before - (await stack.available())).to.equal(200_000n);
  });

  it("says each thing once, in the SDK's words (failureText), and reports only what the model can act on", function () {
    const error = (status: number, code: string, message: string, extra: object = {}) =>
      Object.assign(new Error(message), { status, code, ...extra });
    const frozen = "Insufficient balance: an exit from the escrow is pending for this account, and its money is frozen.";
    const cases: Array<[Error, string]> = [
      [error(402, "insufficient_balance", frozen), `${frozen} Nothing was charged.`],
      [
        error(429, "daily_limit_reached", "Daily call limit of 5 reached; it resets at 00:00 UTC."),
        "Daily call limit of 5 reached; it resets at 00:00 UTC. Nothing was charged. Retry later.",
      ],
      [
        error(429, "rate_limited", "Rate limit exceeded.", { retryAfterMs: 2_100 }),
        "Rate limit exceeded. Nothing was charged. Retry after 3 s.",
      ],
      [
        error(502, "skill_error", "Skill error: HTTP 503. You were not charged."),
        "Skill error: HTTP 503. You were not charged. You may retry, or do without it.",
      ],
    ];
    for (const [e, text] of cases) {
      expect(failureOf(e, "echo")?.message).to.equal(text);
      expect(failureOf(e, "echo")?.message).to.equal(failureText(e));
    }
    expect(failureOf(error(429, "rate_limited", "m", { retryAfterMs: 2_100 }), "echo")?.retryAfterMs).to.equal(2_100);
    expect(failureOf(error(409, "price_above_max", "m", { price: 0.2, maxPrice: 0.001 }), "echo")).to.deep.equal({
      code: "price_above_max",
      status: 409,
      message: priceAboveCapText("echo", 0.2, 0.001),
    });
    expect(failureOf(error(409, "idempotency_key_in_use", "m"), "echo")).to.equal(null);
    expect(failureOf(error(401, "invalid_api_key", "m"), "echo")).to.equal(null);
  });

  it("errors the model cannot fix throw: an unknown skill, a bad key", async function () {
    let thrown: unknown;
    try {
      await skillTool(client, "no-such-skill");
    } catch (error) {
      thrown = error;
    }
    expect((thrown as { status?: number })?.status).to.equal(404);

    const echo = await skillTool(client, "echo");
    const badKeyEcho = (
      await skillToolkit(new SkillGateway({ apiKey: "atom_nope", baseUrl: stack.url, maxRetries: 0 }), {
        manifest: writeManifest([pinned("echo", 0.001, null)]),
      })
    )[0];
    thrown = undefined;
    try {
      await badKeyEcho.invoke({});
    } catch (error) {
      thrown = error;
    }
    expect((thrown as { status?: number })?.status).to.equal(401);
    expect(failureOf(new Error("boom"), "echo")).to.equal(null);
    expect(echo.name).to.equal("echo");
  });

  it("a toolkit from the CLI's manifest uses the pinned schema and price, and calls the gateway", async function () {
    const file = writeManifest([pinned("uppercase", 0.002, UPPERCASE_SCHEMA), pinned("echo", 0.001, null)]);
    const tools = await skillToolkit(client, { manifest: file });
    expect(tools.map((t) => t.name)).to.deep.equal(["uppercase", "echo"]);
    expect(tools[0].schema).to.deep.equal(UPPERCASE_SCHEMA);
    expect(tools[0].description).to.include("Price: $0.002 USD per successful call");
    expect(tools[1].schema).to.deep.equal(OPEN_SCHEMA);
    const before = await stack.available();
    const message = (await tools[0].invoke({ id: "call_4", name: "uppercase", args: { text: "x" }, type: "tool_call" })) as ToolMessage;
    expect(message.tool_call_id).to.equal("call_4");
    expect(JSON.parse(message.content as string)).to.deep.include({ text: "x" });
    expect(before - (await stack.available())).to.equal(2_000n);
  });

  it("a toolkit's default manifest is ./skill-gateway.json; a missing one is a clear error", async function () {
    const dir = path.dirname(writeManifest([pinned("echo", 0.001, null)]));
    const cwd = process.cwd();
    try {
      process.chdir(dir);
      expect((await skillToolkit(client)).map((t) => t.name)).to.deep.equal(["echo"]);
    } finally {
      process.chdir(cwd);
    }
    let thrown: unknown;
    try {
      await skillToolkit(client, { manifest: path.join(dir, "missing.json") });
    } catch (error) {
      thrown = error;
    }
    expect((thrown as Error)?.message).to.match(
      /^No Skill Gateway manifest at .*missing\.json: add skills with `skill-gateway add <slug>`/,
    );
  });

  it("reads the manifest with the SDK's reader, the CLI's: what it refuses, the toolkit refuses in the same words", async function () {
    const file = writeManifest([pinned("echo", 0.001, null), pinned("echo", 0.002, null)]);
    let thrown: unknown;
    try {
      await skillToolkit(client, { manifest: file });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).to.be.instanceOf(ManifestError);
    expect((thrown as Error).message).to.equal(`The manifest ${file} is invalid: skill echo appears twice.`);
    expect(() => readManifest(file)).to.throw((thrown as Error).message);
  });

  it("a toolkit from slugs fetches each skill", async function () {
    const tools = await skillToolkit(client, { slugs: ["echo", "uppercase"] });
    expect(tools.map((t) => [t.name, t.schema])).to.deep.equal([
      ["echo", OPEN_SCHEMA],
      ["uppercase", UPPERCASE_SCHEMA],
    ]);
    expect(JSON.parse((await tools[1].invoke({ text: "y" })) as string)).to.deep.include({ text: "y" });
  });
});

/** A manifest skill in the CLI's format (clients/cli/src/manifest.ts). */
function pinned(slug: string, price: number, inputSchema: object | null) {
  return {
    id: `id-${slug}`,
    slug,
    name: slug,
    description: slug === "uppercase" ? "Echoes text: a stand-in for an upper-casing skill." : "",
    price,
    currency: "USD",
    inputSchema,
    agent: "claude",
    addedAt: new Date(0).toISOString(),
    files: [],
    dirs: [],
  };
}

function writeManifest(skills: object[]): string {
  const dir = scratch.make();
  const file = path.join(dir, "skill-gateway.json");
  fs.writeFileSync(file, `${JSON.stringify({ version: 1, skills }, null, 2)}\n`);
  return file;
}
