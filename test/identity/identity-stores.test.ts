import { expect } from "chai";
import { type Db, openDatabase } from "../../server/db/db";
import { SCHEMA } from "../../server/schema";
import { SqliteApiKeysStore } from "../../server/identity/api-keys-store";
import { SqliteSessionsStore } from "../../server/identity/sessions-store";
import {
  SqliteEmailTokensStore,
  SqliteOAuthStatesStore,
  SqliteOutboxStore,
  SqliteSiweNoncesStore,
} from "../../server/identity/sign-in-store";
import { Ledger } from "../../server/ledger/ledger";

describe("identity's stores on a real SQLite database", () => {
  let db: Db;

  beforeEach(() => {
    db = openDatabase(":memory:", SCHEMA);
    new Ledger(db).ensureAccount({ id: "ada", kind: "user", name: "Ada" });
  });
  afterEach(() => db.close());

  it("SessionsStore keeps sessions by token hash, revokes once and purges the dead ones", () => {
    const store = new SqliteSessionsStore(db);
    store.insertSession({ tokenHash: "h1", accountId: "ada", csrfToken: "c1", createdAtMs: 1, expiresAtMs: 100 });
    store.insertSession({ tokenHash: "h2", accountId: "ada", csrfToken: "c2", createdAtMs: 1, expiresAtMs: 10 });
    expect(store.sessionByTokenHash("h1")).to.deep.equal({ accountId: "ada", csrfToken: "c1", expiresAtMs: 100, revokedAtMs: null });
    expect(store.revokeSession("h1", 5)).to.equal(true);
    expect(store.revokeSession("h1", 6)).to.equal(false);
    expect(store.sessionByTokenHash("h1")?.revokedAtMs).to.equal(5);
    expect(store.purgeSessions(50)).to.equal(2);
    expect(store.sessionByTokenHash("h2")).to.equal(undefined);
  });

  it("SessionsStore maps identities to their account", () => {
    const store = new SqliteSessionsStore(db);
    store.insertIdentity("email", "ada@example.com", "ada", 7);
    expect(store.identityOwner("email", "ada@example.com")).to.equal("ada");
    expect(store.identityOwner("github", "ada@example.com")).to.equal(undefined);
    expect(store.identitiesOf("ada")).to.deep.equal([{ provider: "email", subject: "ada@example.com", createdAtMs: 7 }]);
    expect(() => store.insertIdentity("email", "ada@example.com", "ada", 8)).to.throw(/UNIQUE/);
  });

  it("ApiKeysStore finds keys by hash and id with the account's cap, revokes once, never moves last use back", () => {
    const store = new SqliteApiKeysStore(db);
    store.insert({ id: "k1", accountId: "ada", name: "n", prefix: "atom_abc", hash: "sha", rateLimitPerMin: 5, createdAtMs: 1 });
    const byHash = store.byHash("sha");
    expect(byHash).to.include({ id: "k1", accountId: "ada", rateLimitPerMin: 5, accountDailyCallCap: null, revokedAtMs: null });
    expect(store.byId("k1")).to.deep.equal(byHash);
    store.recordLastUse("k1", 50);
    store.recordLastUse("k1", 40);
    expect(store.byId("k1")?.lastUsedAtMs).to.equal(50);
    expect(store.revoke("k1", 60)).to.equal(true);
    expect(store.revoke("k1", 61)).to.equal(false);
    expect(store.ofAccount("ada").map((k) => k.revokedAtMs)).to.deep.equal([60]);
  });

  it("SiweNoncesStore uses a nonce once, before expiry, and trims a client's oldest", () => {
    const store = new SqliteSiweNoncesStore(db);
    store.insert("n1", "client", 1, 100);
    store.insert("n2", "client", 2, 100);
    store.insert("n3", "client", 3, 50);
    expect(store.pendingCount(10)).to.equal(3);
    expect(store.firstExpiryMs(10)).to.equal(50);
    store.trimClient("client", 10, 2);
    expect(store.consume("n1", 10)).to.equal(false);
    expect(store.consume("n2", 10)).to.equal(true);
    expect(store.consume("n2", 10)).to.equal(false);
    expect(store.consume("n3", 60)).to.equal(false);
    expect(store.purgeExpired(60)).to.equal(1);
  });

  it("OAuthStatesStore gives a state's verifier back once, to its own provider", () => {
    const store = new SqliteOAuthStatesStore(db);
    store.insert({ stateHash: "s", provider: "github", codeVerifier: "v", nonce: "n", linkTo: null, createdAtMs: 1, expiresAtMs: 100 });
    expect(store.consume("s", "google", 10)).to.equal(undefined);
    expect(store.consume("s", "github", 10)).to.deep.equal({ codeVerifier: "v", nonce: "n", linkTo: null });
    expect(store.consume("s", "github", 10)).to.equal(undefined);
    expect(store.pendingCount(10)).to.equal(0);
  });

  it("EmailTokensStore peeks without using up, consumes once, and counts what an address was sent", () => {
    const store = new SqliteEmailTokensStore(db);
    store.insert({ tokenHash: "t", email: "ada@example.com", linkTo: "ada", createdAtMs: 5, expiresAtMs: 100 });
    expect(store.countSentSince("ada@example.com", 4)).to.equal(1);
    expect(store.countSentSince("ada@example.com", 5)).to.equal(0);
    expect(store.peek("t", 10)).to.deep.equal({ email: "ada@example.com", linkTo: "ada", expiresAtMs: 100 });
    expect(store.consume("t", 10)).to.deep.equal({ email: "ada@example.com", linkTo: "ada" });
    expect(store.peek("t", 10)).to.equal(undefined);
    expect(store.consume("t", 10)).to.equal(undefined);
  });

  it("OutboxStore writes a message a developer can read", () => {
    new SqliteOutboxStore(db).insert({ to: "ada@example.com", subject: "s", body: "b", createdAtMs: 3 });
    expect(db.prepare("SELECT to_address, subject, body FROM outbox").get()).to.deep.equal({
      to_address: "ada@example.com",
      subject: "s",
      body: "b",
    });
  });
});
