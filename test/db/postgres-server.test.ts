import { spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import { expect } from "chai";
import pg from "pg";
import { type PostgresServer, startPostgresOrSkip } from "../helpers/postgres";

/** The throwaway PostgreSQL server the scale-out tests run on (test/helpers/postgres.ts). */

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The real user id a process runs as, from /proc. */
function uidOf(pid: number): number {
  const line = fs
    .readFileSync(`/proc/${pid}/status`, "utf8")
    .split("\n")
    .find((l) => l.startsWith("Uid:"))!;
  return Number(line.split(/\s+/)[1]);
}

function portAccepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, "127.0.0.1");
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

async function waitFor(what: string, check: () => boolean | Promise<boolean>, timeoutMs: number): Promise<void> {
  const started = Date.now();
  while (!(await check())) {
    if (Date.now() - started > timeoutMs) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await sleep(50);
  }
}

describe("a throwaway PostgreSQL server for tests", function () {
  this.timeout(60_000);

  describe("while it runs", () => {
    let server: PostgresServer;
    before(async function () {
      server = await startPostgresOrSkip(this);
    });
    after(() => server?.stop());

    it("runs as an unprivileged user, never as root", () => {
      expect(alive(server.pid)).to.equal(true);
      expect(uidOf(server.pid)).to.not.equal(0);
      if (process.getuid?.() !== 0) expect(uidOf(server.pid)).to.equal(process.getuid!());
    });

    it("keeps fsync and synchronous_commit at their safe defaults", async () => {
      const client = new pg.Client(server.url);
      await client.connect();
      try {
        const { rows } = await client.query(
          "SELECT current_setting('fsync') AS fsync, current_setting('synchronous_commit') AS sync, current_setting('listen_addresses') AS listen, current_database() AS db",
        );
        expect(rows[0]).to.deep.equal({ fsync: "on", sync: "on", listen: "127.0.0.1", db: server.database });
      } finally {
        await client.end();
      }
    });

    it("lets nobody in over TCP without the generated password", async () => {
      const url = new URL(server.url);
      url.password = "not-the-password";
      const client = new pg.Client(url.toString());
      client.on("error", () => {});
      const err = await client.connect().catch((e: unknown) => e as pg.DatabaseError);
      expect((err as pg.DatabaseError).code).to.equal("28P01"); // invalid_password
      await client.end().catch(() => {});
    });

    it("keeps its data and its socket in a private directory", () => {
      expect(path.dirname(server.dataDir)).to.equal(path.dirname(server.socketDir));
      expect(fs.statSync(server.dataDir).mode & 0o077).to.equal(0);
      expect(fs.statSync(server.socketDir).mode & 0o077).to.equal(0);
      expect(fs.existsSync(path.join(server.socketDir, `.s.PGSQL.${server.port}`))).to.equal(true);
    });
  });

  it("stops on stop(): the server gone, its port free, its directory removed", async function () {
    const server = await startPostgresOrSkip(this);
    await server.stop();
    expect(alive(server.pid)).to.equal(false);
    expect(await portAccepts(server.port)).to.equal(false);
    expect(fs.existsSync(path.dirname(server.dataDir))).to.equal(false);
    await server.stop(); // a second stop is harmless
  });

  it("chooses another port when the one it chose is taken before the server binds it", async function () {
    const squatter = net.createServer();
    await new Promise<void>((resolve) => squatter.listen(0, "127.0.0.1", resolve));
    const taken = (squatter.address() as net.AddressInfo).port;
    const tried: number[] = [];
    try {
      let first = true;
      const server = await startPostgresOrSkip(this, {
        choosePort: async () => {
          const port = first ? taken : 0;
          first = false;
          if (port !== 0) {
            tried.push(port);
            return port;
          }
          const probe = net.createServer();
          await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
          const free = (probe.address() as net.AddressInfo).port;
          await new Promise((resolve) => probe.close(resolve));
          tried.push(free);
          return free;
        },
      });
      try {
        expect(tried[0]).to.equal(taken);
        expect(tried).to.have.length(2);
        expect(server.port).to.equal(tried[1]);
        const client = new pg.Client(server.url);
        await client.connect();
        await client.end();
      } finally {
        await server.stop();
      }
    } finally {
      squatter.close();
    }
  });

  it("does not outlive a test process killed with SIGKILL: the server stops and its directory goes", async () => {
    // A test process of its own, which starts a server, reports it, then is killed without any cleanup.
    const script = `require(${JSON.stringify(path.join(__dirname, "../helpers/postgres"))}).startPostgres().then((s) => {
      process.stdout.write(JSON.stringify({ pid: s.pid, port: s.port, dataDir: s.dataDir }) + "\\n");
    });`;
    const child = spawn(process.execPath, ["-r", "ts-node/register/transpile-only", "-e", script], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    const info = await new Promise<{ pid: number; port: number; dataDir: string }>((resolve, reject) => {
      let out = "";
      child.stdout!.on("data", (chunk: Buffer) => {
        out += chunk.toString();
        if (out.includes("\n")) resolve(JSON.parse(out.split("\n")[0]));
      });
      child.once("exit", (code) => reject(new Error(`the test process exited (${code}) before its server started`)));
    });
    expect(alive(info.pid)).to.equal(true);
    child.kill("SIGKILL");
    await waitFor("the orphaned server stops", () => !alive(info.pid), 15_000);
    await waitFor("its directory is removed", () => !fs.existsSync(path.dirname(info.dataDir)), 5_000);
    expect(await portAccepts(info.port)).to.equal(false);
  });
});
