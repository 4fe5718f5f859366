import { createHash } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { expect } from "chai";
import { ApiKeys, KEY_PREFIX, LAST_USED_RESOLUTION_MS, hashKey, looksLikeKey } from "../../server/identity/api-keys";
import { base58Encode } from "../../server/identity/base58";
import { openDatabase } from "../../server/db/db";
import type { Database } from "../../server/db/sql";
import { SqliteDatabase } from "../../server/db/sqlite-database";
import { PostgresDatabase } from "../../server/db/postgres/database";
import { createPostgresPool } from "../../server/db/postgres/pool";
import { SCHEMA } from "../../server/schema";
import { Ledger } from "../../server/ledger/ledger";
import { describeEachEngine } from "../helpers/engines";
import { base58Decode } from "./base58-reference";

const ALICE = "user:alice";
const BOB = "user:bob";
const CACHE_TTL_MS = 1_000;

/** A well-formed key that was never issued: the shape of a real one, 32 fixed bytes. */
const UNISSUED_KEY = KEY_PREFIX + base58Encode(Buffer.alloc(32, 0x5a));

describeEachEngine("ApiKeys", (engine) => {
  let dir: string;
  let file: string;
  let db: Database;
  let keys: ApiKeys;

  // On SQLite a file database, so a second connection can write to it as a script would.
  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "api-keys-test-"));
    file = path.join(dir, "gateway.db");
    db = await engine.open(engine.name === "sqlite" ? { file } : {});
    const ledger = await Ledger.open(db);
    await ledger.ensureAccount({ id: ALICE, kind: "user", name: "Alice" });
    await ledger.ensureAccount({ id: BOB, kind: "user", name: "Bob" });
    // The ledger's writes may sit in an open batch until its commit; another connection could
    // not write before it ends.
    await db.durable();
    keys = new ApiKeys(db, CACHE_TTL_MS);
  });

  // The suite closes `db` (before this runs: its hook was declared first).
  afterEach(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  describe("create", () => {
    it("issues atom_ followed by the base58 of 32 bytes", async () => {
      const { key } = await keys.create(ALICE);
      expect(key.startsWith(KEY_PREFIX)).to.equal(true);
      expect(base58Decode(key.slice(KEY_PREFIX.length))).to.have.length(32);
      expect(looksLikeKey(key)).to.equal(true);
    });

    it("issues a different key every time", async () => {
      const issued = new Set(await Promise.all(Array.from({ length: 50 }, async () => (await keys.create(ALICE)).key)));
      expect(issued.size).to.equal(50);
    });

    it("returns a record with the account, name, rate limit and a 12-character visible prefix", async () => {
      const before = Date.now();
      const { key, record } = await keys.create(ALICE, { name: "laptop", rateLimitPerMin: 30 });
      expect(record).to.include({ accountId: ALICE, name: "laptop", rateLimitPerMin: 30, revokedAtMs: null });
      expect(record.prefix).to.have.length(12).and.to.equal(key.slice(0, 12));
      expect(record.createdAtMs).to.be.within(before, Date.now());
      expect(await keys.get(record.id)).to.deep.equal(record);
    });

    it("stores no rate limit when none is given", async () => {
      expect((await keys.create(ALICE)).record.rateLimitPerMin).to.equal(null);
    });
  });

  describe("storage", () => {
    it("keeps only the SHA-256 of the key and its 12-character prefix in the api_keys row", async () => {
      const { key, record } = await keys.create(ALICE, { name: "ci" });
      const row = (await db.one<Record<string, unknown>>("SELECT * FROM api_keys WHERE id = ?", [record.id]))!;
      expect(row.hash).to.equal(createHash("sha256").update(key).digest("hex")).and.to.equal(hashKey(key));
      expect(row.prefix).to.equal(key.slice(0, 12));
      // The visible prefix holds the secret's first 7 characters; no column holds the rest.
      const hiddenPart = key.slice(12);
      for (const [column, value] of Object.entries(row)) {
        expect(String(value), `column ${column}`).not.to.include(hiddenPart);
      }
    });

    it("writes the full key nowhere in the database files", async function () {
      // SQLite's files are the gateway's own; PostgreSQL's belong to its server, shared by every test database.
      if (!(db instanceof SqliteDatabase)) return this.skip();
      const sqlite = db;
      const issued: string[] = [];
      for (let i = 0; i < 3; i++) issued.push((await keys.create(ALICE)).key);
      // Look at the bytes on disk, main file and write-ahead log, before and after a
      // checkpoint: a key kept in any table, index or journal would show up here.
      const bytesOnDisk = () =>
        Buffer.concat(
          fs
            .readdirSync(dir)
            .filter((name) => name.startsWith("gateway.db"))
            .map((name) => fs.readFileSync(path.join(dir, name))),
        );
      const walBytes = bytesOnDisk();
      sqlite.db.pragma("wal_checkpoint(TRUNCATE)");
      const checkpointedBytes = bytesOnDisk();
      for (const key of issued) {
        const secret = key.slice(KEY_PREFIX.length);
        expect(walBytes.includes(key) || walBytes.includes(secret)).to.equal(false);
        expect(checkpointedBytes.includes(key) || checkpointedBytes.includes(secret)).to.equal(false);
        // The search is not blind: the hash, which is stored, is found.
        expect(checkpointedBytes.includes(hashKey(key))).to.equal(true);
      }
    });
  });

  describe("authenticate", () => {
    it("accepts a live key and returns its record", async () => {
      const { key, record } = await keys.create(ALICE);
      expect(await keys.authenticate(key)).to.deep.equal(record);
    });

    it("tells apart the keys of two accounts", async () => {
      const alice = (await keys.create(ALICE)).key;
      const bob = (await keys.create(BOB)).key;
      expect((await keys.authenticate(alice))?.accountId).to.equal(ALICE);
      expect((await keys.authenticate(bob))?.accountId).to.equal(BOB);
    });

    const malformed: [string, (key: string) => string][] = [
      ["an empty string", () => ""],
      ["the prefix alone", () => KEY_PREFIX],
      ["the secret without the prefix", (key) => key.slice(KEY_PREFIX.length)],
      ["another prefix", (key) => `atm_${key.slice(KEY_PREFIX.length)}`],
      ["an upper-case prefix", (key) => `ATOM_${key.slice(KEY_PREFIX.length)}`],
      ["the whole Authorization header value", (key) => `Bearer ${key}`],
      ["surrounding whitespace", (key) => ` ${key} `],
      ["a character outside base58", (key) => `${key.slice(0, -1)}0`],
      ["a secret too short", (key) => key.slice(0, KEY_PREFIX.length + 31)],
      ["a secret too long", (key) => key + "2".repeat(10)],
    ];
    for (const [what, mangle] of malformed) {
      it(`rejects a key made of ${what}`, async () => {
        const { key } = await keys.create(ALICE);
        const presented = mangle(key);
        expect(looksLikeKey(presented)).to.equal(false);
        expect(await keys.authenticate(presented)).to.equal(undefined);
      });
    }

    it("rejects a well-formed key that was never issued", async () => {
      await keys.create(ALICE);
      expect(looksLikeKey(UNISSUED_KEY)).to.equal(true);
      expect(await keys.authenticate(UNISSUED_KEY)).to.equal(undefined);
    });

    it("rejects an issued key with one character changed", async () => {
      const { key } = await keys.create(ALICE);
      const last = key.at(-1) === "2" ? "3" : "2";
      expect(await keys.authenticate(key.slice(0, -1) + last)).to.equal(undefined);
    });

    it("rejects a revoked key", async () => {
      const { key, record } = await keys.create(ALICE);
      expect(await keys.revoke(record.id)).to.equal(true);
      expect(await keys.authenticate(key)).to.equal(undefined);
    });
  });

  describe("revoke", () => {
    it("records when the key was revoked", async () => {
      const { record } = await keys.create(ALICE);
      const before = Date.now();
      await keys.revoke(record.id);
      expect((await keys.get(record.id))!.revokedAtMs).to.be.within(before, Date.now());
    });

    it("returns false for a key already revoked, and keeps the first revocation time", async () => {
      const { record } = await keys.create(ALICE);
      await keys.revoke(record.id);
      const revokedAtMs = (await keys.get(record.id))!.revokedAtMs;
      expect(await keys.revoke(record.id)).to.equal(false);
      expect((await keys.get(record.id))!.revokedAtMs).to.equal(revokedAtMs);
    });

    it("says true to exactly one of two revocations at once", async () => {
      const { record } = await keys.create(ALICE);
      const answers = await Promise.all([keys.revoke(record.id), keys.revoke(record.id)]);
      expect(answers.sort()).to.deep.equal([false, true]);
    });

    it("returns false for an unknown key id", async () => {
      expect(await keys.revoke("00000000-0000-4000-8000-000000000000")).to.equal(false);
    });

    it("leaves the account's other keys working", async () => {
      const first = await keys.create(ALICE);
      const second = await keys.create(ALICE);
      await keys.revoke(first.record.id);
      expect((await keys.authenticate(second.key))?.id).to.equal(second.record.id);
    });
  });

  describe("the authentication cache", () => {
    const T0_MS = 1_800_000_000_000;
    /** Another connection to the same database: a script's on SQLite, another replica's pool on PostgreSQL. */
    let other: Database;

    beforeEach(() => {
      other =
        engine.name === "sqlite"
          ? new SqliteDatabase(openDatabase(file, SCHEMA))
          : new PostgresDatabase(createPostgresPool({ url: engine.lastUrl(), max: 2 }));
    });

    afterEach(async () => {
      await other.close();
    });

    /** Revokes a key the way a script or another replica does: straight in the table, not through `keys`. */
    const revokeElsewhere = async (id: string) =>
      expect(
        await other.transaction((tx) => tx.run("UPDATE api_keys SET revoked_at = ? WHERE id = ?", [Date.now(), id]), { durable: true }),
      ).to.equal(1);

    it("applies a revocation made in this process at once, even while the key is cached", async () => {
      const { key, record } = await keys.create(ALICE);
      expect(await keys.authenticate(key, T0_MS)).to.deep.equal(record);
      await keys.revoke(record.id);
      expect(await keys.authenticate(key, T0_MS + 1)).to.equal(undefined);
    });

    it("answers from the cache within the TTL, so a revocation by another connection is not yet seen", async () => {
      const { key, record } = await keys.create(ALICE);
      expect(await keys.authenticate(key, T0_MS)).to.deep.equal(record);
      await revokeElsewhere(record.id);
      expect(await keys.authenticate(key, T0_MS + CACHE_TTL_MS - 1)).to.deep.equal(record);
    });

    it("sees a revocation by another connection once the TTL has passed", async () => {
      const { key, record } = await keys.create(ALICE);
      await keys.authenticate(key, T0_MS);
      await revokeElsewhere(record.id);
      expect(await keys.authenticate(key, T0_MS + CACHE_TTL_MS)).to.equal(undefined);
      // And it stays refused: the refusal is not cached as a success later on.
      expect(await keys.authenticate(key, T0_MS + 10 * CACHE_TTL_MS)).to.equal(undefined);
    });

    it("sees a revocation by another connection within the TTL once told to forget the key", async () => {
      const { key, record } = await keys.create(ALICE);
      const kept = await keys.create(ALICE);
      await keys.authenticate(key, T0_MS);
      await keys.authenticate(kept.key, T0_MS);
      await revokeElsewhere(record.id);
      keys.forget(record.id);
      expect(await keys.authenticate(key, T0_MS + 1)).to.equal(undefined);
      // Only that key left the cache: the other is still answered from it, revoked elsewhere or not.
      await revokeElsewhere(kept.record.id);
      expect((await keys.authenticate(kept.key, T0_MS + 1))?.id).to.equal(kept.record.id);
      keys.forgetAll();
      expect(await keys.authenticate(kept.key, T0_MS + 2)).to.equal(undefined);
    });

    it("does not cache a key read before a forget that came while it was being read", async () => {
      const { key, record } = await keys.create(ALICE);
      // The lookup reads the live row; the revocation elsewhere and its forget land before the lookup ends.
      const lookup = keys.authenticate(key, T0_MS);
      keys.forget(record.id);
      expect(await lookup).to.deep.equal(record);
      await revokeElsewhere(record.id);
      expect(await keys.authenticate(key, T0_MS + 1)).to.equal(undefined);
    });

    it("sees a revocation by another connection at once when the key was never cached", async () => {
      const { key, record } = await keys.create(ALICE);
      await revokeElsewhere(record.id);
      expect(await keys.authenticate(key, T0_MS)).to.equal(undefined);
    });

    it("does not cache a refusal, so a key inserted by another connection works at once", async () => {
      expect(await keys.authenticate(UNISSUED_KEY, T0_MS)).to.equal(undefined);
      await other.transaction(
        (tx) =>
          tx.run("INSERT INTO api_keys (id, account_id, name, prefix, hash, created_at) VALUES (?, ?, '', ?, ?, ?)", [
            "key-from-a-script",
            BOB,
            UNISSUED_KEY.slice(0, 12),
            hashKey(UNISSUED_KEY),
            Date.now(),
          ]),
        { durable: true },
      );
      expect(await keys.authenticate(UNISSUED_KEY, T0_MS + 1)).to.include({ id: "key-from-a-script", accountId: BOB });
    });

    it("with a TTL of 0 reads the table on every call", async () => {
      const uncached = new ApiKeys(db, 0);
      const { key, record } = await uncached.create(ALICE);
      expect(await uncached.authenticate(key, T0_MS)).to.deep.equal(record);
      await revokeElsewhere(record.id);
      expect(await uncached.authenticate(key, T0_MS)).to.equal(undefined);
    });
  });

  describe("listForAccount", () => {
    it("lists the account's keys, revoked ones included, and no other account's", async () => {
      const laptop = (await keys.create(ALICE, { name: "laptop" })).record;
      const ci = (await keys.create(ALICE, { name: "ci" })).record;
      await keys.create(BOB, { name: "bob's" });
      await keys.revoke(laptop.id);

      const listed = await keys.listForAccount(ALICE);
      expect(listed.map((r) => r.id)).to.have.members([laptop.id, ci.id]);
      expect(listed.find((r) => r.id === laptop.id)!.revokedAtMs).to.be.a("number");
      expect(listed.find((r) => r.id === ci.id)!.revokedAtMs).to.equal(null);
    });

    it("lists keys oldest first", async () => {
      for (let i = 0; i < 5; i++) await keys.create(ALICE, { name: `key ${i}` });
      const createdAtMs = (await keys.listForAccount(ALICE)).map((r) => r.createdAtMs);
      expect(createdAtMs).to.deep.equal([...createdAtMs].sort((a, b) => a - b));
    });

    it("never exposes the hash", async () => {
      await keys.create(ALICE);
      const [record] = await keys.listForAccount(ALICE);
      expect(record).to.have.all.keys(
        "id",
        "accountId",
        "name",
        "prefix",
        "rateLimitPerMin",
        "accountDailyCallCap",
        "createdAtMs",
        "revokedAtMs",
        "lastUsedAtMs",
        "scopes",
        "allowedSkills",
        "expiresAtMs",
        "metadata",
      );
    });

    it("returns an empty list for an account without keys", async () => {
      expect(await keys.listForAccount(BOB)).to.deep.equal([]);
    });
  });

  describe("last use", () => {
    const T0_MS = 1_800_000_000_000;
    const lastUsedInDb = (id: string) => db.value<bigint | null>("SELECT last_used_at FROM api_keys WHERE id = ?", [id]);

    it("is null until the key authenticates, then shown in the list before it is written", async () => {
      const { key, record } = await keys.create(ALICE);
      expect((await keys.listForAccount(ALICE))[0].lastUsedAtMs).to.equal(null);
      await keys.authenticate(key, T0_MS);
      expect((await keys.listForAccount(ALICE))[0].lastUsedAtMs).to.equal(T0_MS);
      expect(await lastUsedInDb(record.id)).to.equal(null);
    });

    it("is written by flushLastUsed, at most once a minute per key", async () => {
      const { key, record } = await keys.create(ALICE);
      await keys.authenticate(key, T0_MS);
      expect(await keys.flushLastUsed()).to.equal(1);
      expect(await lastUsedInDb(record.id)).to.equal(BigInt(T0_MS));

      // Within the minute, from the cache and from the database alike: nothing to write.
      await keys.authenticate(key, T0_MS + 1);
      await keys.authenticate(key, T0_MS + CACHE_TTL_MS + 1);
      await keys.authenticate(key, T0_MS + LAST_USED_RESOLUTION_MS - 1);
      expect(await keys.flushLastUsed()).to.equal(0);

      await keys.authenticate(key, T0_MS + LAST_USED_RESOLUTION_MS);
      expect(await keys.flushLastUsed()).to.equal(1);
      expect(await lastUsedInDb(record.id)).to.equal(BigInt(T0_MS + LAST_USED_RESOLUTION_MS));
    });

    it("is not noted for a revoked, unknown or malformed key", async () => {
      const { key, record } = await keys.create(ALICE);
      await keys.revoke(record.id);
      await keys.authenticate(key, T0_MS);
      await keys.authenticate(UNISSUED_KEY, T0_MS);
      await keys.authenticate("atom_nope", T0_MS);
      expect(await keys.flushLastUsed()).to.equal(0);
    });

    it("never moves back when an older time is written after a newer one", async () => {
      const { key, record } = await keys.create(ALICE);
      await keys.authenticate(key, T0_MS + LAST_USED_RESOLUTION_MS * 5);
      await keys.flushLastUsed();
      const other = new ApiKeys(db, 0);
      await other.authenticate(key, T0_MS);
      await other.flushLastUsed();
      expect(await lastUsedInDb(record.id)).to.equal(BigInt(T0_MS + LAST_USED_RESOLUTION_MS * 5));
    });
  });
});
