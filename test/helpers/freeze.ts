import fs from "node:fs";
import Redis from "ioredis";
import type { PostgresServer } from "./postgres";
import type { RedisServer } from "./redis";

/**
 * Freezing a server in place (SIGSTOP), as a stalled machine, a long GC pause or a VM migration does: its sockets stay
 * open and the kernel keeps accepting connections and bytes for it, but nothing answers until it is thawed (SIGCONT).
 * A crash is easy to notice; this is the failure that leaves a client waiting. For the chaos harness
 * (./chaos/pause.ts) and the tests of what the gateway does meanwhile.
 */
export interface Frozen {
  /** The processes stopped. */
  pids: number[];
  /** Sends SIGCONT to every one of them (once; later calls do nothing). */
  thaw(): void;
}

/** The processes whose parent is `pid`, read from /proc. */
function childrenOf(pid: number): number[] {
  const children: number[] = [];
  for (const entry of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = fs.readFileSync(`/proc/${entry}/stat`, "utf8");
    } catch {
      continue; // gone meanwhile
    }
    // pid (comm) state ppid ...: comm may hold spaces and parentheses, so read after its last ")".
    const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    if (ppid === pid) children.push(Number(entry));
  }
  return children;
}

/** `pid` and every process under it, parents first. */
function processTree(pid: number): number[] {
  return [pid, ...childrenOf(pid).flatMap(processTree)];
}

function stop(pids: number[]): Frozen {
  const stopped: number[] = [];
  for (const pid of pids) {
    try {
      process.kill(pid, "SIGSTOP");
      stopped.push(pid);
    } catch {
      // Exited between listing and stopping: nothing to freeze.
    }
  }
  let thawed = false;
  return {
    pids: stopped,
    thaw() {
      if (thawed) return;
      thawed = true;
      for (const pid of stopped) {
        try {
          process.kill(pid, "SIGCONT");
        } catch {
          // Gone: nothing to thaw.
        }
      }
    },
  };
}

/**
 * Stops a PostgreSQL server whole: the postmaster first (so that it forks nothing more), then every backend and
 * auxiliary process under it.
 */
export function freezePostgres(server: Pick<PostgresServer, "pid">): Frozen {
  const postmaster = stop([server.pid]);
  const rest = stop(processTree(server.pid).slice(1));
  const pids = [...postmaster.pids, ...rest.pids];
  let thawed = false;
  return {
    pids,
    thaw() {
      if (thawed) return;
      thawed = true;
      // The postmaster last: its backends are already running when it accepts connections again.
      rest.thaw();
      postmaster.thaw();
    },
  };
}

/** The process id of the Redis server at `url`, as it says itself (INFO server). */
export async function redisServerPid(server: Pick<RedisServer, "url">): Promise<number> {
  const client = new Redis(server.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await client.connect();
    const info = await client.info("server");
    const pid = /^process_id:(\d+)/m.exec(info)?.[1];
    if (pid === undefined) throw new Error("INFO server names no process_id");
    return Number(pid);
  } finally {
    client.disconnect();
  }
}

/** Stops a Redis server (one process: its background threads stop with it). */
export async function freezeRedis(server: Pick<RedisServer, "url">): Promise<Frozen> {
  return stop([await redisServerPid(server)]);
}
