import { expect } from "chai";
import { type Redis, openRedis } from "../../server/db/redis";
import { type Invalidation, InvalidationBus, decodeInvalidation, encodeInvalidation } from "../../server/db/redis-bus";
import { type RedisServer, rejection, startRedis, useRedisServer } from "../helpers/redis";

const KEY_HASH = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
const SKILL_ID = "0190f3c2-7a1b-7c3d-8e4f-5a6b7c8d9e0f";

/** Resolves with the next message `bus` delivers, or rejects after `withinMs`. */
function nextMessage(bus: InvalidationBus, withinMs: number): Promise<Invalidation> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      stop();
      reject(new Error(`no message within ${withinMs} ms`));
    }, withinMs);
    const stop = bus.onMessage((message) => {
      clearTimeout(timer);
      stop();
      resolve(message);
    });
  });
}

describe("InvalidationBus: cache invalidation across replicas over Redis pub/sub", () => {
  const redis = useRedisServer();
  let buses: InvalidationBus[] = [];
  let errors: Error[] = [];
  /** One replica's bus, on its own channel per test so tests do not hear each other. */
  const open = async (channel: string, url = redis.server.url) => {
    const bus = await InvalidationBus.open({ url, channel, onError: (error) => errors.push(error) });
    buses.push(bus);
    return bus;
  };
  afterEach(async () => {
    await Promise.all(buses.map((bus) => bus.close()));
    buses = [];
    errors = [];
  });

  it("delivers a revoked key published on one replica to another within a second", async () => {
    const [a, b] = [await open("t1"), await open("t1")];
    const heard = nextMessage(b, 1_000);
    const startedMs = performance.now();
    await a.publish({ kind: "key_revoked", keyId: KEY_HASH });
    expect(await heard).to.deep.equal({ kind: "key_revoked", keyId: KEY_HASH });
    expect(performance.now() - startedMs).to.be.below(1_000);
  });

  it("delivers a changed skill to every replica, the publisher's own included, and says how many heard it", async () => {
    const [a, b, c] = [await open("t2"), await open("t2"), await open("t2")];
    const heard = Promise.all([a, b, c].map((bus) => nextMessage(bus, 1_000)));
    expect(await b.publish({ kind: "skill_changed", skillId: SKILL_ID })).to.equal(3);
    expect(await heard).to.deep.equal(Array(3).fill({ kind: "skill_changed", skillId: SKILL_ID }));
  });

  it("keeps gateways apart by channel", async () => {
    const [a, other] = [await open("t3"), await open("t3-other")];
    const heard: Invalidation[] = [];
    other.onMessage((message) => heard.push(message));
    expect(await a.publish({ kind: "skill_changed", skillId: SKILL_ID })).to.equal(1);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(heard).to.deep.equal([]);
  });

  it("drops malformed messages from the channel, telling its owner, and delivers the next good one", async () => {
    const bus = await open("t4");
    const raw: Redis = await openRedis({ url: redis.server.url, name: "test:raw" });
    try {
      const heard: Invalidation[] = [];
      bus.onMessage((message) => heard.push(message));
      for (const text of [
        "",
        "key_revoked",
        "key_revoked ",
        "drop_everything now",
        `skill_changed ${"x".repeat(201)}`,
        "skill_changed a b",
      ])
        await raw.publish("t4", text);
      await raw.publish("t4", `skill_changed ${SKILL_ID}`);
      const deadline = Date.now() + 1_000;
      while (heard.length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
      expect(heard).to.deep.equal([{ kind: "skill_changed", skillId: SKILL_ID }]);
      expect(errors.map((e) => e.message)).to.have.length(6);
      expect(errors[0].message).to.contain("malformed invalidation message");
    } finally {
      raw.disconnect();
    }
  });

  it("refuses to publish an id it would not carry", async () => {
    const bus = await open("t5");
    expect((await rejection(bus.publish({ kind: "key_revoked", keyId: "a b" }))).message).to.contain("not an id");
    expect(() => encodeInvalidation({ kind: "skill_changed", skillId: "" })).to.throw("not an id");
    expect(decodeInvalidation(encodeInvalidation({ kind: "key_revoked", keyId: KEY_HASH }))).to.deep.equal({
      kind: "key_revoked",
      keyId: KEY_HASH,
    });
    // A key changed (PATCH /v1/keys/:id) is carried by its id the same way, as its own kind.
    expect(encodeInvalidation({ kind: "key_changed", keyId: SKILL_ID })).to.equal(`key_changed ${SKILL_ID}`);
    expect(decodeInvalidation(`key_changed ${SKILL_ID}`)).to.deep.equal({ kind: "key_changed", keyId: SKILL_ID });
  });

  it("keeps delivering to the other listeners when one throws, and reports the throw", async () => {
    const [a, b] = [await open("t6"), await open("t6")];
    b.onMessage(() => {
      throw new Error("owner bug");
    });
    const heard = nextMessage(b, 1_000);
    await a.publish({ kind: "skill_changed", skillId: SKILL_ID });
    expect(await heard).to.deep.equal({ kind: "skill_changed", skillId: SKILL_ID });
    expect(errors.map((e) => e.message)).to.deep.equal(["owner bug"]);
  });

  it("delivers nothing after close, and refuses to publish", async () => {
    const [a, b] = [await open("t7"), await open("t7")];
    const heard: Invalidation[] = [];
    b.onMessage((message) => heard.push(message));
    await b.close();
    expect(await a.publish({ kind: "skill_changed", skillId: SKILL_ID })).to.equal(1);
    expect((await rejection(b.publish({ kind: "skill_changed", skillId: SKILL_ID }))).message).to.contain("closed");
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(heard).to.deep.equal([]);
  });

  it("rejects opening when Redis cannot be reached", async () => {
    const gone = await startRedis();
    await gone.stop();
    const error = await rejection(InvalidationBus.open({ url: gone.url }));
    expect(error.message).to.contain("cannot connect to Redis");
  });

  it("after Redis restarts, resumes delivery and tells its owners they may have missed messages", async function () {
    this.timeout(30_000);
    let server: RedisServer = await startRedis();
    try {
      const [a, b] = [await open("t8", server.url), await open("t8", server.url)];
      const missed = [0, 0];
      a.onMissed(() => missed[0]++);
      b.onMissed(() => missed[1]++);
      const heard: Invalidation[] = [];
      b.onMessage((message) => heard.push(message));

      await server.stop();
      // Published while Redis is down: refused at once (the change is stored; the caches' TTL covers it).
      const refused = await rejection(a.publish({ kind: "key_revoked", keyId: KEY_HASH }));
      expect(refused.message).to.match(/writeable|closed|connect/i);
      expect(missed).to.deep.equal([0, 0]);

      server = await startRedis({ port: server.port });
      const restartedMs = performance.now();
      const deadline = restartedMs + 5_000;
      while ((missed[0] === 0 || missed[1] === 0) && performance.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
      expect(missed, "the missed-messages signal after the restart").to.deep.equal([1, 1]);
      // Reconnections are tried at least every 500 ms.
      expect(performance.now() - restartedMs).to.be.below(2_000);

      // Subscribed again before the signal: a message published now is heard.
      const next = nextMessage(b, 1_000);
      let published = 0;
      while (published === 0 && performance.now() < deadline) {
        published = await a.publish({ kind: "skill_changed", skillId: SKILL_ID }).catch(() => 0);
        if (published === 0) await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(published).to.equal(2);
      expect(await next).to.deep.equal({ kind: "skill_changed", skillId: SKILL_ID });
      expect(heard).to.deep.equal([{ kind: "skill_changed", skillId: SKILL_ID }]);
    } finally {
      await server.stop();
    }
  });
});
