// In a clone the SDK is not built: its source stands in (clients/typescript/source.cjs).
import "../../typescript/source.cjs";
import { execFile } from "node:child_process";
import fs from "node:fs";
import { expect } from "chai";
import { type TestStack, startStack } from "../../../test/helpers/gateway";
import { scratchDirs } from "../../../test/helpers/scratch-dirs";
import { EXIT } from "../src/errors";
import { collectMeta, keyParams, parseExpiry, parseScopes } from "../src/keys";
import { buildCli } from "./built-cli";

/** The CLI as its package ships it, bundled once for this file (./built-cli.ts): each run starts in a fraction of a second. */
let built: { launcher: string; dir: string } | undefined;
const scratch = scratchDirs("sg-cli-keys-");
after(() => scratch.removeAll());

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the real CLI as a child process with `key` as SKILL_GATEWAY_API_KEY. */
function cli(stack: TestStack, key: string, args: string[]): Promise<Run> {
  const cwd = scratch.make();
  return new Promise((resolve) => {
    const env = { ...process.env, SKILL_GATEWAY_URL: stack.url, SKILL_GATEWAY_API_KEY: key };
    const child = execFile(process.execPath, [built!.launcher, ...args], { cwd, env }, (error, stdout, stderr) => {
      resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
    child.stdin?.end("");
  });
}

describe("skill-gateway keys: its options", () => {
  it("reads --expires as a day (its end, UTC), a time with its offset, or days from now", () => {
    const nowMs = Date.parse("2026-11-21T10:00:00Z");
    expect(parseExpiry("2026-12-31", nowMs)).to.equal("2027-01-01T00:00:00.000Z");
    expect(parseExpiry("2026-12-31T18:00:00+01:00", nowMs)).to.equal("2026-12-31T18:00:00+01:00");
    expect(parseExpiry("30d", nowMs)).to.equal("2026-12-21T10:00:00.000Z");
    for (const bad of ["tomorrow", "2026-12-31T18:00:00", "31/12/2026", "1000d"])
      expect(() => parseExpiry(bad, nowMs), bad).to.throw(/--expires must be/);
  });

  it("reads --scopes from the vocabulary, and collects --meta name=value pairs", () => {
    expect(parseScopes("calls,usage:read")).to.deep.equal(["calls", "usage:read"]);
    expect(() => parseScopes("calls,admin")).to.throw('not "admin"');
    expect(collectMeta("query=a=b", collectMeta("agent=r7"))).to.deep.equal({ agent: "r7", query: "a=b" });
    expect(() => collectMeta("agent")).to.throw(/name=value/);
    expect(() => collectMeta("agent=2", { agent: "1" })).to.throw(/given twice/);
  });

  it("turns the lifts into nulls, and refuses --skills with --all-skills", () => {
    expect(keyParams({ allSkills: true, expires: false, limit: false, meta: false })).to.deep.equal({
      allowedSkills: null,
      expiresAt: null,
      spendLimitUsd: null,
      metadata: null,
    });
    expect(keyParams({})).to.deep.equal({});
    expect(() => keyParams({ skills: ["echo"], allSkills: true })).to.throw(/opposite/);
  });
});

describe("skill-gateway keys against a real gateway", function () {
  this.timeout(60_000);
  let stack: TestStack;
  let manager: string;

  before(async () => {
    built = await buildCli();
    stack = await startStack();
    manager = (await stack.gw.keys.create(stack.buyerId, { name: "provisioner", scopes: ["keys:manage"] })).key;
  });
  after(async () => {
    await stack?.close();
    if (built) fs.rmSync(built.dir, { recursive: true, force: true });
  });

  it("creates a key (the key alone on stdout), lists, updates and revokes it", async () => {
    const created = await cli(stack, manager, [
      "keys",
      "create",
      "--name",
      "agent for u_42",
      "--skills",
      "echo",
      "--expires",
      "30d",
      "--limit",
      "0.50",
      "--period",
      "day",
      "--meta",
      "agent=researcher-7",
      "--meta",
      "end_user=u_42",
    ]);
    expect(created.code, created.stderr).to.equal(EXIT.ok);
    const key = created.stdout.trim();
    expect(key).to.match(/^atom_[1-9A-HJ-NP-Za-km-z]+$/);
    const record = (await stack.gw.keys.authenticate(key))!;
    expect(created.stderr).to.equal(`made ${record.id} (calls); the key is shown this once:\n`);
    expect(record).to.deep.include({
      name: "agent for u_42",
      allowedSkills: ["echo"],
      metadata: { agent: "researcher-7", end_user: "u_42" },
    });
    expect((await stack.post("/v1/call", { skill_id: "echo", input: {} }, { key })).status).to.equal(200);

    const listed = await cli(stack, manager, ["keys", "list"]);
    expect(listed.code, listed.stderr).to.equal(EXIT.ok);
    const line = listed.stdout.split("\n").find((l) => l.startsWith(record.id))!;
    expect(line).to.match(/agent for u_42\s+calls\s+echo\s+\$0\.5\/day\s+\S+Z\s+agent=researcher-7 end_user=u_42$/);
    const json = JSON.parse((await cli(stack, manager, ["keys", "list", "--json"])).stdout) as { id: string; metadata: object }[];
    expect(json.find((k) => k.id === record.id)!.metadata).to.deep.equal({ agent: "researcher-7", end_user: "u_42" });

    const updated = await cli(stack, manager, [
      "keys",
      "update",
      record.id,
      "--all-skills",
      "--no-expires",
      "--meta",
      "agent=researcher-8",
      "--json",
    ]);
    expect(updated.code, updated.stderr).to.equal(EXIT.ok);
    expect(JSON.parse(updated.stdout)).to.deep.include({ allowed_skills: null, expires_at: null, metadata: { agent: "researcher-8" } });
    const nothing = await cli(stack, manager, ["keys", "update", record.id]);
    expect([nothing.code, nothing.stderr]).to.deep.equal([
      EXIT.usage,
      "skill-gateway: Nothing to change: give at least one option (see skill-gateway keys update --help).\n",
    ]);

    const revoked = await cli(stack, manager, ["keys", "revoke", record.id]);
    expect([revoked.code, revoked.stdout]).to.deep.equal([EXIT.ok, `revoked ${record.id}\n`]);
    expect((await stack.post("/v1/call", { skill_id: "echo", input: {} }, { key })).status).to.equal(401);
    expect((await cli(stack, manager, ["keys", "revoke", record.id])).code).to.equal(EXIT.notFound);
  });

  it("prints the gateway's refusal on one line, with its code under --json, and makes nothing", async () => {
    const before = (await stack.gw.keys.listForAccount(stack.buyerId)).length;
    const refused = await cli(stack, manager, ["keys", "create", "--scopes", "calls,keys:manage"]);
    expect(refused.code).to.equal(EXIT.forbidden);
    expect(refused.stderr).to.equal(
      "skill-gateway: A keys:manage key cannot give a key the keys:manage scope: only a dashboard session can.\n",
    );
    const json = await cli(stack, manager, ["keys", "create", "--scopes", "funds:withdraw", "--json"]);
    expect(JSON.parse(json.stderr)).to.deep.include({ code: "authority_exceeded" });
    // A key without keys:manage: 403 scope_missing.
    const caller = await cli(stack, stack.key, ["keys", "list"]);
    expect([caller.code, caller.stderr]).to.satisfy(
      ([code, stderr]: [number, string]) => code === EXIT.forbidden && /lacks the keys:manage scope/.test(stderr),
    );
    // Options refused before anything is sent.
    for (const args of [
      ["--expires", "tomorrow"],
      ["--meta", "agent"],
      ["--scopes", "admin"],
      ["--period", "week"],
    ]) {
      const bad = await cli(stack, manager, ["keys", "create", ...args]);
      expect(bad.code, args.join(" ")).to.equal(EXIT.usage);
    }
    expect((await stack.gw.keys.listForAccount(stack.buyerId)).length).to.equal(before);
  });
});
