import { execFileSync } from "node:child_process";
import { expect } from "chai";
import { curlForCall, curlForSkillCall, shellQuote } from "../../server/web/src/curl";

describe("dashboard curl examples (server/web/src/curl.ts)", () => {
  it("calls POST /v1/call with skill_id and input, the key as $ATOM_KEY", () => {
    expect(curlForCall("http://127.0.0.1:8787", "echo", { text: "hi" })).to.equal(
      [
        "curl -X POST 'http://127.0.0.1:8787/v1/call' \\",
        '  -H "Authorization: Bearer $ATOM_KEY" \\',
        "  -H 'Content-Type: application/json' \\",
        `  -d '{"skill_id":"echo","input":{"text":"hi"}}'`,
      ].join("\n"),
    );
  });

  it("calls POST /v1/skills/:skillId/call with the input as the whole body", () => {
    const command = curlForSkillCall("https://gw.example/", "echo", { text: "hi" });
    expect(command).to.contain("'https://gw.example/v1/skills/echo/call'");
    expect(command).to.contain(`-d '{"text":"hi"}'`);
  });

  it("quotes single quotes so the shell passes the JSON through unchanged", () => {
    const input = { text: "it's $HOME `id`" };
    const quoted = shellQuote(JSON.stringify(input));
    expect(execFileSync("sh", ["-c", `printf %s ${quoted}`]).toString()).to.equal(JSON.stringify(input));
  });
});
