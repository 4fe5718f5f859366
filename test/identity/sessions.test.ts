import fs from "node:fs";
import { expect } from "chai";
import { CSRF_HEADER, SESSION_COOKIE, readCookie } from "../../server/http/session-cookies";
import { type TestStack, startStack } from "../helpers/gateway";

describe("dashboard sessions", () => {
  let stack: TestStack;
  beforeEach(async () => {
    stack = await startStack();
  });
  afterEach(async () => {
    await stack.close();
  });

  const request = (method: string, path: string, headers: Record<string, string> = {}) =>
    fetch(stack.url + path, { method, headers }).then(async (r) => ({ status: r.status, body: (await r.json()) as any }));

  describe("signIn", () => {
    it("creates an account on an identity's first use and finds it afterwards", () => {
      const first = stack.gw.sessions.signIn("email", "ada@example.com");
      expect(first).to.include({ ok: true, created: true, linked: false });
      const again = stack.gw.sessions.signIn("email", "ada@example.com");
      expect(again).to.deep.equal({ ok: true, accountId: (first as { accountId: string }).accountId, created: false, linked: false });
    });

    it("links a new identity to the signed-in account, so one person signs in several ways", () => {
      const ada = stack.gw.sessions.signIn("email", "ada@example.com") as { accountId: string };
      const github = stack.gw.sessions.signIn("github", "12345", { linkTo: ada.accountId });
      expect(github).to.deep.equal({ ok: true, accountId: ada.accountId, created: false, linked: true });
      expect(stack.gw.sessions.identitiesOf(ada.accountId).map((i) => i.provider)).to.deep.equal(["email", "github"]);
    });

    it("refuses to link an identity that belongs to another account", () => {
      const ada = stack.gw.sessions.signIn("email", "ada@example.com") as { accountId: string };
      stack.gw.sessions.signIn("google", "g-1");
      expect(stack.gw.sessions.signIn("google", "g-1", { linkTo: ada.accountId })).to.deep.equal({ ok: false, reason: "identity_taken" });
    });
  });

  describe("GET /v1/me and POST /auth/logout", () => {
    it("needs a session", async () => {
      const res = await request("GET", "/v1/me");
      expect(res.status).to.equal(401);
      expect(res.body).to.include({ success: false, code: "unauthorized" });
    });

    it("shows the signed-in account, and logs out only with the CSRF token", async () => {
      const ada = stack.gw.sessions.signIn("email", "ada@example.com") as { accountId: string };
      const session = await stack.gw.sessions.issue(ada.accountId);
      const cookie = `${SESSION_COOKIE}=${session.token}`;
      const me = await request("GET", "/v1/me", { cookie });
      expect(me.status).to.equal(200);
      expect(me.body.data).to.include({ account_id: ada.accountId });
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
      const ada = stack.gw.sessions.signIn("email", "ada@example.com") as { accountId: string };
      const session = await stack.gw.sessions.issue(ada.accountId);
      stack.gw.db.prepare("UPDATE sessions SET expires_at = ?").run(Date.now() - 1);
      expect((await request("GET", "/v1/me", { cookie: `${SESSION_COOKIE}=${session.token}` })).status).to.equal(401);
    });

    it("stores only the SHA-256 of a session token", async () => {
      const ada = stack.gw.sessions.signIn("email", "ada@example.com") as { accountId: string };
      const session = await stack.gw.sessions.issue(ada.accountId);
      await stack.gw.ledger.commit.durable();
      stack.gw.db.pragma("wal_checkpoint(TRUNCATE)");
      const file = fs.readFileSync(stack.dbPath);
      expect(file.includes(Buffer.from(session.token))).to.equal(false);
    });
  });

  it("reads one cookie from a Cookie header", () => {
    expect(readCookie("a=1; sg_session=abc%3D; b=2", "sg_session")).to.equal("abc=");
    expect(readCookie("a=1", "sg_session")).to.equal(undefined);
    expect(readCookie(undefined, "sg_session")).to.equal(undefined);
  });
});
