import type { ChildProcess } from "node:child_process";
import { mkdtempSync, realpathSync, rmSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { PortTakenError, onFreePort } from "./local-node";
import { findBinary, spawnNativeGuarded } from "./native-child";

export interface RedisServer {
  /** redis://127.0.0.1:<port> */
  url: string;
  port: number;
  /** The server's own temporary directory (nothing is written there: no snapshots, no append-only file). */
  dir: string;
  /** Shuts the server down, waits for it to exit and removes its directory. Safe to call twice. */
  stop(): Promise<void>;
}

export interface StartRedisServerParameters {
  /** The port to listen on; a free one when absent (a restart passes the old one). */
  port?: number;
  /** The redis-server binary; the one on the PATH by default. */
  binary?: string;
  readyTimeoutMs?: number;
}

/** The redis-server binary on the PATH (Debian's `redis-server` package), or undefined when absent. */
export function redisServerBinary(): string | undefined {
  return findBinary("redis-server");
}

/**
 * Starts a real, throwaway redis-server: on 127.0.0.1 only, protected mode on, persistence off
 * (`--save "" --appendonly no`) in a temporary directory of its own, guarded so that it dies
 * with this process (./native-child.ts). Resolves once it answers PING.
 */
export async function startRedisServer(parameters: StartRedisServerParameters = {}): Promise<RedisServer> {
  const binary = parameters.binary ?? redisServerBinary();
  if (!binary) throw new Error("redis-server is not installed (Debian: apt-get install redis-server)");
  // A free port found here can be taken by someone else before the server binds it: another is tried.
  return onFreePort(parameters.port, undefined, (port) => startOn(binary, port, parameters.readyTimeoutMs ?? 10_000));
}

async function startOn(binary: string, port: number, readyTimeoutMs: number): Promise<RedisServer> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "skill-gateway-redis-"));
  // prettier-ignore
  const args = [
    "--port", String(port),
    "--bind", "127.0.0.1",
    "--protected-mode", "yes",
    "--save", "",
    "--appendonly", "no",
    "--dir", dir,
    "--daemonize", "no",
    "--logfile", "",
    "--loglevel", "warning",
  ];
  const child: ChildProcess = spawnNativeGuarded(binary, args, { stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  const keep = (chunk: Buffer) => (output = (output + chunk.toString()).slice(-4_000));
  child.stdout!.on("data", keep);
  child.stderr!.on("data", keep);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const running = () => child.exitCode === null && child.signalCode === null;

  let stopped: Promise<void> | undefined;
  const stop = () => {
    stopped ??= (async () => {
      // SIGTERM: redis-server shuts down (saving nothing, as configured) and exits.
      if (running()) child.kill("SIGTERM");
      const killAfter = setTimeout(() => running() && child.kill("SIGKILL"), 5_000);
      await exited;
      clearTimeout(killAfter);
      rmSync(dir, { recursive: true, force: true });
    })();
    return stopped;
  };

  const deadline = Date.now() + readyTimeoutMs;
  for (;;) {
    if (!running()) {
      await stop();
      if (/address already in use/i.test(output)) throw new PortTakenError(`port ${port} is taken:\n${output}`);
      throw new Error(`redis-server exited before answering PING:\n${output}`);
    }
    if (await answersAsItself(port, dir)) break;
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`redis-server did not answer PING on 127.0.0.1:${port} within ${readyTimeoutMs} ms:\n${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return { url: `redis://127.0.0.1:${port}`, port, dir, stop };
}

/**
 * Whether the Redis server on 127.0.0.1:port is the one just started: it answers PING, and its
 * directory is `dir` (another server already on the port would answer PING too). A raw RESP
 * exchange, no client.
 */
function answersAsItself(port: number, dir: string): Promise<boolean> {
  const expected = realpathSync(dir);
  return new Promise((resolve) => {
    const socket = net.connect({ host: "127.0.0.1", port });
    let reply = "";
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1_000, () => done(false));
    socket.once("error", () => done(false));
    socket.once("connect", () => socket.write("*1\r\n$4\r\nPING\r\n*3\r\n$6\r\nCONFIG\r\n$3\r\nGET\r\n$3\r\ndir\r\n"));
    socket.on("data", (chunk) => {
      reply += chunk.toString();
      // +PONG, then the array ["dir", <dir>]: *2, $3, dir, $<length>, <dir>, each line ending in CRLF.
      const lines = reply.split("\r\n");
      if (lines.length < 7) return;
      done(lines[0] === "+PONG" && lines[3] === "dir" && lines[5] === expected);
    });
  });
}
