import { createHash } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import Database from "better-sqlite3";
import { expect } from "chai";
import { SqliteApiKeysStore } from "../../server/identity/api-keys-store";
import { ApiKeys, KEY_PREFIX, LAST_USED_RESOLUTION_MS, hashKey, looksLikeKey } from "../../server/identity/api-keys";
import { base58Encode } from "../../server/identity/base58";
import { openDatabase, type Db } from "../../server/db/db";
import { SCHEMA } from "../../server/schema";
import { Ledger } from "../../server/ledger/ledger";
import { base58Decode } from "./base58-reference";

const ALICE = "user:alice";
const BOB = "user:bob";
const CACHE_TTL_MS = 1_000;

/** A well-formed key that was never issued: the shape of a real one, 32 fixed bytes. */
const UNISSUED_KEY = KEY_PREFIX + base58Encode(Buffer.alloc(32, 0x5a));

describe("ApiKeys", () => {
  let dir: string;
  let file: string;
  let db: Db;
  let keys: ApiKeys;

  // A file database, so a second connection can write to it as a script would.
  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "api-keys-test-"));
    file = path.join(dir, "gateway.db");
    db = openDatabase(file, SCHEMA);
    const ledger = new Ledger(db);
    ledger.ensureAccount({ id: ALICE, kind: "user", name: "Alice" });
    ledger.ensureAccount({ id: BOB, kind: "user", name: "Bob" });
    // The ledger's writes sit in an open batch until its commit; another connection could
    // not write (and this one could not be closed) before it ends.
    await ledger.commit.durable();
    keys = new ApiKeys(new SqliteApiKeysStore(db), CACHE_TTL_MS);
  });

  afterEach(() => {
    db.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  describe("create", () => {
    it("issues atom_ followed by the base58 of 32 bytes", () => {
      const { key } = keys.create(ALICE);
      expect(key.startsWith(KEY_PREFIX)).to.equal(true);
      expect(base58Decode(key.slice(KEY_PREFIX.length))).to.have.length(32);
      expect(looksLikeKey(key)).to.equal(true);
    });

    it("issues a different key every time", () => {
      const issued = new Set(Array.from({ length: 50 }, () => keys.create(ALICE).key));
      expect(issued.size).to.equal(50);
    });

    it("returns a record with the account, name, rate limit and a 12-character visible prefix", () => {
      const before = Date.now();
      const { key, record } = keys.create(ALICE, { name: "laptop", rateLimitPerMin: 30 });
      expect(record).to.include({ accountId: ALICE, name: "laptop", rateLimitPerMin: 30, revokedAtMs: null });
      expect(record.prefix).to.have.length(12).and.to.equal(key.slice(0, 12));
      expect(record.createdAtMs).to.be.within(before, Date.now());
      expect(keys.get(record.id)).to.deep.equal(record);
    });

    it("stores no rate limit when none is given", () => {
      expect(keys.create(ALICE).record.rateLimitPerMin).to.equal(null);
    });
  });

  describe("storage", () => {
    it("keeps only the SHA-256 of the key and its 12-character prefix in the api_keys row", () => {
      const { key, record } = keys.create(ALICE, { name: "ci" });
      const row = db.prepare("SELECT * FROM api_keys WHERE id = ?").get(record.id) as Record<string, unknown>;
      expect(row.hash).to.equal(createHash("sha256").update(key).digest("hex")).and.to.equal(hashKey(key));
      expect(row.prefix).to.equal(key.slice(0, 12));
      // The visible prefix holds the secret's first 7 characters; no column holds the rest.
      const hiddenPart = key.slice(12);
      for (const [column, value] of Object.entries(row)) {
        expect(String(value), `column ${column}`).not.to.include(hiddenPart);
      }
    });

    it("writes the full key nowhere in the database files", () => {
      const issued = Array.from({ length: 3 }, () => keys.create(ALICE).key);
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
      db.pragma("wal_checkpoint(TRUNCATE)");
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
    it("accepts a live key and returns its record", () => {
      const { key, record } = keys.create(ALICE);
      expect(keys.authenticate(key)).to.deep.equal(record);
    });

    it("tells apart the keys of two accounts", () => {
      const alice = keys.create(ALICE).key;
      const bob = keys.create(BOB).key;
      expect(keys.authenticate(alice)?.accountId).to.equal(ALICE);
      expect(keys.authenticate(bob)?.accountId).to.equal(BOB);
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
      it(`rejects a key made of ${what}`, () => {
        const { key } = keys.create(ALICE);
        const presented = mangle(key);
        expect(looksLikeKey(presented)).to.equal(false);
        expect(keys.authenticate(presented)).to.equal(undefined);
      });
    }

    it("rejects a well-formed key that was never issued", () => {
      keys.create(ALICE);
      expect(looksLikeKey(UNISSUED_KEY)).to.equal(true);
      expect(keys.authenticate(UNISSUED_KEY)).to.equal(undefined);
    });

    it("rejects an issued key with one character changed", () => {
      const { key } = keys.create(ALICE);
      const last = key.at(-1) === "2" ? "3" : "2";
      expect(keys.authenticate(key.slice(0, -1) + last)).to.equal(undefined);
    });

    it("rejects a revoked key", () => {
      const { key, record } = keys.create(ALICE);
      expect(keys.revoke(record.id)).to.equal(true);
      expect(keys.authenticate(key)).to.equal(undefined);
    });
  });

  describe("revoke", () => {
    it("records when the key was revoked", () => {
      const { record } = keys.create(ALICE);
      const before = Date.now();
      keys.revoke(record.id);
      expect(keys.get(record.id)!.revokedAtMs).to.be.within(before, Date.now());
    });

    it("returns false for a key already revoked, and keeps the first revocation time", () => {
      const { record } = keys.create(ALICE);
      keys.revoke(record.id);
      const revokedAtMs = keys.get(record.id)!.revokedAtMs;
      expect(keys.revoke(record.id)).to.equal(false);
      expect(keys.get(record.id)!.revokedAtMs).to.equal(revokedAtMs);
    });

    it("returns false for an unknown key id", () => {
      expect(keys.revoke("00000000-0000-4000-8000-000000000000")).to.equal(false);
    });

    it("leaves the account's other keys working", () => {
      const first = keys.create(ALICE);
      const second = keys.create(ALICE);
      keys.revoke(first.record.id);
      expect(keys.authenticate(second.key)?.id).to.equal(second.record.id);
    });
  });

  describe("the authentication cache", () => {
    const T0_MS = 1_800_000_000_000;
    let other: Database.Database;

    beforeEach(() => {
      other = new Database(file);
      other.pragma("busy_timeout = 5000");
    });

    afterEach(() => {
      other.close();
    });

    /** Revokes a key the way a script in another process does: straight in the table. */
    const revokeElsewhere = (id: string) =>
      expect(other.prepare("UPDATE api_keys SET revoked_at = ? WHERE id = ?").run(Date.now(), id).changes).to.equal(1);

    it("applies a revocation made in this process at once, even while the key is cached", () => {
      const { key, record } = keys.create(ALICE);
      expect(keys.authenticate(key, T0_MS)).to.deep.equal(record);
      keys.revoke(record.id);
      expect(keys.authenticate(key, T0_MS + 1)).to.equal(undefined);
    });

    it("answers from the cache within the TTL, so a revocation by another connection is not yet seen", () => {
      const { key, record } = keys.create(ALICE);
      expect(keys.authenticate(key, T0_MS)).to.deep.equal(record);
      revokeElsewhere(record.id);
      expect(keys.authenticate(key, T0_MS + CACHE_TTL_MS - 1)).to.deep.equal(record);
    });

    it("sees a revocation by another connection once the TTL has passed", () => {
      const { key, record } = keys.create(ALICE);
      keys.authenticate(key, T0_MS);
      revokeElsewhere(record.id);
      expect(keys.authenticate(key, T0_MS + CACHE_TTL_MS)).to.equal(undefined);
      // And it stays refused: the refusal is not cached as a success later on.
      expect(keys.authenticate(key, T0_MS + 10 * CACHE_TTL_MS)).to.equal(undefined);
    });

    it("sees a revocation by another connection at once when the key was never cached", () => {
      const { key, record } = keys.create(ALICE);
      revokeElsewhere(record.id);
      expect(keys.authenticate(key, T0_MS)).to.equal(undefined);
    });

    it("does not cache a refusal, so a key inserted by another connection works at once", () => {
      expect(keys.authenticate(UNISSUED_KEY, T0_MS)).to.equal(undefined);
      other
        .prepare("INSERT INTO api_keys (id, account_id, name, prefix, hash, created_at) VALUES (?, ?, '', ?, ?, ?)")
        .run("key-from-a-script", BOB, UNISSUED_KEY.slice(0, 12), hashKey(UNISSUED_KEY), Date.now());
      expect(keys.authenticate(UNISSUED_KEY, T0_MS + 1)).to.include({ id: "key-from-a-script", accountId: BOB });
    });

    it("with a TTL of 0 reads the table on every call", () => {
      const uncached = new ApiKeys(new SqliteApiKeysStore(db), 0);
      const { key, record } = uncached.create(ALICE);
      expect(uncached.authenticate(key, T0_MS)).to.deep.equal(record);
      revokeElsewhere(record.id);
      expect(uncached.authenticate(key, T0_MS)).to.equal(undefined);
    });
  });

  describe("listForAccount", () => {
    it("lists the account's keys, revoked ones included, and no other account's", () => {
      const laptop = keys.create(ALICE, { name: "laptop" }).record;
      const ci = keys.create(ALICE, { name: "ci" }).record;
      keys.create(BOB, { name: "bob's" });
      keys.revoke(laptop.id);

      const listed = keys.listForAccount(ALICE);
      expect(listed.map((r) => r.id)).to.have.members([laptop.id, ci.id]);
      expect(listed.find((r) => r.id === laptop.id)!.revokedAtMs).to.be.a("number");
      expect(listed.find((r) => r.id === ci.id)!.revokedAtMs).to.equal(null);
    });

    it("lists keys oldest first", () => {
      for (let i = 0; i < 5; i++) keys.create(ALICE, { name: `key ${i}` });
      const createdAtMs = keys.listForAccount(ALICE).map((r) => r.createdAtMs);
      expect(createdAtMs).to.deep.equal([...createdAtMs].sort((a, b) => a - b));
    });

    it("never exposes the hash", () => {
      keys.create(ALICE);
      const [record] = keys.listForAccount(ALICE);
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
      );
    });

    it("returns an empty list for an account without keys", () => {
      expect(keys.listForAccount(BOB)).to.deep.equal([]);
    });
  });

  describe("last use", () => {
    const T0_MS = 1_800_000_000_000;
    const lastUsedInDb = (id: string) => db.prepare("SELECT last_used_at FROM api_keys WHERE id = ?").pluck().get(id) as bigint | null;

    it("is null until the key authenticates, then shown in the list before it is written", () => {
      const { key, record } = keys.create(ALICE);
      expect(keys.listForAccount(ALICE)[0].lastUsedAtMs).to.equal(null);
      keys.authenticate(key, T0_MS);
      expect(keys.listForAccount(ALICE)[0].lastUsedAtMs).to.equal(T0_MS);
      expect(lastUsedInDb(record.id)).to.equal(null);
    });

    it("is written by flushLastUsed, at most once a minute per key", () => {
      const { key, record } = keys.create(ALICE);
      keys.authenticate(key, T0_MS);
      expect(keys.flushLastUsed()).to.equal(1);
      expect(lastUsedInDb(record.id)).to.equal(BigInt(T0_MS));

      // Within the minute, from the cache and from the database alike: nothing to write.
      keys.authenticate(key, T0_MS + 1);
      keys.authenticate(key, T0_MS + CACHE_TTL_MS + 1);
      keys.authenticate(key, T0_MS + LAST_USED_RESOLUTION_MS - 1);
      expect(keys.flushLastUsed()).to.equal(0);

      keys.authenticate(key, T0_MS + LAST_USED_RESOLUTION_MS);
      expect(keys.flushLastUsed()).to.equal(1);
      expect(lastUsedInDb(record.id)).to.equal(BigInt(T0_MS + LAST_USED_RESOLUTION_MS));
    });

    it("is not noted for a revoked, unknown or malformed key", () => {
      const { key, record } = keys.create(ALICE);
      keys.revoke(record.id);
      keys.authenticate(key, T0_MS);
      keys.authenticate(UNISSUED_KEY, T0_MS);
      keys.authenticate("atom_nope", T0_MS);
      expect(keys.flushLastUsed()).to.equal(0);
    });

    it("never moves back when an older time is written after a newer one", () => {
      const { key, record } = keys.create(ALICE);
      keys.authenticate(key, T0_MS + LAST_USED_RESOLUTION_MS * 5);
      keys.flushLastUsed();
      const other = new ApiKeys(new SqliteApiKeysStore(db), 0);
      other.authenticate(key, T0_MS);
      other.flushLastUsed();
      expect(lastUsedInDb(record.id)).to.equal(BigInt(T0_MS + LAST_USED_RESOLUTION_MS * 5));
    });
  });
});
