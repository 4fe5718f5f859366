import Redis from "ioredis";

export type { Redis };

export interface OpenRedisParameters {
  /** redis://[user:password@]host:port[/db] or rediss://... (TLS). */
  url: string;
  /** The connection's name on the server (CLIENT LIST), e.g. "gateway:limits". */
  name: string;
  /** Told about connection errors; the client keeps reconnecting by itself. */
  onError?: (error: Error) => void;
  /**
   * Refuse commands at once while disconnected (the call path must never wait for a Redis that
   * is down: it decides what to do with the error). By default commands wait in a queue for the
   * connection to come back.
   */
  failFast?: boolean;
  /** Fails a command that has no reply after this long (a Redis that hangs); none by default. */
  commandTimeoutMs?: number;
  /** A subscriber that subscribes again itself after a reconnection (ioredis would otherwise, without saying when). */
  resubscribesItself?: boolean;
  /** How long the first connection may take; 5 s by default. */
  connectTimeoutMs?: number;
  /**
   * Commands sent in one turn of the event loop leave in one write (ioredis's auto-pipelining): the call path's
   * limits of many calls at once share a write and a round trip rather than each costing its own.
   */
  autoPipelining?: boolean;
}

/** The longest wait between two reconnection attempts: a Redis back up is used again within it. */
export const REDIS_RECONNECT_MAX_MS = 500;

/**
 * Opens a connection to Redis (ioredis) and resolves once it is ready. A connection lost later
 * is reopened by itself, forever, 50 ms after the first failure and then at most every
 * REDIS_RECONNECT_MAX_MS. Rejects, closing the client, when the first connection fails: a
 * replica configured for Redis does not start without it.
 */
export async function openRedis(parameters: OpenRedisParameters): Promise<Redis> {
  checkRedisUrl(parameters.url);
  const client = new Redis(parameters.url, {
    lazyConnect: true,
    connectionName: parameters.name,
    connectTimeout: parameters.connectTimeoutMs ?? 5_000,
    retryStrategy: (attempt) => Math.min(attempt * 50, REDIS_RECONNECT_MAX_MS),
    enableOfflineQueue: !parameters.failFast,
    // Queued commands give up after a few reconnection attempts rather than wait forever.
    maxRetriesPerRequest: parameters.failFast ? 0 : 20,
    commandTimeout: parameters.commandTimeoutMs,
    autoResubscribe: !parameters.resubscribesItself,
    enableAutoPipelining: parameters.autoPipelining ?? false,
  });
  // Without a listener, ioredis reports each failed reconnection on stderr itself.
  client.on("error", (error: Error) => parameters.onError?.(error));
  try {
    await client.connect();
  } catch (error) {
    client.disconnect();
    throw new Error(`cannot connect to Redis (${parameters.name}): ${error instanceof Error ? error.message : String(error)}`);
  }
  return client;
}

/** Throws unless `url` is a redis:// or rediss:// URL. The message never repeats the URL: it may hold a password. */
export function checkRedisUrl(url: string): void {
  let protocol: string;
  try {
    protocol = new URL(url).protocol;
  } catch {
    throw new Error("REDIS_URL is not a URL (expected redis://host:port)");
  }
  if (protocol !== "redis:" && protocol !== "rediss:")
    throw new Error(`REDIS_URL must start with redis:// or rediss://, not ${protocol}//`);
}
