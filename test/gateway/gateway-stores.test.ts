import { expect } from "chai";
import { SqliteCallsStore } from "../../server/gateway/calls-store";
import { SqliteIdempotencyStore } from "../../server/gateway/idempotency-store";
import { type Db, openDatabase } from "../../server/db/db";
import { SCHEMA } from "../../server/schema";
import { Ledger } from "../../server/ledger/ledger";
import { SqliteSkillsStore } from "../../server/catalog/skills-store";

describe("gateway's stores on a real SQLite database", () => {
  let db: Db;

  beforeEach(() => {
    db = openDatabase(":memory:", SCHEMA);
    new Ledger(db).ensureAccount({ id: "ada", kind: "user", name: "Ada" });
  });
  afterEach(() => db.close());

  it("IdempotencyStore reserves, completes only what is in progress, and purges by age", () => {
    const store = new SqliteIdempotencyStore(db);
    store.reserve("ada", "k", "hash1", 10);
    expect(store.get("ada", "k")).to.deep.equal({
      requestHash: "hash1",
      state: "in_progress",
      statusCode: null,
      responseBody: null,
      createdAtMs: 10,
    });
    store.complete("ada", "k", 200, "{}");
    store.complete("ada", "k", 500, "later");
    expect(store.get("ada", "k")).to.include({ state: "completed", statusCode: 200, responseBody: "{}" });
    store.abandon("ada", "k");
    expect(store.get("ada", "k")).to.not.equal(undefined);
    store.reserve("ada", "k", "hash2", 20);
    expect(store.get("ada", "k")).to.include({ requestHash: "hash2", state: "in_progress", statusCode: null });
    expect(store.dropInProgress()).to.equal(1);
    store.reserve("ada", "old", "h", 1);
    store.reserve("ada", "new", "h", 30);
    expect(store.purgeCreatedBefore(5)).to.equal(1);
    expect(store.get("ada", "new")).to.not.equal(undefined);
  });

  it("CallsStore records calls, pages usage newest first, counts per day and names a call's owner", () => {
    new SqliteSkillsStore(db).upsert(
      {
        id: "00000000-0000-4000-8000-000000000001",
        slug: "echo",
        name: "Echo",
        description: "",
        priceMicros: 5n,
        sellerAccountId: "ada",
        backendUrl: "http://127.0.0.1:1/",
        timeoutMs: 1000,
        rateLimitPerMin: null,
        inputSchemaJson: null,
        signingSecret: "s",
      },
      1,
    );
    const store = new SqliteCallsStore(db);
    const base = {
      accountId: "ada",
      apiKeyId: "k",
      skillId: "00000000-0000-4000-8000-000000000001",
      endpoint: "call" as const,
      holdId: null,
      latencyUs: 3,
    };
    store.record({ ...base, id: "c1", httpStatus: 200, outcome: "success", chargedMicros: 0n, createdAtMs: 86_400_000 });
    store.record({ ...base, id: "c2", httpStatus: 429, outcome: "rate_limited", chargedMicros: 0n, createdAtMs: 86_400_001 });
    store.record({ ...base, id: "c3", httpStatus: 200, outcome: "success", chargedMicros: 0n, createdAtMs: 2 * 86_400_000 });
    expect(store.recent("ada", 10).map((r) => [r.id, r.skillSlug])).to.deep.equal([
      ["c3", "echo"],
      ["c2", "echo"],
      ["c1", "echo"],
    ]);
    expect(store.recent("ada", 1, 2 * 86_400_000).map((r) => r.id)).to.deep.equal(["c2"]);
    expect(store.daily("ada", 0)).to.deep.equal([
      { day: 1, spendMicros: 0n, calls: 1 },
      { day: 2, spendMicros: 0n, calls: 1 },
    ]);
    expect(store.countSince("ada", 0)).to.equal(2);
    expect(store.ownerOf("c1")).to.equal("ada");
    expect(store.ownerOf("nope")).to.equal(undefined);
  });
});
