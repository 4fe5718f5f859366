import { expect } from "chai";
import { loadConfig } from "../../server/config";
import { type RunningGateway, startGateway } from "../../server/index";
import { PublicStandInEgress } from "../helpers/egress";
import { type TestStack, startStack } from "../helpers/gateway";
import { sessionKey, withKey } from "../helpers/keys";
import { skipWithoutPostgres } from "../helpers/engines";
import { useRedisServer } from "../helpers/redis";
import { type TestSession, signedIn } from "../helpers/session";

/** The authentication cache of both replicas: ten minutes, so that only the Redis message can make a change seen. */
const KEY_CACHE_TTL_MS = 600_000;

/**
 * A key changed on one replica (PATCH /v1/keys/:id) is held to what it may do now on every other replica within a
 * second, though each caches authentications (server/identity/api-keys.ts): the replica that changed it announces
 * `key_changed` on Redis (server/db/redis-bus.ts), as a revocation announces `key_revoked`, and the others forget the
 * key. Two gateways in this process, on one PostgreSQL database and one Redis, with caches far longer than the test.
 */
describe("a key narrowed on one replica, on another", function () {
  this.timeout(60_000);
  const redis = useRedisServer();
  let a: TestStack;
  let b: RunningGateway;
  let ada: TestSession;

  before(async function () {
    skipWithoutPostgres(this);
    a = await startStack({
      engine: "postgres",
      config: { redisUrl: redis.server.url, keyCacheTtlMs: KEY_CACHE_TTL_MS, replicaId: "replica-a" },
    });
    const config = loadConfig(
      {},
      {
        port: 0,
        databaseUrl: a.databaseUrl,
        redisUrl: redis.server.url,
        keyCacheTtlMs: KEY_CACHE_TTL_MS,
        replicaId: "replica-b",
        logLevel: "silent",
        skillBackendAllowlist: [a.backend.url],
      },
    );
    const egress = new PublicStandInEgress({ allowlist: config.skillBackendAllowlist, allowedPorts: config.skillBackendPorts }, [
      a.backend.url,
    ]);
    b = await startGateway(config, { log: () => {}, egress });
    ada = await signedIn(a, "ada@example.com");
    await a.gw.ledger.credit(ada.accountId, 1_000_000n, "dev_credit", "test");
    await a.gw.db.durable();
  });
  after(async () => {
    await b?.close();
    await a?.close();
  });

  /** Polls `read` on replica B until `done` says so, for at most a second; how long it took. */
  const withinASecond = async (
    what: string,
    read: () => Promise<{ status: number; body: any }>,
    done: (r: { status: number; body: any }) => boolean,
  ) => {
    const startedMs = Date.now();
    for (;;) {
      const reply = await read();
      if (done(reply)) return Date.now() - startedMs;
      if (Date.now() - startedMs > 1_000) throw new Error(`replica B still ${what} after a second: ${JSON.stringify(reply.body)}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  };

  it("refuses on replica B, within a second, the scope and the skills a PATCH on replica A took away", async () => {
    const key = await sessionKey(ada, { scopes: ["calls", "usage:read"] });
    const onB = withKey({ url: b.url }, key.key);
    const callEcho = () => onB("POST", "/v1/call", { skill_id: "echo", input: {} });
    // Replica B authenticates the key, and caches it for ten minutes.
    expect((await onB("GET", "/v1/balance")).status).to.equal(200);
    expect((await callEcho()).status).to.equal(200);

    expect((await ada.request("PATCH", `/v1/keys/${key.id}`, { scopes: ["calls"] })).status).to.equal(200);
    await withinASecond(
      "reads the balance",
      () => onB("GET", "/v1/balance"),
      (r) => r.status === 403 && r.body.code === "scope_missing",
    );

    expect((await ada.request("PATCH", `/v1/keys/${key.id}`, { allowed_skills: ["fail"] })).status).to.equal(200);
    await withinASecond("calls echo", callEcho, (r) => r.status === 403 && r.body.code === "skill_not_allowed");
  });

  it("refuses on replica B, within a second, a management key whose keys:manage was taken away on replica A", async () => {
    const manager = await sessionKey(ada, { scopes: ["keys:manage"] });
    const onB = withKey({ url: b.url }, manager.key);
    expect((await onB("GET", "/v1/keys")).status).to.equal(200);
    expect((await ada.request("PATCH", `/v1/keys/${manager.id}`, { scopes: ["calls"] })).status).to.equal(200);
    await withinASecond(
      "lists the keys",
      () => onB("GET", "/v1/keys"),
      (r) => r.status === 403 && r.body.code === "scope_missing",
    );
  });
});
