import { execFileSync } from "node:child_process";
import { expect } from "chai";
import ts from "typescript";
import { SNIPPET_LANGUAGES, pythonLiteral, snippet } from "../../server/web/src/snippets";

/** The getting-started snippets (server/web/src/snippets.ts): each one parses in its own language and carries the key. */
describe("dashboard client snippets (server/web/src/snippets.ts)", () => {
  const target = {
    origin: "http://127.0.0.1:8787/",
    key: "atom_3yQ2Jm6hY8c1T5nRkP9wXe",
    slug: "uppercase",
    input: { text: 'it\'s "quoted" $HOME', n: 1, ok: true, none: null, list: [false] },
  };
  const of = (language: Parameters<typeof snippet>[0]) => snippet(language, target);

  it("offers curl, the TypeScript SDK, Python, the CLI and MCP, each with the key filled in", () => {
    expect(SNIPPET_LANGUAGES.map((l) => l.id)).to.deep.equal(["curl", "typescript", "python", "cli", "mcp"]);
    for (const { id } of SNIPPET_LANGUAGES) expect(of(id), id).to.contain(target.key);
    for (const { id } of SNIPPET_LANGUAGES) expect(of(id), id).to.not.contain("8787//");
  });

  it("writes a curl command whose body reaches the gateway as JSON, unchanged by the shell", () => {
    const argv = execFileSync("sh", [
      "-c",
      `printf '%s\\n' ${of("curl")
        .replace(/^curl -s /, "")
        .replace(/ \\\n/g, " ")}`,
    ]).toString();
    expect(argv.split("\n")).to.include(JSON.stringify({ skill_id: "uppercase", input: target.input }));
    expect(argv).to.contain(`Authorization: Bearer ${target.key}`);
  });

  it("writes TypeScript that parses, calling client.call with the slug and input", () => {
    const file = ts.createSourceFile("first-call.ts", of("typescript"), ts.ScriptTarget.ES2022, true);
    expect((file as unknown as { parseDiagnostics: unknown[] }).parseDiagnostics).to.deep.equal([]);
    expect(of("typescript")).to.contain(`client.call("uppercase", ${JSON.stringify(target.input)})`);
  });

  it("writes Python that parses, with None, True and False for JSON's null, true and false", () => {
    expect(pythonLiteral(target.input)).to.equal(`{"text": "it's \\"quoted\\" $HOME", "n": 1, "ok": True, "none": None, "list": [False]}`);
    execFileSync("python3", ["-c", "import ast, sys; ast.parse(sys.stdin.read())"], { input: of("python") });
  });

  it("writes a CLI call the shell accepts, and an MCP configuration that is JSON naming the skill", () => {
    execFileSync("sh", ["-n"], { input: of("cli") });
    expect(of("cli")).to.contain(`skill-gateway call 'uppercase' --input '`);
    const mcp = JSON.parse(of("mcp")) as { mcpServers: Record<string, { url: string; headers: Record<string, string> }> };
    expect(mcp.mcpServers["skill-gateway"]).to.deep.include({
      url: "http://127.0.0.1:8787/mcp?skills=uppercase",
      headers: { Authorization: `Bearer ${target.key}` },
    });
  });
});
