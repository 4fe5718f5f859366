import { expect } from "chai";
import { openDatabase } from "../../server/db/db";
import { GroupCommit } from "../../server/db/group-commit";
import { PostgresDatabase } from "../../server/db/postgres/database";
import { loadPostgresMigrations, migratePostgres } from "../../server/db/postgres/migrate";
import { createPostgresPool } from "../../server/db/postgres/pool";
import type { Database } from "../../server/db/sql";
import { SqliteDatabase } from "../../server/db/sqlite-database";
import { authorize } from "../../server/http/auth";
import { takesApiKey } from "../../server/http/contract/common";
import { OPERATIONS } from "../../server/http/contract/document";
import { ApiKeysStore } from "../../server/identity/api-keys-store";
import { SCHEMA } from "../../server/schema";
import { sharedPostgres } from "../helpers/engines";
import { makeTempDir } from "../helpers/ledger";
import { postgresUnavailableReason } from "../helpers/postgres";

/**
 * SQLite version 23 and PostgreSQL migration 0009 give every key scopes. A key made before them could call skills,
 * read its account's books and make withdrawal vouchers, and nothing else an API key can reach: migrated, it keeps
 * exactly that (calls, usage:read, funds:withdraw), never keys:manage, every skill, no expiry. A key written after
 * them without naming its scopes gets the least, calls.
 */
interface Before {
  /** A database at the version before scopes, with an account "ada". */
  open(): Promise<Database>;
  /** Applies the migrations that give keys their scopes. */
  migrate(): Promise<void>;
  /** The database as it stands (after `migrate`, the migrated one). */
  current(): Database;
  close(): Promise<void>;
}

const OLD_KEY =
  "INSERT INTO api_keys (id, account_id, name, prefix, hash, rate_limit_per_min, created_at, revoked_at, last_used_at) VALUES (?, 'ada', 'laptop', 'atom_abc', ?, NULL, 1, ?, NULL)";

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
      db = open(21);
      await db.run("INSERT INTO accounts (id, kind, name, created_at) VALUES ('ada', 'user', 'Ada', 1)");
      return db;
    },
    async migrate() {
      await db!.close();
      db = open(Number.MAX_SAFE_INTEGER);
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
      const name = `sg_scopes_${process.pid}_${Date.now()}`;
      await server.createDatabase(name);
      pool = createPostgresPool({ url: server.urlFor(name), max: 4 });
      await migratePostgres(pool, { migrations: loadPostgresMigrations().filter((m) => m.version < 9) });
      db = new PostgresDatabase(pool);
      await db.run("INSERT INTO accounts (id, kind, name, created_at) VALUES ('ada', 'user', 'Ada', 1)");
      return db;
    },
    async migrate() {
      expect((await migratePostgres(pool!)).applied).to.include(9);
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
  describe(`API keys made before scopes, migrated (${engine})`, function () {
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

    it("keeps exactly what an old key could do: calls, usage:read and funds:withdraw, every skill, no expiry", async () => {
      const store = new ApiKeysStore(at.current());
      for (const id of ["old", "revoked"]) {
        const key = (await store.byId(id))!;
        expect(key).to.deep.include({ scopes: ["calls", "usage:read", "funds:withdraw"], allowedSkills: null, expiresAtMs: null });
      }
      const key = (await store.byId("old"))!;
      // Every operation an API key could reach before is still open to it...
      const keyed = OPERATIONS.filter(takesApiKey);
      for (const op of keyed.filter((o) => o.scope !== "keys:manage"))
        expect(authorize(key, op), `${op.method} ${op.path}`).to.deep.equal({});
      // ...and nothing new: keys:manage (the provisioning API, /v1/keys, which took only a session before) it never had.
      expect(key.scopes).to.not.include("keys:manage");
      const provisioning = keyed.filter((o) => o.scope === "keys:manage");
      expect(provisioning.map((o) => `${o.method} ${o.path}`)).to.include("post /v1/keys");
      for (const op of provisioning) expect(() => authorize(key, op), `${op.method} ${op.path}`).to.throw(/lacks the keys:manage scope/);
    });

    it("gives a key written afterwards without scopes the least: calls", async () => {
      const migrated = at.current();
      await migrated.run(OLD_KEY, ["new", "hash-new", null]);
      expect((await new ApiKeysStore(migrated).byId("new"))!.scopes).to.deep.equal(["calls"]);
    });
  });
}
