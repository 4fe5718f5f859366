import fs from "node:fs";
import { expect } from "chai";
import { SmtpMailer, createMailer, normalizeEmail } from "../../server/identity/email";
import { SqliteDatabase } from "../../server/db/sqlite-database";
import { CSRF_HEADER, SESSION_COOKIE } from "../../server/http/session-cookies";
import { type TestStack, startStack } from "../helpers/gateway";
import { sameOrigin } from "../helpers/session";

describe("e-mail magic links", () => {
  let stack: TestStack;
  beforeEach(async () => {
    stack = await startStack();
  });
  afterEach(async () => {
    await stack.close();
  });

  /** A request as the dashboard's page makes it: a POST carries the page's Origin. */
  const call = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
    const res = await fetch(stack.url + path, {
      method,
      redirect: "manual",
      headers: {
        ...(method === "POST" ? sameOrigin(stack) : {}),
        ...(body === undefined ? {} : { "content-type": "application/json" }),
        ...headers,
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, headers: res.headers, text, body: text ? JSON.parse(text.startsWith("{") ? text : "null") : null };
  };
  /** The gateway's database, whichever engine it is on. */
  const db = () => stack.gw.ledger.db;
  const outbox = () =>
    db().all<{ to_address: string; subject: string; body: string }>("SELECT to_address, subject, body FROM outbox ORDER BY id");
  /** The link of the newest message to `to`, as a path on the gateway. */
  const linkFor = async (to: string) => {
    const message = (await outbox()).filter((m) => m.to_address === to).at(-1);
    const url = /(http:\/\/\S+\/auth\/email\/callback\?token=\S+)/.exec(message?.body ?? "")?.[1];
    if (!url) throw new Error(`no link mailed to ${to}`);
    expect(url.startsWith(stack.url)).to.equal(true);
    return url.slice(stack.url.length);
  };
  const sessionCookie = (headers: Headers) => {
    const line = headers.getSetCookie().find((c) => c.startsWith(`${SESSION_COOKIE}=`));
    return line?.split(";")[0];
  };
  const tokenOf = (link: string) => decodeURIComponent(link.split("token=")[1]);
  const identities = async (accountId: string) => (await stack.gw.sessions.identitiesOf(accountId)).map((i) => i.provider);
  /** Signs `subject` in (the identity taken as verified): its account. */
  const signIn = async (provider: "email" | "github", subject: string) => {
    const result = await stack.gw.sessions.signIn(provider, subject);
    if (!result.ok) throw new Error(result.reason);
    return result.accountId;
  };

  describe("POST /auth/email/start", () => {
    it("answers a known and an unknown address identically, and mails each a link", async () => {
      await signIn("email", "ada@example.com");
      const known = await call("POST", "/auth/email/start", { email: "ada@example.com" });
      const unknown = await call("POST", "/auth/email/start", { email: "nobody@example.com" });
      expect(known.status).to.equal(200);
      expect(unknown.status).to.equal(known.status);
      expect(unknown.text).to.equal(known.text);
      expect((await outbox()).map((m) => m.to_address)).to.deep.equal(["ada@example.com", "nobody@example.com"]);
      expect(await linkFor("nobody@example.com")).to.match(/^\/auth\/email\/callback\?token=[\w-]{43}$/);
    });

    it("normalizes the address, and refuses what is not one", async () => {
      await call("POST", "/auth/email/start", { email: "  Ada@Example.COM " });
      expect((await outbox())[0].to_address).to.equal("ada@example.com");
      const bad = await call("POST", "/auth/email/start", { email: "not an address" });
      expect(bad.status).to.equal(400);
      expect(bad.body).to.include({ success: false, code: "invalid_input" });
      expect(normalizeEmail(42)).to.equal(undefined);
    });

    it("stops mailing one address after five links in a TTL, with the same answer", async () => {
      const answers = new Set<string>();
      for (let i = 0; i < 7; i++) answers.add((await call("POST", "/auth/email/start", { email: "ada@example.com" })).text);
      expect(answers.size).to.equal(1);
      expect(await outbox()).to.have.length(5);
    });

    it("stores only the SHA-256 of a link's token", async () => {
      await call("POST", "/auth/email/start", { email: "ada@example.com" });
      const token = (await linkFor("ada@example.com")).split("token=")[1];
      const row = (await db().one<{ token_hash: string }>("SELECT token_hash FROM email_sign_in_tokens"))!;
      expect(row.token_hash).to.match(/^[0-9a-f]{64}$/);
      expect(row.token_hash).to.not.equal(token);
      expect(
        JSON.stringify(await db().all("SELECT * FROM email_sign_in_tokens"), (_k, v) => (typeof v === "bigint" ? Number(v) : v)),
      ).to.not.include(token);
    });
  });

  describe("the link: a page, then POST /auth/email/verify", () => {
    it("signs in once: the page's POST opens a session and creates the account; a second use is 401", async () => {
      await call("POST", "/auth/email/start", { email: "ada@example.com" });
      const token = tokenOf(await linkFor("ada@example.com"));
      const first = await call("POST", "/auth/email/verify", { token });
      expect(first.status).to.equal(200);
      expect(first.body.data).to.deep.equal({ account_id: first.body.data.account_id, created: true, linked: false, switched: false });
      const cookie = sessionCookie(first.headers)!;
      const me = await call("GET", "/v1/me", undefined, { cookie });
      expect(me.status).to.equal(200);
      expect(me.body.data.name).to.equal("ada@example.com");
      expect(me.body.data.identities.map((i: { provider: string; subject: string }) => [i.provider, i.subject])).to.deep.equal([
        ["email", "ada@example.com"],
      ]);

      const again = await call("POST", "/auth/email/verify", { token });
      expect(again.status).to.equal(401);
      expect(again.body).to.include({ success: false, code: "sign_in_failed" });
      expect(sessionCookie(again.headers)).to.equal(undefined);
    });

    it("lets only one of two simultaneous uses of a link through", async () => {
      await call("POST", "/auth/email/start", { email: "ada@example.com" });
      const token = tokenOf(await linkFor("ada@example.com"));
      const results = await Promise.all([1, 2, 3].map(() => call("POST", "/auth/email/verify", { token })));
      expect(results.map((r) => r.status).sort()).to.deep.equal([200, 401, 401]);
      expect(results.find((r) => r.status === 200)!.body.data).to.include({ created: true, linked: false });
    });

    it("signs a known address in to its existing account", async () => {
      const ada = await signIn("email", "ada@example.com");
      await call("POST", "/auth/email/start", { email: "ada@example.com" });
      const res = await call("POST", "/auth/email/verify", { token: tokenOf(await linkFor("ada@example.com")) });
      expect(res.status).to.equal(200);
      expect(res.body.data).to.deep.equal({ account_id: ada, created: false, linked: false, switched: false });
    });

    it("previews what the link does without using it", async () => {
      await signIn("email", "ada@example.com");
      await call("POST", "/auth/email/start", { email: "ada@example.com" });
      await call("POST", "/auth/email/start", { email: "new@example.com" });
      const known = await call("POST", "/auth/email/preview", { token: tokenOf(await linkFor("ada@example.com")) });
      expect(known.status).to.equal(200);
      expect(known.body.data).to.deep.include({
        email: "ada@example.com",
        signed_in: false,
        action: "sign_in",
        refusal: null,
        switch_action: null,
      });
      const fresh = await call("POST", "/auth/email/preview", { token: tokenOf(await linkFor("new@example.com")) });
      expect(fresh.body.data).to.include({ email: "new@example.com", action: "sign_up" });
      expect(known.headers.get("cache-control")).to.equal("no-store");
      // Still good: the preview used nothing up.
      expect((await call("POST", "/auth/email/verify", { token: tokenOf(await linkFor("ada@example.com")) })).status).to.equal(200);
    });

    it("refuses an expired link", async () => {
      await call("POST", "/auth/email/start", { email: "ada@example.com" });
      const token = tokenOf(await linkFor("ada@example.com"));
      await db().transaction((tx) => tx.run("UPDATE email_sign_in_tokens SET expires_at = ?", [Date.now() - 1]));
      for (const path of ["/auth/email/preview", "/auth/email/verify"]) {
        const res = await call("POST", path, { token });
        expect(res.status, path).to.equal(401);
        expect(res.body.code, path).to.equal("sign_in_failed");
      }
    });

    it("refuses a made-up or missing token", async () => {
      for (const body of [{ token: "A".repeat(43) }, {}, { token: 7 }, { token: "x".repeat(101) }]) {
        expect((await call("POST", "/auth/email/verify", body)).status, JSON.stringify(body)).to.equal(401);
        expect((await call("POST", "/auth/email/preview", body)).status, JSON.stringify(body)).to.equal(401);
      }
    });

    it("adds the address to the signed-in account that asked, when used in that session", async () => {
      const owner = await signIn("github", "12345");
      const session = await stack.gw.sessions.issue(owner);
      const headers = { cookie: `${SESSION_COOKIE}=${session.token}`, [CSRF_HEADER]: session.csrfToken };
      await call("POST", "/auth/email/start", { email: "ada@example.com" }, headers);
      const token = tokenOf(await linkFor("ada@example.com"));
      expect((await call("POST", "/auth/email/preview", { token }, headers)).body.data).to.include({
        signed_in: true,
        action: "link",
        refusal: null,
      });
      const res = await call("POST", "/auth/email/verify", { token }, headers);
      expect(res.status).to.equal(200);
      expect(res.body.data).to.include({ account_id: owner, linked: true, switched: false });
      // The session it was used in goes on: no new cookies.
      expect(sessionCookie(res.headers)).to.equal(undefined);
      expect(await identities(owner)).to.deep.equal(["github", "email"]);
    });

    it("does not tie the address to the asker's account when someone else uses the link", async () => {
      const asker = await signIn("github", "666");
      const session = await stack.gw.sessions.issue(asker);
      await call(
        "POST",
        "/auth/email/start",
        { email: "victim@example.com" },
        { cookie: `${SESSION_COOKIE}=${session.token}`, [CSRF_HEADER]: session.csrfToken },
      );
      const res = await call("POST", "/auth/email/verify", { token: tokenOf(await linkFor("victim@example.com")) });
      expect(res.body.data).to.include({ created: true, linked: false });
      expect(res.body.data.account_id).to.not.equal(asker);
      expect(await identities(asker)).to.deep.equal(["github"]);
    });

    it("does not link without the session's CSRF token", async () => {
      const owner = await signIn("github", "12345");
      const session = await stack.gw.sessions.issue(owner);
      const cookie = `${SESSION_COOKIE}=${session.token}`;
      await call("POST", "/auth/email/start", { email: "ada@example.com" }, { cookie });
      const res = await call(
        "POST",
        "/auth/email/verify",
        { token: tokenOf(await linkFor("ada@example.com")) },
        { cookie, [CSRF_HEADER]: session.csrfToken },
      );
      // Asked for without the CSRF token, the link is a plain sign-in: in a signed-in browser, a refused one.
      expect(res.status).to.equal(409);
      expect(res.body.code).to.equal("session_exists");
      expect(await identities(owner)).to.deep.equal(["github"]);
    });

    it("needs the session's CSRF token to use a link in a signed-in browser", async () => {
      const owner = await signIn("github", "12345");
      const session = await stack.gw.sessions.issue(owner);
      const cookie = `${SESSION_COOKIE}=${session.token}`;
      await call("POST", "/auth/email/start", { email: "ada@example.com" }, { cookie, [CSRF_HEADER]: session.csrfToken });
      const res = await call("POST", "/auth/email/verify", { token: tokenOf(await linkFor("ada@example.com")) }, { cookie });
      expect(res.status).to.equal(403);
      expect(res.body.code).to.equal("csrf_failed");
      expect(await identities(owner)).to.deep.equal(["github"]);
    });
  });

  it("mails through SMTP when SMTP_URL is set, to the outbox otherwise", () => {
    const mailer = createMailer({ smtpUrl: "smtp://user:pass@127.0.0.1:2525", mailFrom: "x <x@example.com>" }, db());
    expect(mailer).to.be.instanceOf(SmtpMailer);
    expect(createMailer({ smtpUrl: "", mailFrom: "" }, db())).to.not.be.instanceOf(SmtpMailer);
  });

  it("hands each outbox message to the echo (npm start prints it) once it is in the table", async () => {
    const echoed: { to: string; inTable: Promise<number> }[] = [];
    // The count is asked for as the echo is called: the statement is sent (on SQLite, run) then and there.
    const count = async () => Number(await db().value("SELECT COUNT(*) FROM outbox"));
    const mailer = createMailer({ smtpUrl: "", mailFrom: "" }, db(), (m) => echoed.push({ to: m.to, inTable: count() }));
    await mailer.send({ to: "ada@example.com", subject: "s", text: "t" });
    expect(await Promise.all(echoed.map(async (e) => ({ to: e.to, inTable: await e.inTable })))).to.deep.equal([
      { to: "ada@example.com", inTable: 1 },
    ]);
  });

  it("keeps the outbox in the gateway's database file", async function () {
    const sqlite = db();
    if (!(sqlite instanceof SqliteDatabase)) return this.skip();
    await call("POST", "/auth/email/start", { email: "ada@example.com" });
    await sqlite.durable();
    sqlite.db.pragma("wal_checkpoint(TRUNCATE)");
    expect(fs.readFileSync(stack.dbPath).includes(Buffer.from("ada@example.com"))).to.equal(true);
    expect((await outbox())[0].subject).to.equal("Your Skill Gateway sign-in link");
  });

  it("answers 404 for a sign-in provider that is not configured", async () => {
    const res = await call("GET", "/auth/github/start");
    expect(res.status).to.equal(404);
    expect(res.body.code).to.equal("not_found");
  });
});
