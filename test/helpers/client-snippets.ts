import path from "node:path";
import ts from "typescript";
import type { DocBlock } from "./doc-snippets";

/**
 * What the packing test (test/e2e/packaging.test.ts) needs to run the clients' documented snippets from a project
 * outside the repository: the documents, what a `given` marker supplies, and how each language runs.
 */

/** Every document with snippets of the clients (docs/clients.md lists them), the READMEs first: their snippets are the ones docs/clients.md repeats. */
export const CLIENT_DOCS = [
  "clients/typescript/README.md",
  "clients/cli/README.md",
  "clients/langchain/README.md",
  "clients/python/README.md",
  "docs/clients.md",
  "docs/mcp.md",
  "docs/x402.md",
] as const;

/**
 * What a snippet marked `given <what>` has from the text around it, by language: the code run before it. A reader
 * has these from the section they read it in (the quick start's `client`, "any tool-calling chat model").
 */
export const GIVEN: Record<string, { ts?: string; py?: string; sh?: string; pyAfter?: string }> = {
  // The quick start's client, from the environment.
  client: {
    ts: 'import { SkillGateway } from "@skill-gateway/sdk";\nconst client = new SkillGateway();\n',
    py: "from skill_gateway import SkillGateway\nclient = SkillGateway()\n",
  },
  // "any tool-calling chat model": @langchain/core's own fake one, which answers with a call of the uppercase tool.
  model: {
    ts: [
      'import { AIMessage } from "@langchain/core/messages";',
      'import { FakeStreamingChatModel } from "@langchain/core/utils/testing";',
      "const model = new FakeStreamingChatModel({",
      '  chunks: [new AIMessage({ content: "", tool_calls: [{ id: "call_1", name: "uppercase", args: { text: "hi" }, type: "tool_call" }] })],',
      "});",
      "",
    ].join("\n"),
  },
  // A key with the keys:manage scope, where each snippet reads it (the CLI: its usual variable).
  "management-key": { ts: "", py: "", sh: "" },
  // A model's tool call (OpenAI's `call`, Anthropic's `block`) of uppercase, and the lists the answers go to.
  "tool-call": {
    py: [
      "from types import SimpleNamespace",
      "from skill_gateway import SkillGateway",
      "client = SkillGateway()",
      'call = SimpleNamespace(name="uppercase", id="call_1")',
      'block = SimpleNamespace(id="toolu_1")',
      'arguments = {"text": "hi"}',
      "messages, blocks = [], []",
      "",
    ].join("\n"),
    // What the snippet appended, for the test to read.
    pyAfter: 'print(messages[0]["content"])\nprint(blocks[0]["content"], blocks[0]["is_error"])\n',
  },
};

/** The language a snippet runs as, by its name's extension. */
export function languageOf(name: string): "mjs" | "ts" | "sh" | "py" | "json" {
  const ext = path.extname(name).slice(1);
  if (ext === "mjs" || ext === "ts" || ext === "sh" || ext === "py" || ext === "json") return ext;
  throw new Error(`A snippet's name says how it runs: ${name} has no .mjs, .ts, .sh, .py or .json`);
}

/**
 * The file to run for a snippet, and what runs it: a TypeScript snippet is compiled as a TypeScript user's build
 * would (types removed, nothing else changed: `ts.transpileModule`, ES modules) and run by node; JavaScript by node;
 * shell by bash (-euo pipefail: any failing command fails the snippet); Python by the virtual environment's.
 */
export function runnable(block: DocBlock & { marker: { kind: "snippet"; name: string; given?: string } }): {
  file: string;
  text: string;
  runner: "node" | "bash" | "python";
} {
  const lang = languageOf(block.marker.name);
  const given = block.marker.given;
  const key = lang === "mjs" ? "ts" : lang;
  if (given !== undefined && (GIVEN[given] === undefined || GIVEN[given][key as "ts" | "py" | "sh"] === undefined))
    throw new Error(`Nothing is given as "${given}" to a ${lang} snippet (${block.marker.name})`);
  const prelude = given !== undefined ? GIVEN[given][key as "ts" | "py" | "sh"]! : "";
  const base = block.marker.name.replace(/\.\w+$/, "");
  switch (lang) {
    case "ts": {
      const compiled = ts.transpileModule(prelude + block.code, {
        compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
        reportDiagnostics: true,
      });
      if (compiled.diagnostics?.length)
        throw new Error(
          `${block.marker.name} is not TypeScript: ${ts.flattenDiagnosticMessageText(compiled.diagnostics[0].messageText, "\n")}`,
        );
      return { file: `${base}.mjs`, text: compiled.outputText, runner: "node" };
    }
    case "mjs":
      return { file: `${base}.mjs`, text: prelude + block.code, runner: "node" };
    case "sh":
      return { file: `${base}.sh`, text: prelude + block.code, runner: "bash" };
    case "py":
      return {
        file: `${base}.py`,
        text: prelude + block.code + (given !== undefined ? (GIVEN[given].pyAfter ?? "") : ""),
        runner: "python",
      };
    case "json":
      throw new Error(`${block.marker.name}: a configuration is checked, not run`);
  }
}
