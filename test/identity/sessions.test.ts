import fs from "node:fs";
import { expect } from "chai";
import type { Database } from "../../server/db/sql";
import { SqliteDatabase } from "../../server/db/sqlite-database";
import { PostgresDatabase } from "../../server/db/postgres/database";
import { createPostgresPool } from "../../server/db/postgres/pool";
import { Ledger } from "../../server/ledger/ledger";
import { Sessions } from "../../server/identity/sessions";
import { CSRF_HEADER, SESSION_COOKIE, readCookie } from "../../server/http/session-cookies";
import { describeEachEngine } from "../helpers/engines";
import { type TestStack, startStack } from "../helpers/gateway";

describeEachEngine("Sessions", (engine) => {
  let db: Database;
  let sessions: Sessions;
  beforeEach(async () => {
    db = await engine.open();
    sessions = new Sessions(await Ledger.open(db));
  });

  const accountOf = (result: Awaited<ReturnType<Sessions["signIn"]>>) => {
    if (!result.ok) throw new Error(`expected a sign-in, got ${result.reason}`);
    return result.accountId;
  };

  describe("signIn", () => {
    it("creates an account on an identity's first use and finds it afterwards", async () => {
      const first = await sessions.signIn("email", "ada@example.com");
      expect(first).to.include({ ok: true, created: true, linked: false });
      const again = await sessions.signIn("email", "ada@example.com");
      expect(again).to.deep.equal({ ok: true, accountId: accountOf(first), created: false, linked: false });
      expect(await db.value("SELECT name FROM accounts WHERE id = ?", [accountOf(first)])).to.equal("ada@example.com");
    });

    it("links a new identity to the signed-in account, so one person signs in several ways", async () => {
      const ada = accountOf(await sessions.signIn("email", "ada@example.com"));
      const github = await sessions.signIn("github", "12345", { linkTo: ada });
      expect(github).to.deep.equal({ ok: true, accountId: ada, created: false, linked: true });
      expect((await sessions.identitiesOf(ada)).map((i) => i.provider)).to.deep.equal(["email", "github"]);
      expect(await sessions.ownerOf("github", "12345")).to.equal(ada);
    });

    it("refuses to link an identity that belongs to another account", async () => {
      const ada = accountOf(await sessions.signIn("email", "ada@example.com"));
      await sessions.signIn("google", "g-1");
      expect(await sessions.signIn("google", "g-1", { linkTo: ada })).to.deep.equal({ ok: false, reason: "identity_taken" });
    });

    it("gives two first sign-ins at once, from two database handles, one account and no stray one", async () => {
      // On PostgreSQL a second pool, as another gateway replica has; SQLite has one writer, so there the same handle.
      const other = engine.name === "postgres" ? new PostgresDatabase(createPostgresPool({ url: engine.lastUrl(), max: 5 })) : db;
      try {
        const elsewhere = new Sessions(await Ledger.open(other));
        const accountsBefore = await db.value<bigint>("SELECT COUNT(*) FROM accounts");
        const results = await Promise.all(
          Array.from({ length: 6 }, (_, i) => (i % 2 === 0 ? sessions : elsewhere).signIn("siwe", "0xAda", { name: "Ada" })),
        );
        const accounts = new Set(results.map(accountOf));
        expect(accounts.size).to.equal(1);
        expect(results.filter((r) => r.ok && r.created)).to.have.length(1);
        expect(await db.value<bigint>("SELECT COUNT(*) FROM accounts")).to.equal(accountsBefore! + 1n);
      } finally {
        if (other !== db) await other.close();
      }
    });
  });

  describe("issue, find, revoke and purge", () => {
    it("finds a live session by its token, and no longer once revoked", async () => {
      const ada = accountOf(await sessions.signIn("email", "ada@example.com"));
      const session = await sessions.issue(ada);
      const found = await sessions.find(session.token);
      expect(found).to.deep.include({ accountId: ada, csrfToken: session.csrfToken, expiresAtMs: session.expiresAtMs });
      await sessions.revoke(found!.tokenHash);
      expect(await sessions.find(session.token)).to.equal(undefined);
      expect(await sessions.find("not a token")).to.equal(undefined);
    });

    it("stores only the SHA-256 of a session token", async () => {
      const ada = accountOf(await sessions.signIn("email", "ada@example.com"));
      const session = await sessions.issue(ada);
      const rows = await db.all<{ token_hash: string }>("SELECT token_hash FROM sessions");
      expect(rows).to.have.length(1);
      expect(rows[0].token_hash)
        .to.match(/^[0-9a-f]{64}$/)
        .and.not.equal(session.token);
    });

    it("refuses an expired session, and purges it with the revoked ones", async () => {
      const ada = accountOf(await sessions.signIn("email", "ada@example.com"));
      const expired = await new Sessions(await Ledger.open(db), { ttlMs: 1 }).issue(ada);
      const revoked = await sessions.issue(ada);
      const live = await sessions.issue(ada);
      await new Promise((resolve) => setTimeout(resolve, 5));
      expect(await sessions.find(expired.token)).to.equal(undefined);
      await sessions.revoke((await sessions.find(revoked.token))!.tokenHash);
      expect(await sessions.purgeExpired()).to.equal(2);
      expect(await sessions.find(live.token)).to.not.equal(undefined);
    });

    it("runs onOpen before it opens a session", async () => {
      const opened: string[] = [];
      sessions.onOpen = async (accountId) => {
        opened.push(accountId);
      };
      const ada = accountOf(await sessions.signIn("email", "ada@example.com"));
      const session = await sessions.open(ada);
      expect(opened).to.deep.equal([ada]);
      expect((await sessions.find(session.token))?.accountId).to.equal(ada);
    });
  });
});

describe("dashboard sessions over HTTP", () => {
  let stack: TestStack;
  beforeEach(async () => {
    stack = await startStack();
  });
  afterEach(async () => {
    await stack.close();
  });

  const request = (method: string, path: string, headers: Record<string, string> = {}) =>
    fetch(stack.url + path, { method, headers }).then(async (r) => ({ status: r.status, body: (await r.json()) as any }));
  const signIn = async (email: string) => {
    const result = await stack.gw.sessions.signIn("email", email);
    if (!result.ok) throw new Error(result.reason);
    return result.accountId;
  };

  describe("GET /v1/me and POST /auth/logout", () => {
    it("needs a session", async () => {
      const res = await request("GET", "/v1/me");
      expect(res.status).to.equal(401);
      expect(res.body).to.include({ success: false, code: "unauthorized" });
    });

    it("shows the signed-in account, and logs out only with the CSRF token", async () => {
      const ada = await signIn("ada@example.com");
      const session = await stack.gw.sessions.issue(ada);
      const cookie = `${SESSION_COOKIE}=${session.token}`;
      const me = await request("GET", "/v1/me", { cookie });
      expect(me.status).to.equal(200);
      expect(me.body.data).to.include({ account_id: ada });
      expect(me.body.data.identities).to.deep.equal([
        { provider: "email", subject: "ada@example.com", linked_at: me.body.data.identities[0].linked_at },
      ]);

      const forged = await request("POST", "/auth/logout", { cookie });
      expect(forged.status).to.equal(403);
      expect(forged.body.code).to.equal("csrf_failed");
      expect((await request("GET", "/v1/me", { cookie })).status).to.equal(200);

      const out = await request("POST", "/auth/logout", { cookie, [CSRF_HEADER]: session.csrfToken });
      expect(out.status).to.equal(200);
      expect((await request("GET", "/v1/me", { cookie })).status).to.equal(401);
    });

    it("refuses an expired session", async () => {
      const ada = await signIn("ada@example.com");
      const session = await stack.gw.sessions.issue(ada);
      await stack.gw.ledger.db.transaction((tx) => tx.run("UPDATE sessions SET expires_at = ?", [Date.now() - 1]));
      expect((await request("GET", "/v1/me", { cookie: `${SESSION_COOKIE}=${session.token}` })).status).to.equal(401);
    });

    it("stores only the SHA-256 of a session token, nowhere in the database file", async function () {
      const db = stack.gw.ledger.db;
      if (!(db instanceof SqliteDatabase)) return this.skip();
      const session = await stack.gw.sessions.issue(await signIn("ada@example.com"));
      await db.durable();
      db.db.pragma("wal_checkpoint(TRUNCATE)");
      const file = fs.readFileSync(stack.dbPath);
      expect(file.includes(Buffer.from(session.token))).to.equal(false);
    });
  });
});

describe("readCookie", () => {
  it("reads one cookie from a Cookie header", () => {
    expect(readCookie("a=1; sg_session=abc%3D; b=2", "sg_session")).to.equal("abc=");
    expect(readCookie("a=1", "sg_session")).to.equal(undefined);
    expect(readCookie(undefined, "sg_session")).to.equal(undefined);
  });
});
