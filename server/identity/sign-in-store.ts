import { type Database, type Sql, within } from "../db/sql";

/**
 * The tables of sign-in's short-lived secrets: SIWE nonces (./siwe.ts), OAuth states
 * (./oauth.ts), e-mail link tokens and the development outbox (./email.ts). Each kind waits
 * for one use before an expiry, so each store answers the same questions: how many wait, when
 * the first expires, use one up, purge the expired.
 *
 * Using one up is ONE conditional UPDATE (`... WHERE ... AND used_at IS NULL AND expires_at > ?
 * RETURNING ...`): of two requests carrying the same secret, on one gateway or on two replicas
 * sharing a PostgreSQL database, exactly one gets a row back. PostgreSQL makes the second UPDATE
 * wait for the first's row lock and then finds the row used; SQLite runs one writer at a time.
 *
 * Each write is atomic on its own; given a `tx`, it joins the caller's transaction instead.
 */

export interface OAuthStateRecord {
  codeVerifier: string;
  nonce: string;
  linkTo: string | null;
}

export interface EmailTokenRecord {
  email: string;
  linkTo: string | null;
}

type SecretTable = "siwe_nonces" | "oauth_states" | "email_sign_in_tokens";

/** The questions every sign-in secret's table answers the same way: how many wait, when the first expires, purge. */
abstract class PendingRows {
  constructor(
    protected readonly db: Database,
    private readonly table: SecretTable,
  ) {}

  /** Unused, unexpired rows at `nowMs`. */
  async pendingCount(nowMs: number, sql: Sql = this.db): Promise<number> {
    return Number(await sql.value<bigint>(`SELECT COUNT(*) FROM ${this.table} WHERE used_at IS NULL AND expires_at > ?`, [nowMs]));
  }

  /** When the first unused row expires (ms), or NaN when none waits. */
  async firstExpiryMs(nowMs: number, sql: Sql = this.db): Promise<number> {
    const first = await sql.value<bigint | null>(`SELECT MIN(expires_at) FROM ${this.table} WHERE used_at IS NULL AND expires_at > ?`, [
      nowMs,
    ]);
    return first === null || first === undefined ? Number.NaN : Number(first);
  }

  /** How long until the first unused row expires and frees a place: at least 1 ms (1 when none waits any more). */
  async retryAfterMs(nowMs: number, sql: Sql = this.db): Promise<number> {
    const first = await this.firstExpiryMs(nowMs, sql);
    return Number.isNaN(first) ? 1 : Math.max(1, first - nowMs);
  }

  /** Deletes rows past their expiry, used or not; returns how many. */
  purgeExpired(nowMs: number, tx?: Sql): Promise<number> {
    return within(this.db, tx, (tx) => tx.run(`DELETE FROM ${this.table} WHERE expires_at <= ?`, [nowMs]));
  }
}

/** `siwe_nonces`: the nonces handed out for Sign-In With Ethereum. */
export class SiweNoncesStore extends PendingRows {
  constructor(db: Database) {
    super(db, "siwe_nonces");
  }

  insert(nonce: string, client: string, createdAtMs: number, expiresAtMs: number, tx?: Sql): Promise<void> {
    return within(this.db, tx, async (tx) => {
      await tx.run("INSERT INTO siwe_nonces (nonce, client, created_at, expires_at) VALUES (?, ?, ?, ?)", [
        nonce,
        client,
        createdAtMs,
        expiresAtMs,
      ]);
    });
  }

  /** Drops the client's unused nonces beyond its `keep` newest. */
  trimClient(client: string, nowMs: number, keep: number, tx?: Sql): Promise<void> {
    return within(this.db, tx, async (tx) => {
      await tx.run(
        `DELETE FROM siwe_nonces WHERE client = ? AND used_at IS NULL AND expires_at > ? AND nonce NOT IN (
           SELECT nonce FROM siwe_nonces WHERE client = ? AND used_at IS NULL AND expires_at > ?
           ORDER BY created_at DESC, nonce LIMIT ?)`,
        [client, nowMs, client, nowMs, keep],
      );
    });
  }

  /** Marks the nonce used; false if unknown, used or expired. */
  consume(nonce: string, nowMs: number, tx?: Sql): Promise<boolean> {
    return within(this.db, tx, async (tx) => {
      const used = await tx.value<string>(
        "UPDATE siwe_nonces SET used_at = ? WHERE nonce = ? AND used_at IS NULL AND expires_at > ? RETURNING nonce",
        [nowMs, nonce, nowMs],
      );
      return used !== undefined;
    });
  }
}

/** `oauth_states`: started GitHub and Google sign-ins. */
export class OAuthStatesStore extends PendingRows {
  constructor(db: Database) {
    super(db, "oauth_states");
  }

  insert(
    s: {
      stateHash: string;
      provider: string;
      codeVerifier: string;
      nonce: string;
      linkTo: string | null;
      createdAtMs: number;
      expiresAtMs: number;
    },
    tx?: Sql,
  ): Promise<void> {
    return within(this.db, tx, async (tx) => {
      await tx.run(
        "INSERT INTO oauth_states (state_hash, provider, code_verifier, nonce, link_to, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        [s.stateHash, s.provider, s.codeVerifier, s.nonce, s.linkTo, s.createdAtMs, s.expiresAtMs],
      );
    });
  }

  /** Marks the state used and returns what it kept; undefined if unknown, used, expired or another provider's. */
  consume(stateHash: string, provider: string, nowMs: number, tx?: Sql): Promise<OAuthStateRecord | undefined> {
    return within(this.db, tx, async (tx) => {
      const row = await tx.one<{ code_verifier: string; nonce: string; link_to: string | null }>(
        "UPDATE oauth_states SET used_at = ? WHERE state_hash = ? AND provider = ? AND used_at IS NULL AND expires_at > ? RETURNING code_verifier, nonce, link_to",
        [nowMs, stateHash, provider, nowMs],
      );
      return row && { codeVerifier: row.code_verifier, nonce: row.nonce, linkTo: row.link_to };
    });
  }
}

/** `email_sign_in_tokens`: the tokens of mailed sign-in links. */
export class EmailTokensStore extends PendingRows {
  constructor(db: Database) {
    super(db, "email_sign_in_tokens");
  }

  insert(
    t: { tokenHash: string; email: string; linkTo: string | null; createdAtMs: number; expiresAtMs: number },
    tx?: Sql,
  ): Promise<void> {
    return within(this.db, tx, async (tx) => {
      await tx.run("INSERT INTO email_sign_in_tokens (token_hash, email, link_to, created_at, expires_at) VALUES (?, ?, ?, ?, ?)", [
        t.tokenHash,
        t.email,
        t.linkTo,
        t.createdAtMs,
        t.expiresAtMs,
      ]);
    });
  }

  /** Tokens minted for `email` after `sinceMs`, used or not. */
  async countSentSince(email: string, sinceMs: number, sql: Sql = this.db): Promise<number> {
    return Number(
      await sql.value<bigint>("SELECT COUNT(*) FROM email_sign_in_tokens WHERE email = ? AND created_at > ?", [email, sinceMs]),
    );
  }

  /** The live token's address, without using it up. */
  async peek(tokenHash: string, nowMs: number, sql: Sql = this.db): Promise<(EmailTokenRecord & { expiresAtMs: number }) | undefined> {
    const row = await sql.one<{ email: string; link_to: string | null; expires_at: bigint }>(
      "SELECT email, link_to, expires_at FROM email_sign_in_tokens WHERE token_hash = ? AND used_at IS NULL AND expires_at > ?",
      [tokenHash, nowMs],
    );
    return row && { email: row.email, linkTo: row.link_to, expiresAtMs: Number(row.expires_at) };
  }

  /** Whether a token, live or not, was used and when it expires; undefined for one never stored (or purged). */
  async state(tokenHash: string, sql: Sql = this.db): Promise<{ usedAtMs: number | null; expiresAtMs: number } | undefined> {
    const row = await sql.one<{ used_at: bigint | null; expires_at: bigint }>(
      "SELECT used_at, expires_at FROM email_sign_in_tokens WHERE token_hash = ?",
      [tokenHash],
    );
    return row && { usedAtMs: row.used_at === null ? null : Number(row.used_at), expiresAtMs: Number(row.expires_at) };
  }

  /** Marks the live token used and returns its address. */
  consume(tokenHash: string, nowMs: number, tx?: Sql): Promise<EmailTokenRecord | undefined> {
    return within(this.db, tx, async (tx) => {
      const row = await tx.one<{ email: string; link_to: string | null }>(
        "UPDATE email_sign_in_tokens SET used_at = ? WHERE token_hash = ? AND used_at IS NULL AND expires_at > ? RETURNING email, link_to",
        [nowMs, tokenHash, nowMs],
      );
      return row && { email: row.email, linkTo: row.link_to };
    });
  }
}

/** `outbox`: the default mailer's messages, read by developers and tests. */
export class OutboxStore {
  constructor(private readonly db: Database) {}

  insert(m: { to: string; subject: string; body: string; createdAtMs: number }, tx?: Sql): Promise<void> {
    return within(this.db, tx, async (tx) => {
      await tx.run("INSERT INTO outbox (to_address, subject, body, created_at) VALUES (?, ?, ?, ?)", [
        m.to,
        m.subject,
        m.body,
        m.createdAtMs,
      ]);
    });
  }
}
