import { type RedisServer, redisServerBinary, startRedisServer } from "../../server/devstack/redis-server";

export type { RedisServer };

/**
 * Real, throwaway Redis servers for tests (server/devstack/redis-server.ts): each on a free
 * 127.0.0.1 port, protected mode on, persistence off, in a temporary directory removed by
 * stop(), and guarded so it dies with the test process even if that is killed.
 */
export const REDIS_SERVER_BINARY = redisServerBinary();

/** Starts a redis-server; `port` restarts one where a stopped one listened. */
export function startRedis(options: { port?: number } = {}): Promise<RedisServer> {
  return startRedisServer(options);
}

/**
 * Skips the calling suite, saying why, when redis-server is not installed; only then: any
 * other failure to start one fails the tests. Call it first in a `before` hook.
 */
export function skipWithoutRedis(context: Mocha.Context): void {
  if (REDIS_SERVER_BINARY) return;
  console.warn("    (skipped: redis-server is not installed; `.ci/run` or `apt-get install redis-server` installs it)");
  context.skip();
}

/**
 * One Redis server for the enclosing `describe`: started before its tests (or the suite
 * skipped when redis-server is absent) and stopped after them. Read `.server` inside tests.
 */
export function useRedisServer(): { readonly server: RedisServer } {
  let server: RedisServer | undefined;
  before(async function () {
    skipWithoutRedis(this);
    server = await startRedis();
  });
  after(async () => {
    await server?.stop();
  });
  return {
    get server() {
      if (!server) throw new Error("the Redis server is not started: use it inside a test");
      return server;
    },
  };
}

/** The error a promise rejects with; fails the test when it resolves. */
export async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof Error) return error;
    throw new Error(`rejected with a non-Error: ${String(error)}`);
  }
  throw new Error("expected a rejection, but the promise resolved");
}
