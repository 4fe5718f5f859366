import fs from "node:fs";
import path from "node:path";
import { expect } from "chai";
import { configEnvNames } from "../server/config";

/** The environment variable names written in server/config.ts: `env.NAME`, and "NAME" passed to a reader. */
function namesWrittenInConfig(): string[] {
  const source = fs.readFileSync(path.join(__dirname, "../server/config.ts"), "utf8");
  const names = new Set<string>();
  for (const match of source.matchAll(/\benv\.([A-Z][A-Z0-9_]*)\b|"([A-Z][A-Z0-9_]*)"/g)) names.add(match[1] ?? match[2]);
  return [...names].sort();
}

describe("configEnvNames", () => {
  it("names every environment variable server/config.ts reads, each once", () => {
    const names = configEnvNames();
    expect(new Set(names).size).to.equal(names.length);
    expect([...names].sort()).to.deep.equal(namesWrittenInConfig());
    expect(names).to.include.members(["RATE_LIMIT_PER_MIN", "FEE_MODE", "REQUEST_TIMEOUT_MS", "METRICS_TOKEN", "COOKIE_SECURE"]);
  });
});
