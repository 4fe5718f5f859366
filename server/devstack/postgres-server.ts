import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { freePort } from "./local-node";

/**
 * A real, throwaway PostgreSQL 15 server (for the tests, and for `npm run start:cluster`): its own data directory under os.tmpdir(), its
 * own TCP port on 127.0.0.1 and its own unix socket directory, gone after stop() (or, if the process
 * that started it dies first, after ./postgres-guard.cjs notices). Debian's binaries, as .ci/run installs
 * them (postgresql-15). Never an imitation: what the tests see is the server production runs.
 */

/** Where Debian's postgresql-15 package puts the server binaries. */
export const POSTGRES_BIN_DIR = "/usr/lib/postgresql/15/bin";

const GUARD = path.join(__dirname, "postgres-guard.cjs");

export interface StartPostgresOptions {
  /** The database created for the test; the URL points at it. */
  database?: string;
  /**
   * Server settings passed as `-c name=value`. fsync and synchronous_commit stay at their safe
   * defaults (on) unless a test sets them here.
   */
  settings?: Record<string, string>;
  /** How long the server may take to accept connections, per attempt. */
  startTimeoutMs?: number;
  /** How long a fast shutdown may take before the server is killed. */
  stopTimeoutMs?: number;
  /** Chooses the TCP port of each attempt; a free one by default (the helper's own test hands it a taken one). */
  choosePort?: () => Promise<number>;
}

export interface PostgresServer {
  /** postgres://postgres:<password>@127.0.0.1:<port>/<database> */
  url: string;
  /** The same server, another database (created with createDatabase). */
  urlFor(database: string): string;
  port: number;
  database: string;
  dataDir: string;
  socketDir: string;
  /** The postmaster's process id (for tests that signal the server itself). */
  pid: number;
  /**
   * Creates another empty database on the server: in the C locale, or sorting text by an ICU locale
   * (e.g. "en-US") for a test that the schema does not depend on the database's locale.
   */
  createDatabase(name: string, options?: { icuLocale?: string }): Promise<void>;
  /** Fast shutdown (SIGINT), SIGKILL after stopTimeoutMs, then removes the directory. Idempotent. */
  stop(): Promise<void>;
}

/** Why no server can be started here, or null when the binaries are present. */
export function postgresUnavailableReason(): string | null {
  for (const bin of ["initdb", "postgres"]) {
    if (!fs.existsSync(path.join(POSTGRES_BIN_DIR, bin))) {
      return `PostgreSQL 15 is not installed (no ${path.join(POSTGRES_BIN_DIR, bin)}): apt-get install postgresql-15, as .ci/run does`;
    }
  }
  return null;
}

/** The unprivileged user the server runs as when this process is root (initdb and postgres refuse root). */
interface RunAs {
  uid: number;
  gid: number;
}

function runAs(): RunAs | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const uid = Number(execFileSync("id", ["-u", "postgres"]).toString().trim());
  const gid = Number(execFileSync("id", ["-g", "postgres"]).toString().trim());
  if (!Number.isInteger(uid) || !Number.isInteger(gid) || uid === 0)
    throw new Error("no unprivileged `postgres` user to run PostgreSQL as");
  return { uid, gid };
}

/** A running guarded program and the tail of what it wrote. */
interface Guarded {
  child: ChildProcess;
  output(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function startGuarded(command: string, args: string[], user: RunAs | undefined, root: string, stopTimeoutMs: number): Guarded {
  const spec = {
    command,
    args,
    uid: user?.uid,
    gid: user?.gid,
    cwd: root,
    // The server's messages in English and its locale fixed, whatever the test machine's.
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", LANG: "C", LC_ALL: "C" },
    stopSignal: "SIGINT",
    stopTimeoutMs,
    removeWhenOrphaned: [root],
  };
  const child = spawn(process.execPath, [GUARD, JSON.stringify(spec)], { stdio: ["ignore", "pipe", "pipe"] });
  let tail = "";
  const keep = (chunk: Buffer) => {
    tail = (tail + chunk.toString()).slice(-8192);
  };
  child.stdout!.on("data", keep);
  child.stderr!.on("data", keep);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  return { child, output: () => tail, exited };
}

function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** How many times a port taken between choosing it and the server binding it is retried. */
const PORT_ATTEMPTS = 5;

/** Starts a throwaway PostgreSQL 15 server with one empty database; see StartPostgresOptions. */
export async function startPostgres(options: StartPostgresOptions = {}): Promise<PostgresServer> {
  const reason = postgresUnavailableReason();
  if (reason !== null) throw new Error(reason);
  const database = options.database ?? "gateway_test";
  const startTimeoutMs = options.startTimeoutMs ?? 30_000;
  const stopTimeoutMs = options.stopTimeoutMs ?? 10_000;
  const user = runAs();

  const root = fs.mkdtempSync(path.join(os.tmpdir(), "skill-gw-pg-"));
  const dataDir = path.join(root, "data");
  const socketDir = path.join(root, "socket");
  let server: Guarded | undefined;
  try {
    fs.mkdirSync(dataDir, { mode: 0o700 });
    fs.mkdirSync(socketDir, { mode: 0o700 });
    const password = crypto.randomBytes(18).toString("base64url");
    const pwfile = path.join(root, "pwfile");
    fs.writeFileSync(pwfile, `${password}\n`, { mode: 0o600 });
    if (user !== undefined) {
      for (const p of [root, dataDir, socketDir, pwfile]) fs.chownSync(p, user.uid, user.gid);
    }

    // Local (socket) connections trust the OS user: the socket directory is private to the server's
    // user. TCP connections need the generated password, so nobody else on the machine gets in.
    // --no-sync only skips initdb's own flush of a directory thrown away after the test; the
    // server's fsync and synchronous_commit are untouched.
    const initdb = startGuarded(
      path.join(POSTGRES_BIN_DIR, "initdb"),
      [
        "-D",
        dataDir,
        "-U",
        "postgres",
        `--pwfile=${pwfile}`,
        "--auth-local=trust",
        "--auth-host=scram-sha-256",
        "--encoding=UTF8",
        "--locale=C",
        "--no-sync",
        "--no-instructions",
      ],
      user,
      root,
      stopTimeoutMs,
    );
    let initTimedOut = false;
    const initTimer = setTimeout(() => {
      initTimedOut = true;
      initdb.child.kill("SIGTERM");
    }, startTimeoutMs);
    const init = await initdb.exited;
    clearTimeout(initTimer);
    fs.rmSync(pwfile, { force: true });
    if (initTimedOut) throw new Error(`initdb did not finish within ${startTimeoutMs} ms:\n${initdb.output()}`);
    if (init.code !== 0) throw new Error(`initdb failed (code ${init.code}, signal ${init.signal}):\n${initdb.output()}`);

    let port = 0;
    for (let attempt = 1; ; attempt++) {
      port = await (options.choosePort ?? freePort)();
      const settings: Record<string, string> = {
        listen_addresses: "127.0.0.1",
        port: String(port),
        unix_socket_directories: socketDir,
        logging_collector: "off",
        ...options.settings,
      };
      const args = ["-D", dataDir, ...Object.entries(settings).flatMap(([k, v]) => ["-c", `${k}=${v}`])];
      server = startGuarded(path.join(POSTGRES_BIN_DIR, "postgres"), args, user, root, stopTimeoutMs);
      const ready = await waitUntilAccepting(server, port, password, startTimeoutMs);
      if (ready === "ready") break;
      await stopGuarded(server, stopTimeoutMs, dataDir);
      // Someone took the port between freePort() and the server's bind: choose another.
      if (ready === "port_taken" && attempt < PORT_ATTEMPTS) continue;
      throw new Error(`postgres did not start (${ready}):\n${server.output()}`);
    }

    const pid = Number(fs.readFileSync(path.join(dataDir, "postmaster.pid"), "utf8").split("\n")[0]);
    const urlFor = (db: string) => `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/${encodeURIComponent(db)}`;
    const createDatabase = async (name: string, dbOptions: { icuLocale?: string } = {}) => {
      const admin = new pg.Client({ connectionString: urlFor("postgres") });
      await admin.connect();
      try {
        const locale =
          dbOptions.icuLocale === undefined
            ? "LOCALE 'C'"
            : `LOCALE 'C.UTF-8' LOCALE_PROVIDER icu ICU_LOCALE '${dbOptions.icuLocale.replaceAll("'", "''")}'`;
        await admin.query(`CREATE DATABASE ${quoteIdent(name)} TEMPLATE template0 ENCODING 'UTF8' ${locale}`);
      } finally {
        await admin.end();
      }
    };
    await createDatabase(database);

    const running = server;
    let stopped: Promise<void> | undefined;
    return {
      url: urlFor(database),
      urlFor,
      port,
      database,
      dataDir,
      socketDir,
      pid,
      createDatabase,
      stop: () => {
        stopped ??= stopGuarded(running, stopTimeoutMs, dataDir).finally(() => fs.rmSync(root, { recursive: true, force: true }));
        return stopped;
      },
    };
  } catch (err) {
    if (server !== undefined) await stopGuarded(server, stopTimeoutMs, dataDir).catch(() => {});
    fs.rmSync(root, { recursive: true, force: true });
    throw err;
  }
}

/** Polls until the server accepts an authenticated connection, it exits, or the bound passes. */
async function waitUntilAccepting(
  server: Guarded,
  port: number,
  password: string,
  timeoutMs: number,
): Promise<"ready" | "port_taken" | "exited" | "timed_out"> {
  let exited = false;
  void server.exited.then(() => {
    exited = true;
  });
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (exited) return /Address already in use|could not create any TCP\/IP sockets/.test(server.output()) ? "port_taken" : "exited";
    const client = new pg.Client({
      host: "127.0.0.1",
      port,
      user: "postgres",
      password,
      database: "postgres",
      connectionTimeoutMillis: 1000,
    });
    client.on("error", () => {});
    try {
      await client.connect();
      await client.end();
      return "ready";
    } catch {
      await client.end().catch(() => {});
      await sleep(50);
    }
  }
  return "timed_out";
}

/**
 * Asks the guard to stop its program (fast shutdown, then SIGKILL) and waits, bounded, for both
 * to be gone. A guard that does not finish in time is killed with its server (the postmaster's
 * pid is in its data directory), and the stop fails loudly rather than leaking a server.
 */
async function stopGuarded(server: Guarded, stopTimeoutMs: number, dataDir?: string): Promise<void> {
  const { child } = server;
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill("SIGTERM");
  const boundMs = stopTimeoutMs + 5000;
  let timer: NodeJS.Timeout | undefined;
  const gone = await Promise.race([
    server.exited.then(() => true),
    new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), boundMs);
    }),
  ]);
  clearTimeout(timer);
  if (gone) return;
  if (dataDir !== undefined) {
    try {
      process.kill(Number(fs.readFileSync(path.join(dataDir, "postmaster.pid"), "utf8").split("\n")[0]), "SIGKILL");
    } catch {
      // No pid file or no such process: the server is already gone.
    }
  }
  child.kill("SIGKILL");
  throw new Error(`postgres did not stop within ${boundMs} ms:\n${server.output()}`);
}
