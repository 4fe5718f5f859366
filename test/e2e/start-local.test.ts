import { type ChildProcess, spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { expect } from "chai";

const ROOT = path.join(__dirname, "../..");

/** Starts `npm start`'s script on a free port and a fresh database, and collects what it prints. */
function startLocal(dbPath: string): Promise<{ child: ChildProcess; output: string }> {
  const child = spawn(process.execPath, ["-r", "ts-node/register/transpile-only", path.join(ROOT, "scripts/start-local.ts")], {
    cwd: ROOT,
    env: { ...process.env, PORT: "0", DB_PATH: dbPath },
    stdio: ["ignore", "pipe", "pipe"],
  });
  return new Promise((resolve, reject) => {
    let output = "";
    child.stdout!.on("data", (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes("Press Ctrl-C to stop.")) resolve({ child, output });
    });
    child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.once("exit", (code) => reject(new Error(`start-local exited with ${code}:\n${output}`)));
  });
}

describe("npm start (the embedded default)", () => {
  let dir: string;
  let child: ChildProcess | undefined;
  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "skill-gw-start-"));
  });
  after(() => {
    child?.kill("SIGKILL");
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("prints a URL, an API key and a curl whose call succeeds with price_paid 0.001, and stops on Ctrl-C", async function () {
    this.timeout(30_000);
    const started = await startLocal(path.join(dir, "gateway.db"));
    child = started.child;
    const key = /^API key: (atom_\S+)$/m.exec(started.output)?.[1];
    expect(key, started.output).to.be.a("string");
    const curl = /^curl -s (\S+) -H "Authorization: Bearer (\S+)" -H "Content-Type: application\/json" -d '(.+)'$/m.exec(started.output);
    expect(curl, started.output).to.not.equal(null);
    const [, url, curlKey, body] = curl!;
    expect(curlKey).to.equal(key);

    const res = await fetch(url, { method: "POST", headers: { authorization: `Bearer ${curlKey}`, "content-type": "application/json" }, body });
    const json: any = await res.json();
    expect(res.status).to.equal(200);
    expect(json.success).to.equal(true);
    expect(json.data).to.deep.equal(JSON.parse(body).input);
    expect(json.metadata).to.include({ skill_id: "echo", price_paid: 0.001 });

    const broken = await fetch(url, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body: JSON.stringify({ skill_id: "broken", input: {} }) });
    expect(broken.status).to.equal(502);
    const balance: any = await (await fetch(url.replace("/v1/call", "/v1/balance"), { headers: { authorization: `Bearer ${key}` } })).json();
    expect(balance.data).to.include({ available: 9.999, held: 0 });

    const exited = new Promise<number | null>((resolve) => child!.once("exit", resolve));
    child.kill("SIGINT");
    expect(await exited).to.equal(0);
    child = undefined;
  });
});
