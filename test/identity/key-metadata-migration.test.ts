import { expect } from "chai";
import { openDatabase } from "../../server/db/db";
import { GroupCommit } from "../../server/db/group-commit";
import { PostgresDatabase } from "../../server/db/postgres/database";
import { loadPostgresMigrations, migratePostgres } from "../../server/db/postgres/migrate";
import { createPostgresPool } from "../../server/db/postgres/pool";
import type { Database } from "../../server/db/sql";
import { SqliteDatabase } from "../../server/db/sqlite-database";
import { ApiKeysStore } from "../../server/identity/api-keys-store";
import { SCHEMA } from "../../server/schema";
import { sharedPostgres } from "../helpers/engines";
import { makeTempDir } from "../helpers/ledger";
import { postgresUnavailableReason } from "../helpers/postgres";

/**
 * SQLite version 24 and PostgreSQL migration 0010 give keys their metadata (docs/keys.md, Keys made by code). A key
 * made before them keeps everything it had (its scopes, allowed skills, expiry, revocation) and has no metadata; a
 * key changed afterwards stores its metadata on either engine.
 */
interface Before {
  /** A database at the version before metadata, with an account "ada". */
  open(): Promise<Database>;
  /** Applies the migration that adds metadata. */
  migrate(): Promise<void>;
  current(): Database;
  close(): Promise<void>;
}

const OLD_KEY =
  "INSERT INTO api_keys (id, account_id, name, prefix, hash, rate_limit_per_min, created_at, revoked_at, last_used_at, scopes, allowed_skills, expires_at)" +
  " VALUES (?, 'ada', 'agent', 'atom_abc', ?, NULL, 1, ?, NULL, 'calls usage:read', '[\"echo\"]', 4102444800000)";

function sqliteBefore(): Before {
  const tmp = makeTempDir();
  const file = tmp.file("keys.db");
  let db: Database | undefined;
  const open = (versionMax: number) => {
    const sqlite = openDatabase(
      file,
      SCHEMA.filter((m) => m.version <= versionMax),
    );
    return new SqliteDatabase(sqlite, new GroupCommit(sqlite));
  };
  return {
    async open() {
      db = open(23);
      await db.run("INSERT INTO accounts (id, kind, name, created_at) VALUES ('ada', 'user', 'Ada', 1)");
      return db;
    },
    async migrate() {
      await db!.close();
      // Up to the version that adds metadata, whatever later versions add.
      db = open(24);
      expect(await db.value("SELECT MAX(version) FROM schema_migrations")).to.equal(24n);
    },
    current: () => db!,
    async close() {
      await db?.close();
      tmp.remove();
    },
  };
}

function postgresBefore(): Before {
  let pool: ReturnType<typeof createPostgresPool> | undefined;
  let db: Database | undefined;
  return {
    async open() {
      const { server } = await sharedPostgres();
      const name = `sg_metadata_${process.pid}_${Date.now()}`;
      await server.createDatabase(name);
      pool = createPostgresPool({ url: server.urlFor(name), max: 4 });
      await migratePostgres(pool, { migrations: loadPostgresMigrations().filter((m) => m.version < 10) });
      db = new PostgresDatabase(pool);
      await db.run("INSERT INTO accounts (id, kind, name, created_at) VALUES ('ada', 'user', 'Ada', 1)");
      return db;
    },
    async migrate() {
      const upToMetadata = loadPostgresMigrations().filter((m) => m.version <= 10);
      expect((await migratePostgres(pool!, { migrations: upToMetadata })).applied).to.deep.equal([10]);
    },
    current: () => db!,
    async close() {
      await db?.close();
    },
  };
}

for (const [engine, before] of [
  ["sqlite", sqliteBefore],
  ["postgres", postgresBefore],
] as const) {
  describe(`API keys made before metadata, migrated (${engine})`, function () {
    this.timeout(60_000);
    let at: Before;
    beforeEach(async function () {
      if (engine === "postgres") {
        const reason = postgresUnavailableReason();
        if (reason !== null) {
          if (process.env.CI === "true") throw new Error(reason);
          console.warn(`      skipped: ${reason}`);
          this.skip();
        }
      }
      at = before();
      const db = await at.open();
      await db.run(OLD_KEY, ["old", "hash-old", null]);
      await db.run(OLD_KEY, ["revoked", "hash-revoked", 5]);
      await at.migrate();
    });
    afterEach(async () => {
      await at?.close();
    });

    it("keeps what each key could do and when it was revoked, with no metadata", async () => {
      const store = new ApiKeysStore(at.current());
      for (const [id, revokedAtMs] of [
        ["old", null],
        ["revoked", 5],
      ] as const) {
        expect(await store.byId(id)).to.deep.include({
          scopes: ["calls", "usage:read"],
          allowedSkills: ["echo"],
          expiresAtMs: 4102444800000,
          revokedAtMs,
          metadata: {},
        });
      }
    });

    it("stores the metadata a migrated key is given, and none again when it is emptied", async () => {
      const store = new ApiKeysStore(at.current());
      expect(await store.update("old", { metadata: { agent: "researcher-7", end_user: "u_42" } })).to.equal(true);
      expect((await store.byId("old"))!.metadata).to.deep.equal({ agent: "researcher-7", end_user: "u_42" });
      expect(await at.current().value("SELECT metadata FROM api_keys WHERE id = 'old'")).to.equal(
        '{"agent":"researcher-7","end_user":"u_42"}',
      );
      expect(await store.update("old", { metadata: {} })).to.equal(true);
      expect(await at.current().value("SELECT metadata FROM api_keys WHERE id = 'old'")).to.equal(null);
      expect(await store.update("revoked", { metadata: { agent: "x" } })).to.equal(false);
    });
  });
}
