import { createHash, randomBytes } from "node:crypto";
import nodemailer from "nodemailer";
import type { Database } from "../db/sql";
import { hasForbiddenCharacters } from "../text";
import { EmailTokensStore, OutboxStore } from "./sign-in-store";

/** One outgoing e-mail. Plain text: a sign-in link needs nothing more. */
export interface MailMessage {
  to: string;
  subject: string;
  text: string;
}

/** Where the gateway's e-mail goes: the local outbox by default, SMTP when configured. */
export interface Mailer {
  send(message: MailMessage): Promise<void>;
}

/**
 * The default mailer: each message becomes a row of the `outbox` table of the gateway's
 * own database, for a developer to read (`SELECT * FROM outbox`) and for tests. Nothing
 * leaves the machine. The rows hold live sign-in links, so it is for development only.
 */
export class OutboxMailer implements Mailer {
  private readonly store: OutboxStore;

  constructor(
    private readonly db: Database,
    /** Also shows each message to the developer (npm start prints it), once it is in the table. */
    private readonly echo?: (message: MailMessage) => void,
  ) {
    this.store = new OutboxStore(db);
  }

  async send(message: MailMessage): Promise<void> {
    await this.db.transaction(
      (tx) => this.store.insert({ to: message.to, subject: message.subject, body: message.text, createdAtMs: Date.now() }, tx),
      { durable: true },
    );
    this.echo?.(message);
  }
}

/** Sends through an SMTP server named by a URL (smtp://user:pass@host:587 or smtps://…), with nodemailer. */
export class SmtpMailer implements Mailer {
  private readonly transport;

  constructor(
    smtpUrl: string,
    private readonly from: string,
  ) {
    this.transport = nodemailer.createTransport(smtpUrl);
  }

  async send(message: MailMessage): Promise<void> {
    await this.transport.sendMail({ from: this.from, to: message.to, subject: message.subject, text: message.text });
  }
}

/** The mailer the configuration asks for: SMTP when SMTP_URL is set, the outbox otherwise. */
export function createMailer(settings: { smtpUrl: string; mailFrom: string }, db: Database, echo?: (message: MailMessage) => void): Mailer {
  return settings.smtpUrl ? new SmtpMailer(settings.smtpUrl, settings.mailFrom) : new OutboxMailer(db, echo);
}

/**
 * An address in the one form identities store: trimmed and lower-cased (providers treat
 * the local part case-insensitively in practice, and two accounts for Ada@ and ada@ would
 * only confuse their owner). Undefined when it does not look like an address at all.
 */
export function normalizeEmail(raw: unknown): string | undefined {
  if (typeof raw !== "string") return undefined;
  const email = raw.trim().toLowerCase();
  if (email.length > 254 || !/^[^\s@<>()",;]+@[^\s@<>()",;]+\.[^\s@<>()",;]+$/.test(email)) return undefined;
  // No address holds a control or invisible character (and PostgreSQL could not store a NUL): no address at all.
  if (hasForbiddenCharacters(email)) return undefined;
  return email;
}

const hash = (token: string) => createHash("sha256").update(token).digest("hex");

/** Links asked for one address within one TTL beyond which no more are sent (the answer stays the same). */
const MAX_LINKS_PER_ADDRESS = 5;

export type SendLinkReturnType =
  | { sent: true }
  /** The address had MAX_LINKS_PER_ADDRESS links lately: none sent, and the caller answers as if one was. */
  | { sent: false; reason: "address_limit" }
  /** `pendingMax` links wait to be used, in all: none sent; one expires in `retryAfterMs`. */
  | { sent: false; reason: "too_many_pending"; retryAfterMs: number };

/**
 * Why a link cannot be used: it signed in once already, it is past its expiry, or this gateway
 * never minted it (or purged it: expired tokens are deleted, see purgeExpired). The page the
 * link opens says which, so the person knows what happened; the token's holder learns nothing
 * else (not even the address).
 */
export type UnusableLinkReason = "used" | "expired" | "unknown";

export type ConsumeResult = { ok: true; email: string; linkTo: string | undefined } | { ok: false; reason: UnusableLinkReason };

export type PeekResult =
  { ok: true; email: string; linkTo: string | undefined; expiresAtMs: number } | { ok: false; reason: UnusableLinkReason };

/** A token's shape before any lookup: what `send` mints is 43 base64url characters. */
const plausibleToken = (token: unknown): token is string => typeof token === "string" && token.length > 0 && token.length <= 100;

/**
 * E-mail magic links. A link carries a random 256-bit token; only its SHA-256 is stored,
 * with the address, an expiry and, when a signed-in person asked for it, the account the
 * address should join. A token is good once: consuming it sets used_at in the same
 * statement that checks it is unset and unexpired, so of two uses (on one gateway or on two
 * replicas sharing a PostgreSQL database) exactly one gets the address.
 *
 * Every address gets the same treatment, known or not (a first sign-in creates the
 * account), so nothing about the answer or its timing tells whether an account exists.
 *
 * Anyone may ask for a link, so what a flood can store and send is bounded: an address gets
 * at most MAX_LINKS_PER_ADDRESS links per TTL, and at most `pendingMax` links wait unused in
 * all (a limit on the whole gateway, so refusing beyond it tells nothing about any address).
 * (Requests counted at the same instant on two replicas do not see each other's uncommitted
 * links, so either bound may be passed by as many links as are asked for at once: they bound a
 * flood, they are not exact quotas.)
 */
export class MagicLinks {
  private readonly store: EmailTokensStore;

  constructor(
    private readonly db: Database,
    private readonly mailer: Mailer,
    private readonly options: { ttlMs: number; pendingMax: number; now?: () => number },
  ) {
    this.store = new EmailTokensStore(db);
  }

  private now(): number {
    return this.options.now?.() ?? Date.now();
  }

  /**
   * Mails a sign-in link to `email` (already normalized). `linkTo`: the signed-in account
   * that asked, which the address joins if the link is used in that same session. The
   * refusals say why nothing was sent; for `address_limit` the caller answers as if it was.
   */
  async send(email: string, linkUrl: (token: string) => string, linkTo?: string): Promise<SendLinkReturnType> {
    const now = this.now();
    const token = randomBytes(32).toString("base64url");
    // The token is on disk before the link leaves (a durable transaction), so a link that arrives always works.
    const refusal = await this.db.transaction(
      async (tx): Promise<Exclude<SendLinkReturnType, { sent: true }> | undefined> => {
        // First the whole gateway's limit, whoever the address: its answer must not depend on the address.
        if ((await this.store.pendingCount(now, tx)) >= this.options.pendingMax) {
          return { sent: false, reason: "too_many_pending", retryAfterMs: await this.store.retryAfterMs(now, tx) };
        }
        if ((await this.store.countSentSince(email, now - this.options.ttlMs, tx)) >= MAX_LINKS_PER_ADDRESS)
          return { sent: false, reason: "address_limit" };
        await this.store.insert(
          { tokenHash: hash(token), email, linkTo: linkTo ?? null, createdAtMs: now, expiresAtMs: now + this.options.ttlMs },
          tx,
        );
        return undefined;
      },
      { durable: true },
    );
    if (refusal) return refusal;
    const minutes = Math.round(this.options.ttlMs / 60_000);
    await this.mailer.send({
      to: email,
      subject: "Your Skill Gateway sign-in link",
      text:
        `Open this link to sign in to Skill Gateway${linkTo ? " (and add this address to your account)" : ""}, then confirm on the page it opens:\n\n` +
        `${linkUrl(token)}\n\n` +
        `It works once, for ${minutes} minutes. If you did not ask for it, ignore this message.\n`,
    });
    return { sent: true };
  }

  /**
   * What a link's token would sign in as, without using it up: the page a link opens shows
   * this, and only a POST from that page consumes the token (a mail scanner that fetches the
   * link, even running its script, does not press the button).
   */
  async peek(token: string): Promise<PeekResult> {
    if (!plausibleToken(token)) return { ok: false, reason: "unknown" };
    const row = await this.store.peek(hash(token), this.now());
    if (!row) return { ok: false, reason: await this.whyUnusable(token) };
    return { ok: true, email: row.email, linkTo: row.linkTo ?? undefined, expiresAtMs: row.expiresAtMs };
  }

  /** Uses a link's token up: its address (and the account it should join), once, before expiry. */
  async consume(token: string): Promise<ConsumeResult> {
    if (!plausibleToken(token)) return { ok: false, reason: "unknown" };
    const row = await this.store.consume(hash(token), this.now());
    if (!row) return { ok: false, reason: await this.whyUnusable(token) };
    return { ok: true, email: row.email, linkTo: row.linkTo ?? undefined };
  }

  /**
   * Why a token that did not sign in cannot: read after the failed check, for the words only
   * (the check itself is the one conditional statement above). A token both used and expired
   * is "used": the more useful thing to tell.
   */
  private async whyUnusable(token: string): Promise<UnusableLinkReason> {
    const state = await this.store.state(hash(token));
    if (!state) return "unknown";
    return state.usedAtMs !== null ? "used" : "expired";
  }

  /** Deletes tokens past their expiry (used or not): they can never sign anyone in. */
  purgeExpired(): Promise<number> {
    return this.store.purgeExpired(this.now());
  }
}
