import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { expect } from "chai";
import Redis from "ioredis";
import { type RedisServer, rejection, skipWithoutRedis, startRedis } from "../helpers/redis";

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

async function info(url: string): Promise<Record<string, string>> {
  const client = new Redis(url, { lazyConnect: true, retryStrategy: () => null });
  try {
    await client.connect();
    const text = await client.info("server");
    const config = await client.config("GET", "*");
    const fields: Record<string, string> = {};
    for (const line of text.split("\r\n")) {
      const colon = line.indexOf(":");
      if (colon > 0) fields[line.slice(0, colon)] = line.slice(colon + 1);
    }
    const pairs = config as string[];
    for (let i = 0; i < pairs.length; i += 2) fields[`config:${pairs[i]}`] = pairs[i + 1];
    return fields;
  } finally {
    client.disconnect();
  }
}

describe("startRedis (test/helpers/redis.ts): a throwaway redis-server", () => {
  before(function () {
    skipWithoutRedis(this);
  });

  it("listens on 127.0.0.1 only, protected, persisting nothing, in its own directory that stop() removes", async function () {
    this.timeout(20_000);
    const server = await startRedis();
    try {
      expect(server.url).to.equal(`redis://127.0.0.1:${server.port}`);
      const fields = await info(server.url);
      expect(fields["config:bind"]).to.equal("127.0.0.1");
      expect(fields["config:protected-mode"]).to.equal("yes");
      expect(fields["config:save"]).to.equal("");
      expect(fields["config:appendonly"]).to.equal("no");
      expect(fields["config:dir"]).to.equal(fs.realpathSync(server.dir));
      expect(fields.tcp_port).to.equal(String(server.port));
    } finally {
      await server.stop();
    }
    expect(fs.existsSync(server.dir)).to.equal(false);
    // Stopped means gone: nothing answers on the port any more.
    const client = new Redis(server.url, { lazyConnect: true, retryStrategy: () => null });
    client.on("error", () => {});
    expect((await rejection(client.connect())).message).to.match(/ECONNREFUSED|closed/i);
  });

  it("starts again on the same port after a stop (a restart), empty", async function () {
    this.timeout(20_000);
    const first = await startRedis();
    const client = new Redis(first.url, { lazyConnect: true, retryStrategy: () => null });
    await client.connect();
    await client.set("left", "behind");
    client.disconnect();
    await first.stop();
    const second = await startRedis({ port: first.port });
    try {
      expect(second.url).to.equal(first.url);
      const again = new Redis(second.url, { lazyConnect: true, retryStrategy: () => null });
      await again.connect();
      expect(await again.get("left")).to.equal(null);
      again.disconnect();
    } finally {
      await second.stop();
    }
  });

  it("says why it cannot start, when the port is held by another server", async function () {
    this.timeout(20_000);
    const holder = await startRedis();
    try {
      expect((await rejection(startRedis({ port: holder.port }))).message).to.match(/port \d+ is taken/);
    } finally {
      await holder.stop();
    }
  });

  it("dies with the process that started it, even one killed with SIGKILL", async function () {
    this.timeout(30_000);
    const root = path.resolve(__dirname, "../..");
    const script = `
      const { startRedisServer } = require(${JSON.stringify(path.join(root, "server/devstack/redis-server.ts"))});
      startRedisServer().then((s) => console.log(JSON.stringify({ url: s.url, dir: s.dir })));
      setInterval(() => {}, 1000);`;
    const parent = spawn(process.execPath, ["-r", "ts-node/register/transpile-only", "-e", script], {
      cwd: root,
      stdio: ["ignore", "pipe", "inherit"],
    });
    let started: Pick<RedisServer, "url" | "dir">;
    try {
      started = await new Promise((resolve, reject) => {
        let out = "";
        parent.stdout!.on("data", (chunk: Buffer) => {
          out += chunk.toString();
          if (out.includes("\n")) resolve(JSON.parse(out.split("\n")[0]));
        });
        parent.once("exit", (code) => reject(new Error(`the parent exited with ${code} before starting Redis`)));
      });
    } catch (error) {
      parent.kill("SIGKILL");
      throw error;
    }
    const pid = Number((await info(started.url)).process_id);
    expect(alive(pid)).to.equal(true);
    try {
      parent.kill("SIGKILL");
      const deadline = Date.now() + 5_000;
      while (alive(pid) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
      expect(alive(pid), "redis-server outlived its parent").to.equal(false);
    } finally {
      if (alive(pid)) process.kill(pid, "SIGKILL");
      fs.rmSync(started.dir, { recursive: true, force: true });
    }
  });
});
