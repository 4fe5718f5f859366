import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { expect } from "chai";

/**
 * The review saw `kill -9` of npm start leave the Alto bundler running, listening on 0.0.0.0.
 * Here a parent process spawns a guarded child (server/devstack/child-process.ts) whose servers
 * ask for every interface, and is then killed with SIGKILL: the child must listen on loopback
 * only, and must go.
 */
describe("spawnGuarded (the children of npm start)", () => {
  let dir: string;
  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "skill-gw-guard-"));
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  const alive = (pid: number) => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };

  it("binds the child's servers to 127.0.0.1 and ends the child when its parent is killed with SIGKILL", async function () {
    this.timeout(30_000);
    const child = path.join(dir, "child.js");
    // Three ways a program asks for every interface: no host, 0.0.0.0 in an options object (Alto's), and "::".
    fs.writeFileSync(
      child,
      `const net = require("node:net");
       const addresses = [];
       const done = () => addresses.length === 3 && console.log(JSON.stringify({ pid: process.pid, addresses }));
       const a = net.createServer().listen(0, () => { addresses.push(a.address().address); done(); });
       const b = net.createServer().listen({ port: 0, host: "0.0.0.0" }, () => { addresses.push(b.address().address); done(); });
       const c = net.createServer().listen(0, "::", () => { addresses.push(c.address().address); done(); });`,
    );
    const parentScript = `require(${JSON.stringify(path.resolve(__dirname, "../../server/devstack/child-process.ts"))}).spawnGuarded(${JSON.stringify(child)}, [], { stdio: "inherit" }); setInterval(() => {}, 1000);`;
    const parent = spawn(process.execPath, ["-r", "ts-node/register/transpile-only", "-e", parentScript], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    const report = await new Promise<{ pid: number; addresses: string[] }>((resolve, reject) => {
      let out = "";
      parent.stdout!.on("data", (chunk: Buffer) => {
        out += chunk.toString();
        if (out.includes("\n")) resolve(JSON.parse(out.split("\n")[0]));
      });
      parent.once("exit", (code) => reject(new Error(`parent exited early with ${code}`)));
    });
    expect(report.addresses).to.deep.equal(["127.0.0.1", "127.0.0.1", "127.0.0.1"]);
    expect(alive(report.pid)).to.equal(true);

    parent.removeAllListeners("exit");
    parent.kill("SIGKILL");
    // The guard polls four times a second; wait up to 10 s (a failure, not a timing: a child that stays is the bug).
    for (let i = 0; i < 100 && alive(report.pid); i++) await new Promise((resolve) => setTimeout(resolve, 100));
    const stillAlive = alive(report.pid);
    if (stillAlive) process.kill(report.pid, "SIGKILL");
    expect(stillAlive, "the child outlived its parent").to.equal(false);
  });
});
