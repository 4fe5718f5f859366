import { expect } from "chai";
import type { Database } from "../../server/db/sql";
import { PostgresDatabase } from "../../server/db/postgres/database";
import { createPostgresPool } from "../../server/db/postgres/pool";
import { MagicLinks, type MailMessage, type Mailer, OutboxMailer } from "../../server/identity/email";
import { SiweNonces } from "../../server/identity/siwe";
import { Ledger } from "../../server/ledger/ledger";
import { describeEachEngine } from "../helpers/engines";

/** A mailer that keeps what it is given. */
class RecordingMailer implements Mailer {
  readonly sent: MailMessage[] = [];
  async send(message: MailMessage): Promise<void> {
    this.sent.push(message);
  }
}

const T0_MS = 1_800_000_000_000;
const TTL_MS = 10 * 60_000;

describeEachEngine("sign-in secrets (services)", (engine) => {
  let db: Database;
  beforeEach(async () => {
    db = await engine.open();
    await Ledger.open(db);
  });

  describe("SiweNonces", () => {
    it("issues a nonce that is good once, until it expires", async () => {
      const nonces = new SiweNonces(db, { perClientMax: 3, max: 10 }, TTL_MS);
      const issued = await nonces.issue("client", T0_MS);
      if (!issued.ok) throw new Error("expected a nonce");
      expect(issued.expiresAtMs).to.equal(T0_MS + TTL_MS);
      expect(await nonces.consume(issued.nonce, T0_MS + 1)).to.equal(true);
      expect(await nonces.consume(issued.nonce, T0_MS + 2)).to.equal(false);
      const late = await nonces.issue("client", T0_MS);
      if (!late.ok) throw new Error("expected a nonce");
      expect(await nonces.consume(late.nonce, T0_MS + TTL_MS)).to.equal(false);
      expect(await nonces.purgeExpired(T0_MS + TTL_MS)).to.equal(2);
    });

    it("keeps a client's newest perClientMax nonces, dropping its oldest", async () => {
      const nonces = new SiweNonces(db, { perClientMax: 2, max: 10 }, TTL_MS);
      const issued: string[] = [];
      for (let i = 0; i < 3; i++) {
        const n = await nonces.issue("client", T0_MS + i);
        if (n.ok) issued.push(n.nonce);
      }
      const other = await nonces.issue("another client", T0_MS + 3);
      expect(await nonces.consume(issued[0], T0_MS + 4)).to.equal(false);
      expect(await nonces.consume(issued[1], T0_MS + 4)).to.equal(true);
      expect(await nonces.consume(issued[2], T0_MS + 4)).to.equal(true);
      expect(other.ok && (await nonces.consume(other.nonce, T0_MS + 4))).to.equal(true);
    });

    it("refuses a nonce beyond max unused ones, until the first expires", async () => {
      const nonces = new SiweNonces(db, { perClientMax: 5, max: 2 }, TTL_MS);
      expect((await nonces.issue("a", T0_MS)).ok).to.equal(true);
      expect((await nonces.issue("b", T0_MS + 1_000)).ok).to.equal(true);
      expect(await nonces.issue("c", T0_MS + 2_000)).to.deep.equal({ ok: false, reason: "too_many_pending", retryAfterMs: TTL_MS - 2_000 });
      expect((await nonces.issue("c", T0_MS + TTL_MS)).ok).to.equal(true);
    });
  });

  describe("MagicLinks", () => {
    let now: number;
    let mailer: RecordingMailer;
    let links: MagicLinks;
    beforeEach(() => {
      now = T0_MS;
      mailer = new RecordingMailer();
      links = new MagicLinks(db, mailer, { ttlMs: TTL_MS, pendingMax: 3, now: () => now });
    });
    /** The link of a mail sent with `(token) => token` as its URL: the token itself, on the mail's third line. */
    const tokenOf = (message: MailMessage) => message.text.split("\n")[2];

    it("mails a link whose token previews without being used, then signs in once", async () => {
      expect(await links.send("ada@example.com", (token) => token)).to.deep.equal({ sent: true });
      expect(mailer.sent[0]).to.include({ to: "ada@example.com", subject: "Your Skill Gateway sign-in link" });
      const token = tokenOf(mailer.sent[0]);
      expect(await links.peek(token)).to.deep.equal({ ok: true, email: "ada@example.com", linkTo: undefined, expiresAtMs: T0_MS + TTL_MS });
      expect(await links.consume(token)).to.deep.equal({ ok: true, email: "ada@example.com", linkTo: undefined });
      expect(await links.consume(token)).to.deep.equal({ ok: false, reason: "used" });
      expect(await links.peek(token)).to.deep.equal({ ok: false, reason: "used" });
    });

    it("tells a used link from an expired one and from one it never sent", async () => {
      await links.send("ada@example.com", (token) => token);
      const token = tokenOf(mailer.sent[0]);
      now = T0_MS + TTL_MS;
      expect(await links.peek(token)).to.deep.equal({ ok: false, reason: "expired" });
      expect(await links.consume(token)).to.deep.equal({ ok: false, reason: "expired" });
      expect(await links.peek(`${token.slice(0, -1)}x`)).to.deep.equal({ ok: false, reason: "unknown" });
      expect(await links.consume("")).to.deep.equal({ ok: false, reason: "unknown" });
      // Purged once expired: then no longer told apart from a link never sent.
      await links.purgeExpired();
      expect(await links.peek(token)).to.deep.equal({ ok: false, reason: "unknown" });
    });

    it("remembers the signed-in account that asked", async () => {
      const ledger = await Ledger.open(db);
      await ledger.ensureAccount({ id: "ada", kind: "user", name: "Ada" });
      await links.send("ada@work.example", (token) => token, "ada");
      expect(await links.consume(tokenOf(mailer.sent[0]))).to.deep.equal({ ok: true, email: "ada@work.example", linkTo: "ada" });
    });

    it("sends one address at most five links a TTL, and the gateway at most pendingMax waiting ones", async () => {
      links = new MagicLinks(db, mailer, { ttlMs: TTL_MS, pendingMax: 6, now: () => now });
      for (let i = 0; i < 5; i++) expect((await links.send("ada@example.com", (t) => t)).sent).to.equal(true);
      expect(await links.send("ada@example.com", (t) => t)).to.deep.equal({ sent: false, reason: "address_limit" });
      expect((await links.send("bob@example.com", (t) => t)).sent).to.equal(true);
      expect(await links.send("eve@example.com", (t) => t)).to.deep.equal({
        sent: false,
        reason: "too_many_pending",
        retryAfterMs: TTL_MS,
      });
      expect(mailer.sent).to.have.length(6);
      now += TTL_MS;
      expect((await links.send("ada@example.com", (t) => t)).sent).to.equal(true);
      expect(await links.purgeExpired()).to.equal(6);
    });

    it("lets one of many uses of a link at once through, from two database handles", async () => {
      const other = engine.name === "postgres" ? new PostgresDatabase(createPostgresPool({ url: engine.lastUrl(), max: 5 })) : db;
      try {
        const elsewhere = new MagicLinks(other, mailer, { ttlMs: TTL_MS, pendingMax: 3, now: () => now });
        await links.send("ada@example.com", (t) => t);
        const token = tokenOf(mailer.sent[0]);
        const results = await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 === 0 ? links : elsewhere).consume(token)));
        expect(results.filter((r) => r.ok)).to.have.length(1);
      } finally {
        if (other !== db) await other.close();
      }
    });
  });

  describe("OutboxMailer", () => {
    it("writes each message to the outbox, then echoes it", async () => {
      const echoed: string[] = [];
      await new OutboxMailer(db, (m) => echoed.push(m.to)).send({ to: "ada@example.com", subject: "s", text: "t" });
      expect(await db.all("SELECT to_address, subject, body FROM outbox")).to.deep.equal([
        { to_address: "ada@example.com", subject: "s", body: "t" },
      ]);
      expect(echoed).to.deep.equal(["ada@example.com"]);
    });
  });
});
