import fs from "node:fs";
import { expect } from "chai";
import { SmtpMailer, createMailer, normalizeEmail } from "../../server/accounts/email";
import { CSRF_HEADER, SESSION_COOKIE } from "../../server/accounts/sessions";
import { type TestStack, startStack } from "../helpers/gateway";

describe("e-mail magic links", () => {
  let stack: TestStack;
  beforeEach(async () => {
    stack = await startStack();
  });
  afterEach(async () => {
    await stack.close();
  });

  const call = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
    const res = await fetch(stack.url + path, {
      method,
      redirect: "manual",
      headers: { ...(body === undefined ? {} : { "content-type": "application/json" }), ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, headers: res.headers, text, body: text ? JSON.parse(text.startsWith("{") ? text : "null") : null };
  };
  const outbox = () =>
    stack.gw.db.prepare("SELECT to_address, subject, body FROM outbox ORDER BY id").all() as { to_address: string; subject: string; body: string }[];
  /** The link of the newest message to `to`, as a path on the gateway. */
  const linkFor = (to: string) => {
    const message = outbox().filter((m) => m.to_address === to).at(-1);
    const url = /(http:\/\/\S+\/auth\/email\/callback\?token=\S+)/.exec(message?.body ?? "")?.[1];
    if (!url) throw new Error(`no link mailed to ${to}`);
    expect(url.startsWith(stack.url)).to.equal(true);
    return url.slice(stack.url.length);
  };
  const sessionCookie = (headers: Headers) => {
    const line = headers.getSetCookie().find((c) => c.startsWith(`${SESSION_COOKIE}=`));
    return line?.split(";")[0];
  };

  describe("POST /auth/email/start", () => {
    it("answers a known and an unknown address identically, and mails each a link", async () => {
      stack.gw.sessions.signIn("email", "ada@example.com");
      const known = await call("POST", "/auth/email/start", { email: "ada@example.com" });
      const unknown = await call("POST", "/auth/email/start", { email: "nobody@example.com" });
      expect(known.status).to.equal(200);
      expect(unknown.status).to.equal(known.status);
      expect(unknown.text).to.equal(known.text);
      expect(outbox().map((m) => m.to_address)).to.deep.equal(["ada@example.com", "nobody@example.com"]);
      expect(linkFor("nobody@example.com")).to.match(/^\/auth\/email\/callback\?token=[\w-]{43}$/);
    });

    it("normalizes the address, and refuses what is not one", async () => {
      await call("POST", "/auth/email/start", { email: "  Ada@Example.COM " });
      expect(outbox()[0].to_address).to.equal("ada@example.com");
      const bad = await call("POST", "/auth/email/start", { email: "not an address" });
      expect(bad.status).to.equal(400);
      expect(bad.body).to.include({ success: false, code: "invalid_input" });
      expect(normalizeEmail(42)).to.equal(undefined);
    });

    it("stops mailing one address after five links in a TTL, with the same answer", async () => {
      const answers = new Set<string>();
      for (let i = 0; i < 7; i++) answers.add((await call("POST", "/auth/email/start", { email: "ada@example.com" })).text);
      expect(answers.size).to.equal(1);
      expect(outbox()).to.have.length(5);
    });

    it("stores only the SHA-256 of a link's token", async () => {
      await call("POST", "/auth/email/start", { email: "ada@example.com" });
      const token = linkFor("ada@example.com").split("token=")[1];
      const row = stack.gw.db.prepare("SELECT token_hash FROM email_sign_in_tokens").get() as { token_hash: string };
      expect(row.token_hash).to.match(/^[0-9a-f]{64}$/);
      expect(row.token_hash).to.not.equal(token);
      expect(JSON.stringify(stack.gw.db.prepare("SELECT * FROM email_sign_in_tokens").all(), (_k, v) => (typeof v === "bigint" ? Number(v) : v))).to.not.include(token);
    });
  });

  describe("GET /auth/email/callback and POST /auth/email/verify", () => {
    it("signs in once: the link opens a session and creates the account; a second use is 401", async () => {
      await call("POST", "/auth/email/start", { email: "ada@example.com" });
      const link = linkFor("ada@example.com");
      const first = await call("GET", link);
      expect(first.status).to.equal(303);
      expect(first.headers.get("location")).to.equal("/");
      const cookie = sessionCookie(first.headers)!;
      const me = await call("GET", "/v1/me", undefined, { cookie });
      expect(me.status).to.equal(200);
      expect(me.body.data.name).to.equal("ada@example.com");
      expect(me.body.data.identities.map((i: { provider: string; subject: string }) => [i.provider, i.subject])).to.deep.equal([["email", "ada@example.com"]]);

      const again = await call("GET", link);
      expect(again.status).to.equal(401);
      expect(again.body).to.include({ success: false, code: "sign_in_failed" });
      expect(sessionCookie(again.headers)).to.equal(undefined);
    });

    it("lets only one of two simultaneous uses of a link through", async () => {
      await call("POST", "/auth/email/start", { email: "ada@example.com" });
      const token = linkFor("ada@example.com").split("token=")[1];
      const results = await Promise.all([1, 2, 3].map(() => call("POST", "/auth/email/verify", { token })));
      expect(results.map((r) => r.status).sort()).to.deep.equal([200, 401, 401]);
      expect(results.find((r) => r.status === 200)!.body.data).to.include({ created: true, linked: false });
    });

    it("signs a known address in to its existing account", async () => {
      const ada = stack.gw.sessions.signIn("email", "ada@example.com") as { accountId: string };
      await call("POST", "/auth/email/start", { email: "ada@example.com" });
      const res = await call("POST", "/auth/email/verify", { token: linkFor("ada@example.com").split("token=")[1] });
      expect(res.status).to.equal(200);
      expect(res.body.data).to.deep.equal({ account_id: ada.accountId, created: false, linked: false });
    });

    it("refuses an expired link", async () => {
      await call("POST", "/auth/email/start", { email: "ada@example.com" });
      const link = linkFor("ada@example.com");
      stack.gw.db.prepare("UPDATE email_sign_in_tokens SET expires_at = ?").run(Date.now() - 1);
      const res = await call("GET", link);
      expect(res.status).to.equal(401);
      expect(res.body.code).to.equal("sign_in_failed");
    });

    it("refuses a made-up or missing token", async () => {
      expect((await call("GET", "/auth/email/callback?token=" + "A".repeat(43))).status).to.equal(401);
      expect((await call("GET", "/auth/email/callback")).status).to.equal(401);
      expect((await call("POST", "/auth/email/verify", { token: 7 })).status).to.equal(401);
    });

    it("adds the address to the signed-in account that asked, when opened in that session", async () => {
      const owner = stack.gw.sessions.signIn("github", "12345") as { accountId: string };
      const session = await stack.gw.sessions.issue(owner.accountId);
      const cookie = `${SESSION_COOKIE}=${session.token}`;
      await call("POST", "/auth/email/start", { email: "ada@example.com" }, { cookie, [CSRF_HEADER]: session.csrfToken });
      const res = await call("GET", linkFor("ada@example.com"), undefined, { cookie });
      expect(res.status).to.equal(303);
      expect(stack.gw.sessions.identitiesOf(owner.accountId).map((i) => i.provider)).to.deep.equal(["github", "email"]);
    });

    it("does not tie the address to the asker's account when someone else opens the link", async () => {
      const asker = stack.gw.sessions.signIn("github", "666") as { accountId: string };
      const session = await stack.gw.sessions.issue(asker.accountId);
      await call("POST", "/auth/email/start", { email: "victim@example.com" }, { cookie: `${SESSION_COOKIE}=${session.token}`, [CSRF_HEADER]: session.csrfToken });
      const res = await call("POST", "/auth/email/verify", { token: linkFor("victim@example.com").split("token=")[1] });
      expect(res.body.data).to.include({ created: true, linked: false });
      expect(res.body.data.account_id).to.not.equal(asker.accountId);
      expect(stack.gw.sessions.identitiesOf(asker.accountId).map((i) => i.provider)).to.deep.equal(["github"]);
    });

    it("does not link without the session's CSRF token", async () => {
      const owner = stack.gw.sessions.signIn("github", "12345") as { accountId: string };
      const session = await stack.gw.sessions.issue(owner.accountId);
      const cookie = `${SESSION_COOKIE}=${session.token}`;
      await call("POST", "/auth/email/start", { email: "ada@example.com" }, { cookie });
      await call("GET", linkFor("ada@example.com"), undefined, { cookie });
      expect(stack.gw.sessions.identitiesOf(owner.accountId).map((i) => i.provider)).to.deep.equal(["github"]);
    });
  });

  it("mails through SMTP when SMTP_URL is set, to the outbox otherwise", () => {
    const mailer = createMailer({ smtpUrl: "smtp://user:pass@127.0.0.1:2525", mailFrom: "x <x@example.com>" }, stack.gw.ledger.commit, stack.gw.db);
    expect(mailer).to.be.instanceOf(SmtpMailer);
    expect(createMailer({ smtpUrl: "", mailFrom: "" }, stack.gw.ledger.commit, stack.gw.db)).to.not.be.instanceOf(SmtpMailer);
  });

  it("hands each outbox message to the echo (npm start prints it) once it is in the table", async () => {
    const echoed: { to: string; inTable: number }[] = [];
    const count = () => Number(stack.gw.db.prepare("SELECT COUNT(*) FROM outbox").pluck().get());
    const mailer = createMailer({ smtpUrl: "", mailFrom: "" }, stack.gw.ledger.commit, stack.gw.db, (m) => echoed.push({ to: m.to, inTable: count() }));
    await mailer.send({ to: "ada@example.com", subject: "s", text: "t" });
    expect(echoed).to.deep.equal([{ to: "ada@example.com", inTable: 1 }]);
  });

  it("keeps the outbox in the gateway's database file", async () => {
    await call("POST", "/auth/email/start", { email: "ada@example.com" });
    await stack.gw.ledger.commit.durable();
    stack.gw.db.pragma("wal_checkpoint(TRUNCATE)");
    expect(fs.readFileSync(stack.dbPath).includes(Buffer.from("ada@example.com"))).to.equal(true);
    expect(outbox()[0].subject).to.equal("Your Skill Gateway sign-in link");
  });

  it("answers 404 for a sign-in provider that is not configured", async () => {
    const res = await call("GET", "/auth/github/start");
    expect(res.status).to.equal(404);
    expect(res.body.code).to.equal("not_found");
  });
});
