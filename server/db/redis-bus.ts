import { type Redis, openRedis } from "./redis";

/**
 * What one replica tells the others so they drop what they cached: an API key revoked, or changed
 * (its scopes, allowed skills, expiry: what a cached authentication would still let it do), by the
 * key's id; or a skill created, changed or delisted (by id).
 */
export type Invalidation =
  { kind: "key_revoked"; keyId: string } | { kind: "key_changed"; keyId: string } | { kind: "skill_changed"; skillId: string };

export interface InvalidationBusParameters {
  url: string;
  /** The pub/sub channel; "sg:invalidation" by default. Replicas of one gateway share it. */
  channel?: string;
  /** Told about connection errors and malformed messages; the bus carries on. */
  onError?: (error: Error) => void;
}

/** An id as the bus carries it: what key ids, UUIDs and slugs are made of, and bounded. */
const ID = /^[A-Za-z0-9_.:-]{1,200}$/;
const WIRE_KIND = { key_revoked: "key_revoked", key_changed: "key_changed", skill_changed: "skill_changed" } as const;

/** The message as published: `key_revoked <id>`, `key_changed <id>` or `skill_changed <id>`. */
export function encodeInvalidation(message: Invalidation): string {
  const id = message.kind === "skill_changed" ? message.skillId : message.keyId;
  if (!ID.test(id)) throw new Error(`not an id the invalidation bus carries: ${JSON.stringify(id.slice(0, 40))}`);
  return `${WIRE_KIND[message.kind]} ${id}`;
}

/** A message as received, checked: anyone who can reach the Redis server can publish on the channel. */
export function decodeInvalidation(text: string): Invalidation | undefined {
  const space = text.indexOf(" ");
  const kind = text.slice(0, space);
  const id = text.slice(space + 1);
  if (space < 0 || !ID.test(id)) return undefined;
  if (kind === WIRE_KIND.key_revoked) return { kind: "key_revoked", keyId: id };
  if (kind === WIRE_KIND.key_changed) return { kind: "key_changed", keyId: id };
  if (kind === WIRE_KIND.skill_changed) return { kind: "skill_changed", skillId: id };
  return undefined;
}

/**
 * Cache invalidation across replicas over Redis pub/sub. Every replica opens a bus; what one
 * publishes reaches the subscribers of every replica (its own included) within milliseconds.
 *
 * Pub/sub delivers only to connected subscribers, so a message published while a replica's
 * connection is down is lost to it. The bus reconnects by itself (at most REDIS_RECONNECT_MAX_MS
 * between attempts), subscribes again, and then tells its owners through onMissed that they may
 * have missed messages: an owner drops its cache then, and the cache's time-to-live bounds the
 * staleness meanwhile (and is the backstop for anything else lost).
 *
 * It lives in db/, the layer every module may import: identity (revoking keys) and catalog
 * (changing skills) publish, and the caches of identity, catalog and the gateway subscribe. It
 * carries opaque ids and knows nothing of what they name.
 */
export class InvalidationBus {
  private readonly listeners = new Set<(message: Invalidation) => void>();
  private readonly missedListeners = new Set<() => void>();
  private lost = false;
  private closed = false;

  private constructor(
    private readonly subscriber: Redis,
    private readonly publisher: Redis,
    private readonly channel: string,
    private readonly onError: (error: Error) => void,
  ) {
    subscriber.on("message", (channel: string, text: string) => {
      if (channel !== this.channel) return;
      const message = decodeInvalidation(text);
      if (!message) return onError(new Error(`ignored a malformed invalidation message (${text.length} characters)`));
      for (const listener of this.listeners) this.call(listener, message);
    });
    subscriber.on("close", () => (this.lost = true));
    subscriber.on("ready", () => {
      if (!this.lost || this.closed) return;
      this.lost = false;
      // Subscribed again, the owners drop what they cached: what changed while the connection
      // was down is then read afresh, and what changes from now on is heard.
      subscriber.subscribe(this.channel).then(
        () => {
          for (const listener of this.missedListeners) this.call(listener);
        },
        (error: Error) => onError(error), // the connection dropped again: the next "ready" retries
      );
    });
  }

  /** Connects to Redis and subscribes; rejects when Redis cannot be reached. */
  static async open(parameters: InvalidationBusParameters): Promise<InvalidationBus> {
    const onError = parameters.onError ?? (() => {});
    const channel = parameters.channel ?? "sg:invalidation";
    // ioredis resubscribes by itself after a reconnection, but without telling when it is done;
    // the bus does it itself, so it knows when the gap is closed.
    const subscriber = await openRedis({ url: parameters.url, name: "invalidation:subscriber", onError, resubscribesItself: true });
    let publisher: Redis | undefined;
    try {
      publisher = await openRedis({ url: parameters.url, name: "invalidation:publisher", onError, failFast: true });
      await subscriber.subscribe(channel);
    } catch (error) {
      subscriber.disconnect();
      publisher?.disconnect();
      throw error;
    }
    return new InvalidationBus(subscriber, publisher, channel, onError);
  }

  /** Calls `listener` with every message published by any replica; returns the unsubscribe. */
  onMessage(listener: (message: Invalidation) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Calls `listener` each time the subscription was lost and is back: messages may have been missed meanwhile. */
  onMissed(listener: () => void): () => void {
    this.missedListeners.add(listener);
    return () => this.missedListeners.delete(listener);
  }

  /**
   * Publishes to every replica; resolves to how many subscribers heard it. Rejects at once when
   * Redis is unreachable: the change itself is already stored, and the other replicas' caches
   * expire by their time-to-live.
   */
  async publish(message: Invalidation): Promise<number> {
    if (this.closed) throw new Error("the invalidation bus is closed");
    return this.publisher.publish(this.channel, encodeInvalidation(message));
  }

  /** Unsubscribes and closes both connections; resolves once the server has let go of them. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.listeners.clear();
    this.missedListeners.clear();
    await Promise.all([closeConnection(this.subscriber), closeConnection(this.publisher)]);
  }

  /** A listener that throws is the owner's bug: reported, and the other listeners still run. */
  private call<A extends unknown[]>(listener: (...args: A) => void, ...args: A): void {
    try {
      listener(...args);
    } catch (error) {
      this.onError(error instanceof Error ? error : new Error(String(error)));
    }
  }
}

/** QUIT when connected, so that the server has dropped the subscription when close() resolves; else just disconnect. */
async function closeConnection(client: Redis): Promise<void> {
  if (client.status === "ready") {
    try {
      await client.quit();
      return;
    } catch {
      // The connection went meanwhile: disconnect below.
    }
  }
  client.disconnect();
}
