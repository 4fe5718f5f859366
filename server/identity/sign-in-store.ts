import type { Db } from "../db/db";

/**
 * The tables of sign-in's short-lived secrets: SIWE nonces (./siwe.ts), OAuth states
 * (./oauth.ts), e-mail link tokens and the development outbox (./email.ts). Each kind waits
 * for one use before an expiry, so each store answers the same questions: how many wait, when
 * the first expires, use one up (check and mark in one statement), purge the expired. Writes
 * run inside the caller's ledger operation (`commit.run`).
 */
interface PendingCounts {
  /** Unused, unexpired rows at `nowMs`. */
  pendingCount(nowMs: number): number;
  /** When the first unused row expires (ms), or NaN when none waits. */
  firstExpiryMs(nowMs: number): number;
  /** Deletes rows past their expiry, used or not; returns how many. */
  purgeExpired(nowMs: number): number;
}

export interface SiweNoncesStore extends PendingCounts {
  insert(nonce: string, client: string, createdAtMs: number, expiresAtMs: number): void;
  /** Drops the client's unused nonces beyond its `keep` newest. */
  trimClient(client: string, nowMs: number, keep: number): void;
  /** Marks the nonce used; false if unknown, used or expired. */
  consume(nonce: string, nowMs: number): boolean;
}

export interface OAuthStateRecord {
  codeVerifier: string;
  nonce: string;
  linkTo: string | null;
}

export interface OAuthStatesStore extends PendingCounts {
  insert(s: {
    stateHash: string;
    provider: string;
    codeVerifier: string;
    nonce: string;
    linkTo: string | null;
    createdAtMs: number;
    expiresAtMs: number;
  }): void;
  /** Marks the state used and returns what it kept; undefined if unknown, used, expired or another provider's. */
  consume(stateHash: string, provider: string, nowMs: number): OAuthStateRecord | undefined;
}

export interface EmailTokenRecord {
  email: string;
  linkTo: string | null;
}

export interface EmailTokensStore extends PendingCounts {
  insert(t: { tokenHash: string; email: string; linkTo: string | null; createdAtMs: number; expiresAtMs: number }): void;
  /** Tokens minted for `email` after `sinceMs`, used or not. */
  countSentSince(email: string, sinceMs: number): number;
  /** The live token's address, without using it up. */
  peek(tokenHash: string, nowMs: number): (EmailTokenRecord & { expiresAtMs: number }) | undefined;
  /** Marks the live token used and returns its address. */
  consume(tokenHash: string, nowMs: number): EmailTokenRecord | undefined;
}

export interface OutboxStore {
  insert(m: { to: string; subject: string; body: string; createdAtMs: number }): void;
}

/** The questions every sign-in secret's table answers the same way: how many wait, when the first expires, purge. */
abstract class SqlitePendingRows implements PendingCounts {
  private readonly pending;
  private readonly firstExpiry;
  private readonly purge;

  constructor(db: Db, table: "siwe_nonces" | "oauth_states" | "email_sign_in_tokens") {
    this.pending = db.prepare(`SELECT COUNT(*) FROM ${table} WHERE used_at IS NULL AND expires_at > ?`).pluck();
    this.firstExpiry = db.prepare(`SELECT MIN(expires_at) FROM ${table} WHERE used_at IS NULL AND expires_at > ?`).pluck();
    this.purge = db.prepare(`DELETE FROM ${table} WHERE expires_at <= ?`);
  }

  pendingCount(nowMs: number): number {
    return Number(this.pending.get(nowMs) as bigint);
  }

  firstExpiryMs(nowMs: number): number {
    return Number(this.firstExpiry.get(nowMs) as bigint | null);
  }

  purgeExpired(nowMs: number): number {
    return this.purge.run(nowMs).changes;
  }
}

/** SiweNoncesStore on the gateway's SQLite database (`siwe_nonces`). */
export class SqliteSiweNoncesStore extends SqlitePendingRows implements SiweNoncesStore {
  private readonly stmt;

  constructor(db: Db) {
    super(db, "siwe_nonces");
    this.stmt = {
      insert: db.prepare("INSERT INTO siwe_nonces (nonce, client, created_at, expires_at) VALUES (?, ?, ?, ?)"),
      consume: db.prepare("UPDATE siwe_nonces SET used_at = ? WHERE nonce = ? AND used_at IS NULL AND expires_at > ?"),
      trimClient: db.prepare(
        `DELETE FROM siwe_nonces WHERE nonce IN (
           SELECT nonce FROM siwe_nonces WHERE client = ? AND used_at IS NULL AND expires_at > ?
           ORDER BY created_at DESC, nonce LIMIT -1 OFFSET ?)`,
      ),
    };
  }

  insert(nonce: string, client: string, createdAtMs: number, expiresAtMs: number): void {
    this.stmt.insert.run(nonce, client, createdAtMs, expiresAtMs);
  }

  trimClient(client: string, nowMs: number, keep: number): void {
    this.stmt.trimClient.run(client, nowMs, keep);
  }

  consume(nonce: string, nowMs: number): boolean {
    return this.stmt.consume.run(nowMs, nonce, nowMs).changes === 1;
  }
}

/** OAuthStatesStore on the gateway's SQLite database (`oauth_states`). */
export class SqliteOAuthStatesStore extends SqlitePendingRows implements OAuthStatesStore {
  private readonly stmt;

  constructor(db: Db) {
    super(db, "oauth_states");
    this.stmt = {
      insert: db.prepare(
        "INSERT INTO oauth_states (state_hash, provider, code_verifier, nonce, link_to, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
      ),
      consume: db.prepare(
        "UPDATE oauth_states SET used_at = ? WHERE state_hash = ? AND provider = ? AND used_at IS NULL AND expires_at > ? RETURNING code_verifier, nonce, link_to",
      ),
    };
  }

  insert(s: {
    stateHash: string;
    provider: string;
    codeVerifier: string;
    nonce: string;
    linkTo: string | null;
    createdAtMs: number;
    expiresAtMs: number;
  }): void {
    this.stmt.insert.run(s.stateHash, s.provider, s.codeVerifier, s.nonce, s.linkTo, s.createdAtMs, s.expiresAtMs);
  }

  consume(stateHash: string, provider: string, nowMs: number): OAuthStateRecord | undefined {
    const row = this.stmt.consume.get(nowMs, stateHash, provider, nowMs) as
      { code_verifier: string; nonce: string; link_to: string | null } | undefined;
    return row && { codeVerifier: row.code_verifier, nonce: row.nonce, linkTo: row.link_to };
  }
}

/** EmailTokensStore on the gateway's SQLite database (`email_sign_in_tokens`). */
export class SqliteEmailTokensStore extends SqlitePendingRows implements EmailTokensStore {
  private readonly stmt;

  constructor(db: Db) {
    super(db, "email_sign_in_tokens");
    this.stmt = {
      insert: db.prepare("INSERT INTO email_sign_in_tokens (token_hash, email, link_to, created_at, expires_at) VALUES (?, ?, ?, ?, ?)"),
      recent: db.prepare("SELECT COUNT(*) FROM email_sign_in_tokens WHERE email = ? AND created_at > ?").pluck(),
      peek: db.prepare(
        "SELECT email, link_to, expires_at FROM email_sign_in_tokens WHERE token_hash = ? AND used_at IS NULL AND expires_at > ?",
      ),
      consume: db.prepare(
        "UPDATE email_sign_in_tokens SET used_at = ? WHERE token_hash = ? AND used_at IS NULL AND expires_at > ? RETURNING email, link_to",
      ),
    };
  }

  insert(t: { tokenHash: string; email: string; linkTo: string | null; createdAtMs: number; expiresAtMs: number }): void {
    this.stmt.insert.run(t.tokenHash, t.email, t.linkTo, t.createdAtMs, t.expiresAtMs);
  }

  countSentSince(email: string, sinceMs: number): number {
    return Number(this.stmt.recent.get(email, sinceMs) as bigint);
  }

  peek(tokenHash: string, nowMs: number): (EmailTokenRecord & { expiresAtMs: number }) | undefined {
    const row = this.stmt.peek.get(tokenHash, nowMs) as { email: string; link_to: string | null; expires_at: bigint } | undefined;
    return row && { email: row.email, linkTo: row.link_to, expiresAtMs: Number(row.expires_at) };
  }

  consume(tokenHash: string, nowMs: number): EmailTokenRecord | undefined {
    const row = this.stmt.consume.get(nowMs, tokenHash, nowMs) as { email: string; link_to: string | null } | undefined;
    return row && { email: row.email, linkTo: row.link_to };
  }
}

/** OutboxStore on the gateway's SQLite database (`outbox`, read by developers and tests). */
export class SqliteOutboxStore implements OutboxStore {
  private readonly stmt;

  constructor(db: Db) {
    this.stmt = { insert: db.prepare("INSERT INTO outbox (to_address, subject, body, created_at) VALUES (?, ?, ?, ?)") };
  }

  insert(m: { to: string; subject: string; body: string; createdAtMs: number }): void {
    this.stmt.insert.run(m.to, m.subject, m.body, m.createdAtMs);
  }
}
