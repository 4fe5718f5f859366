import { expect } from "chai";
import { type Database, isUniqueViolation } from "../../server/db/sql";
import { PostgresDatabase } from "../../server/db/postgres/database";
import { createPostgresPool } from "../../server/db/postgres/pool";
import { ApiKeysStore } from "../../server/identity/api-keys-store";
import { SessionsStore } from "../../server/identity/sessions-store";
import { EmailTokensStore, OAuthStatesStore, OutboxStore, SiweNoncesStore } from "../../server/identity/sign-in-store";
import { Ledger } from "../../server/ledger/ledger";
import { describeEachEngine } from "../helpers/engines";

describeEachEngine("identity's stores", (engine) => {
  let db: Database;

  beforeEach(async () => {
    db = await engine.open();
    const ledger = await Ledger.open(db);
    await ledger.ensureAccount({ id: "ada", kind: "user", name: "Ada" });
  });

  it("SessionsStore keeps sessions by token hash, revokes once and purges the dead ones", async () => {
    const store = new SessionsStore(db);
    await store.insertSession({ tokenHash: "h1", accountId: "ada", csrfToken: "c1", createdAtMs: 1, expiresAtMs: 100 });
    await store.insertSession({ tokenHash: "h2", accountId: "ada", csrfToken: "c2", createdAtMs: 1, expiresAtMs: 10 });
    expect(await store.sessionByTokenHash("h1")).to.deep.equal({ accountId: "ada", csrfToken: "c1", expiresAtMs: 100, revokedAtMs: null });
    expect(await store.revokeSession("h1", 5)).to.equal(true);
    expect(await store.revokeSession("h1", 6)).to.equal(false);
    expect((await store.sessionByTokenHash("h1"))?.revokedAtMs).to.equal(5);
    expect(await store.purgeSessions(50)).to.equal(2);
    expect(await store.sessionByTokenHash("h2")).to.equal(undefined);
  });

  it("SessionsStore maps identities to their account", async () => {
    const store = new SessionsStore(db);
    await store.insertIdentity("email", "ada@example.com", "ada", 7);
    expect(await store.identityOwner("email", "ada@example.com")).to.equal("ada");
    expect(await store.identityOwner("github", "ada@example.com")).to.equal(undefined);
    expect(await store.identitiesOf("ada")).to.deep.equal([{ provider: "email", subject: "ada@example.com", createdAtMs: 7 }]);
    const error = await store.insertIdentity("email", "ada@example.com", "ada", 8).catch((e: unknown) => e);
    expect(isUniqueViolation(error), String(error)).to.equal(true);
  });

  it("ApiKeysStore finds keys by hash and id with the account's cap, revokes once, never moves last use back", async () => {
    const store = new ApiKeysStore(db);
    const key = { id: "k1", accountId: "ada", name: "n", prefix: "atom_abc", hash: "sha", rateLimitPerMin: 5, createdAtMs: 1 };
    await store.insert({ ...key, scopes: ["calls", "usage:read"], allowedSkills: ["echo"], expiresAtMs: 99, metadata: { agent: "a-1" } });
    const byHash = await store.byHash("sha");
    expect(byHash).to.include({ id: "k1", accountId: "ada", rateLimitPerMin: 5, accountDailyCallCap: null, revokedAtMs: null });
    expect(byHash).to.deep.include({
      scopes: ["calls", "usage:read"],
      allowedSkills: ["echo"],
      expiresAtMs: 99,
      metadata: { agent: "a-1" },
    });
    expect(await store.byId("k1")).to.deep.equal(byHash);
    await store.recordLastUse("k1", 50);
    await store.recordLastUse("k1", 40);
    expect((await store.byId("k1"))?.lastUsedAtMs).to.equal(50);
    expect(await store.revoke("k1", 60)).to.equal(true);
    expect(await store.revoke("k1", 61)).to.equal(false);
    expect((await store.ofAccount("ada")).map((k) => k.revokedAtMs)).to.deep.equal([60]);
  });

  it("ApiKeysStore changes the fields given of a live key, each alone or all at once, and never a revoked key", async () => {
    const store = new ApiKeysStore(db);
    const key = { id: "k2", accountId: "ada", name: "n", prefix: "atom_abc", hash: "sha2", rateLimitPerMin: null, createdAtMs: 1 };
    await store.insert({ ...key, scopes: ["calls"], allowedSkills: null, expiresAtMs: null, metadata: {} });
    expect((await store.byId("k2"))?.metadata).to.deep.equal({});
    expect(await store.update("k2", { metadata: { agent: "a-2", user: "u@example.com" } })).to.equal(true);
    expect((await store.byId("k2"))?.metadata).to.deep.equal({ agent: "a-2", user: "u@example.com" });
    expect(
      await store.update("k2", { name: "m", scopes: ["calls", "usage:read"], allowedSkills: ["echo"], expiresAtMs: 7, metadata: {} }),
    ).to.equal(true);
    expect(await store.byId("k2")).to.deep.include({
      name: "m",
      scopes: ["calls", "usage:read"],
      allowedSkills: ["echo"],
      expiresAtMs: 7,
      metadata: {},
    });
    expect(await store.update("k2", { allowedSkills: null, expiresAtMs: null })).to.equal(true);
    expect(await store.byId("k2")).to.deep.include({ allowedSkills: null, expiresAtMs: null, name: "m" });
    expect(await store.update("k2", {})).to.equal(true);
    await store.revoke("k2", 9);
    expect(await store.update("k2", { name: "after" })).to.equal(false);
    expect(await store.update("k2", {})).to.equal(false);
    expect(await store.update("nope", { name: "x" })).to.equal(false);
    expect((await store.byId("k2"))?.name).to.equal("m");
  });

  it("SiweNoncesStore uses a nonce once, before expiry, and trims a client's oldest", async () => {
    const store = new SiweNoncesStore(db);
    await store.insert("n1", "client", 1, 100);
    await store.insert("n2", "client", 2, 100);
    await store.insert("n3", "client", 3, 50);
    await store.insert("other", "another client", 0, 100);
    expect(await store.pendingCount(10)).to.equal(4);
    expect(await store.firstExpiryMs(10)).to.equal(50);
    expect(await store.retryAfterMs(10)).to.equal(40);
    await store.trimClient("client", 10, 2);
    expect(await store.consume("n1", 10)).to.equal(false);
    expect(await store.consume("n2", 10)).to.equal(true);
    expect(await store.consume("n2", 10)).to.equal(false);
    expect(await store.consume("n3", 60)).to.equal(false);
    // Another client's nonce is not trimmed with this one's.
    expect(await store.consume("other", 10)).to.equal(true);
    expect(await store.purgeExpired(60)).to.equal(1);
    expect(await store.firstExpiryMs(100)).to.be.NaN;
    expect(await store.retryAfterMs(100)).to.equal(1);
  });

  it("SiweNoncesStore keeps none of a client's unused nonces when told to keep none", async () => {
    const store = new SiweNoncesStore(db);
    await store.insert("n1", "client", 1, 100);
    await store.insert("n2", "client", 2, 100);
    await store.trimClient("client", 10, 0);
    expect(await store.pendingCount(10)).to.equal(0);
  });

  it("OAuthStatesStore gives a state's verifier back once, to its own provider", async () => {
    const store = new OAuthStatesStore(db);
    await store.insert({
      stateHash: "s",
      provider: "github",
      codeVerifier: "v",
      nonce: "n",
      linkTo: null,
      createdAtMs: 1,
      expiresAtMs: 100,
    });
    expect(await store.consume("s", "google", 10)).to.equal(undefined);
    expect(await store.consume("s", "github", 10)).to.deep.equal({ codeVerifier: "v", nonce: "n", linkTo: null });
    expect(await store.consume("s", "github", 10)).to.equal(undefined);
    expect(await store.pendingCount(10)).to.equal(0);
  });

  it("EmailTokensStore peeks without using up, consumes once, and counts what an address was sent", async () => {
    const store = new EmailTokensStore(db);
    await store.insert({ tokenHash: "t", email: "ada@example.com", linkTo: "ada", createdAtMs: 5, expiresAtMs: 100 });
    expect(await store.countSentSince("ada@example.com", 4)).to.equal(1);
    expect(await store.countSentSince("ada@example.com", 5)).to.equal(0);
    expect(await store.peek("t", 10)).to.deep.equal({ email: "ada@example.com", linkTo: "ada", expiresAtMs: 100 });
    expect(await store.consume("t", 10)).to.deep.equal({ email: "ada@example.com", linkTo: "ada" });
    expect(await store.peek("t", 10)).to.equal(undefined);
    expect(await store.consume("t", 10)).to.equal(undefined);
  });

  it("EmailTokensStore refuses an expired token, to peek and to consume", async () => {
    const store = new EmailTokensStore(db);
    await store.insert({ tokenHash: "t", email: "ada@example.com", linkTo: null, createdAtMs: 5, expiresAtMs: 100 });
    expect(await store.peek("t", 100)).to.equal(undefined);
    expect(await store.consume("t", 100)).to.equal(undefined);
    expect(await store.purgeExpired(100)).to.equal(1);
  });

  it("OutboxStore writes a message a developer can read", async () => {
    await new OutboxStore(db).insert({ to: "ada@example.com", subject: "s", body: "b", createdAtMs: 3 });
    expect(await db.one("SELECT to_address, subject, body FROM outbox")).to.deep.equal({
      to_address: "ada@example.com",
      subject: "s",
      body: "b",
    });
  });

  describe("one-time secrets used at once from two database handles", () => {
    const TRIES = 20;
    /**
     * A second handle on the same database: on PostgreSQL its own pool, as another gateway replica
     * has; SQLite has one writer per file, so there the second is the same handle.
     */
    let other: Database;
    beforeEach(async () => {
      if (engine.name === "sqlite") {
        other = db;
        return;
      }
      other = new PostgresDatabase(createPostgresPool({ url: engine.lastUrl(), max: TRIES / 2 }));
      // Each pool opens its connections first, so that the tries below start together rather than
      // one after another as connections open.
      for (const handle of [db, other])
        await Promise.all(Array.from({ length: TRIES / 2 }, () => handle.transaction((tx) => tx.value("SELECT pg_sleep(0.05)"))));
    });
    afterEach(async () => {
      if (other !== db) await other.close();
    });

    /** TRIES uses at once, half on each handle; returns how many got through. */
    const race = async (use: (handle: Database) => Promise<boolean>) => {
      const attempts = Array.from({ length: TRIES }, (_, i) => use(i % 2 === 0 ? db : other));
      return (await Promise.all(attempts)).filter(Boolean).length;
    };

    it("accepts an e-mail link's token exactly once", async () => {
      await new EmailTokensStore(db).insert({ tokenHash: "t", email: "ada@example.com", linkTo: null, createdAtMs: 1, expiresAtMs: 100 });
      const accepted = await race(async (handle) => (await new EmailTokensStore(handle).consume("t", 10)) !== undefined);
      expect(accepted).to.equal(1);
      expect(await db.value("SELECT used_at FROM email_sign_in_tokens WHERE token_hash = 't'")).to.equal(10n);
    });

    it("accepts a SIWE nonce exactly once", async () => {
      await new SiweNoncesStore(db).insert("n", "client", 1, 100);
      expect(await race((handle) => new SiweNoncesStore(handle).consume("n", 10))).to.equal(1);
    });

    it("accepts an OAuth state exactly once", async () => {
      await new OAuthStatesStore(db).insert({
        stateHash: "s",
        provider: "google",
        codeVerifier: "v",
        nonce: "n",
        linkTo: null,
        createdAtMs: 1,
        expiresAtMs: 100,
      });
      const accepted = await race(async (handle) => (await new OAuthStatesStore(handle).consume("s", "google", 10)) !== undefined);
      expect(accepted).to.equal(1);
    });
  });
});
