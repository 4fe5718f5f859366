import { type Database, type Sql, within } from "../db/sql";

/**
 * The tables of the hosted MCP server's OAuth (./mcp-oauth.ts): registered clients, authorization requests waiting for
 * consent, authorization codes, access and refresh tokens. Every secret is looked up by its SHA-256 (`hash`), the only
 * form stored.
 *
 * Using a secret up (a request consented to, a code exchanged, a refresh token rotated) is ONE conditional UPDATE
 * (`... WHERE ... AND used_at IS NULL AND expires_at > ? RETURNING ...`): of two requests presenting the same secret, on
 * one gateway or on two replicas sharing PostgreSQL, exactly one gets the row back (as ./sign-in-store.ts does).
 */

export interface StoredClient {
  clientId: string;
  /** The client's registration (RFC 7591 metadata) as the gateway accepted it, JSON. */
  metadata: string;
  createdAtMs: number;
}

export interface PendingRequest {
  clientId: string;
  redirectUri: string;
  codeChallenge: string;
  state: string | null;
  resource: string;
  expiresAtMs: number;
}

export interface IssuedCode {
  clientId: string;
  apiKeyId: string;
  redirectUri: string;
  codeChallenge: string;
  resource: string;
}

export type TokenKind = "access" | "refresh";

export interface StoredToken {
  kind: TokenKind;
  clientId: string;
  apiKeyId: string;
  resource: string;
  expiresAtMs: number;
  usedAtMs: number | null;
}

interface RequestRow {
  client_id: string;
  redirect_uri: string;
  code_challenge: string;
  state: string | null;
  resource: string;
  expires_at: bigint;
}

interface CodeRow {
  client_id: string;
  api_key_id: string;
  redirect_uri: string;
  code_challenge: string;
  resource: string;
}

interface TokenRow {
  kind: TokenKind;
  client_id: string;
  api_key_id: string;
  resource: string;
  expires_at: bigint;
  used_at: bigint | null;
}

const toRequest = (row: RequestRow): PendingRequest => ({
  clientId: row.client_id,
  redirectUri: row.redirect_uri,
  codeChallenge: row.code_challenge,
  state: row.state,
  resource: row.resource,
  expiresAtMs: Number(row.expires_at),
});

const toCode = (row: CodeRow): IssuedCode => ({
  clientId: row.client_id,
  apiKeyId: row.api_key_id,
  redirectUri: row.redirect_uri,
  codeChallenge: row.code_challenge,
  resource: row.resource,
});

const toToken = (row: TokenRow): StoredToken => ({
  kind: row.kind,
  clientId: row.client_id,
  apiKeyId: row.api_key_id,
  resource: row.resource,
  expiresAtMs: Number(row.expires_at),
  usedAtMs: row.used_at === null ? null : Number(row.used_at),
});

export class McpOAuthStore {
  constructor(private readonly db: Database) {}

  async insertClient(client: StoredClient): Promise<void> {
    await this.db.run("INSERT INTO mcp_oauth_clients (client_id, metadata, created_at) VALUES (?, ?, ?)", [
      client.clientId,
      client.metadata,
      client.createdAtMs,
    ]);
  }

  async clientCount(): Promise<number> {
    return Number(await this.db.value<bigint>("SELECT COUNT(*) FROM mcp_oauth_clients"));
  }

  async client(clientId: string): Promise<StoredClient | undefined> {
    const row = await this.db.one<{ client_id: string; metadata: string; created_at: bigint }>(
      "SELECT client_id, metadata, created_at FROM mcp_oauth_clients WHERE client_id = ?",
      [clientId],
    );
    return row && { clientId: row.client_id, metadata: row.metadata, createdAtMs: Number(row.created_at) };
  }

  async insertRequest(hash: string, request: PendingRequest, nowMs: number): Promise<void> {
    await this.db.run(
      "INSERT INTO mcp_oauth_requests (id_hash, client_id, redirect_uri, code_challenge, state, resource, created_at, expires_at)" +
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
      [hash, request.clientId, request.redirectUri, request.codeChallenge, request.state, request.resource, nowMs, request.expiresAtMs],
    );
  }

  /** Requests waiting at `nowMs` (unused, unexpired). */
  async pendingRequestCount(nowMs: number): Promise<number> {
    return Number(await this.db.value<bigint>("SELECT COUNT(*) FROM mcp_oauth_requests WHERE used_at IS NULL AND expires_at > ?", [nowMs]));
  }

  /** A request still waiting at `nowMs` (unused, unexpired), without using it up. */
  async pendingRequest(hash: string, nowMs: number): Promise<PendingRequest | undefined> {
    const row = await this.db.one<RequestRow>(
      "SELECT client_id, redirect_uri, code_challenge, state, resource, expires_at FROM mcp_oauth_requests" +
        " WHERE id_hash = ? AND used_at IS NULL AND expires_at > ?",
      [hash, nowMs],
    );
    return row && toRequest(row);
  }

  /** Uses a waiting request up (consented to or refused): its row, or undefined when it is unknown, used or expired. */
  async useRequest(hash: string, nowMs: number, tx?: Sql): Promise<PendingRequest | undefined> {
    return within(this.db, tx, async (tx) => {
      const row = await tx.one<RequestRow>(
        "UPDATE mcp_oauth_requests SET used_at = ? WHERE id_hash = ? AND used_at IS NULL AND expires_at > ?" +
          " RETURNING client_id, redirect_uri, code_challenge, state, resource, expires_at",
        [nowMs, hash, nowMs],
      );
      return row && toRequest(row);
    });
  }

  async insertCode(hash: string, code: IssuedCode, nowMs: number, expiresAtMs: number, tx?: Sql): Promise<void> {
    await within(this.db, tx, async (tx) => {
      await tx.run(
        "INSERT INTO mcp_oauth_codes (code_hash, client_id, api_key_id, redirect_uri, code_challenge, resource, created_at, expires_at)" +
          " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [hash, code.clientId, code.apiKeyId, code.redirectUri, code.codeChallenge, code.resource, nowMs, expiresAtMs],
      );
    });
  }

  /** A code, used or not, expired or not (until purged), without using it up. */
  async code(hash: string): Promise<(IssuedCode & { usedAtMs: number | null; expiresAtMs: number }) | undefined> {
    const row = await this.db.one<CodeRow & { used_at: bigint | null; expires_at: bigint }>(
      "SELECT client_id, api_key_id, redirect_uri, code_challenge, resource, used_at, expires_at FROM mcp_oauth_codes WHERE code_hash = ?",
      [hash],
    );
    return row && { ...toCode(row), usedAtMs: row.used_at === null ? null : Number(row.used_at), expiresAtMs: Number(row.expires_at) };
  }

  /** Uses `clientId`'s code up: its row, or undefined when it is unknown, another client's, used already or expired. */
  async useCode(hash: string, clientId: string, nowMs: number, tx: Sql): Promise<IssuedCode | undefined> {
    const row = await tx.one<CodeRow>(
      "UPDATE mcp_oauth_codes SET used_at = ? WHERE code_hash = ? AND client_id = ? AND used_at IS NULL AND expires_at > ?" +
        " RETURNING client_id, api_key_id, redirect_uri, code_challenge, resource",
      [nowMs, hash, clientId, nowMs],
    );
    return row && toCode(row);
  }

  /** The grant (API key) of `clientId`'s code that was used already: a second exchange of one code is a replay. */
  async usedCodeKey(hash: string, clientId: string, tx: Sql = this.db): Promise<string | undefined> {
    return tx.value<string>("SELECT api_key_id FROM mcp_oauth_codes WHERE code_hash = ? AND client_id = ? AND used_at IS NOT NULL", [
      hash,
      clientId,
    ]);
  }

  async insertToken(
    hash: string,
    token: { kind: TokenKind; clientId: string; apiKeyId: string; resource: string; expiresAtMs: number },
    nowMs: number,
    tx: Sql,
  ): Promise<void> {
    await tx.run(
      "INSERT INTO mcp_oauth_tokens (token_hash, kind, client_id, api_key_id, resource, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
      [hash, token.kind, token.clientId, token.apiKeyId, token.resource, nowMs, token.expiresAtMs],
    );
  }

  /** A token by its hash, used or not, expired or not (the caller decides what each means). */
  async token(hash: string, sql: Sql = this.db): Promise<StoredToken | undefined> {
    const row = await sql.one<TokenRow>(
      "SELECT kind, client_id, api_key_id, resource, expires_at, used_at FROM mcp_oauth_tokens WHERE token_hash = ?",
      [hash],
    );
    return row && toToken(row);
  }

  /**
   * Rotates `clientId`'s refresh token: marks it used; its row, or undefined when it is unknown, another client's, used
   * already or expired (another client's attempt uses nothing up).
   */
  async useRefreshToken(hash: string, clientId: string, nowMs: number, tx: Sql): Promise<StoredToken | undefined> {
    const row = await tx.one<TokenRow>(
      "UPDATE mcp_oauth_tokens SET used_at = ?" +
        " WHERE token_hash = ? AND kind = 'refresh' AND client_id = ? AND used_at IS NULL AND expires_at > ?" +
        " RETURNING kind, client_id, api_key_id, resource, expires_at, used_at",
      [nowMs, hash, clientId, nowMs],
    );
    return row && toToken(row);
  }

  async deleteToken(hash: string): Promise<void> {
    await this.db.run("DELETE FROM mcp_oauth_tokens WHERE token_hash = ?", [hash]);
  }

  /** Ends every token of a grant (its API key): returns how many there were. */
  deleteTokensOfKey(apiKeyId: string, tx?: Sql): Promise<number> {
    return within(this.db, tx, (tx) => tx.run("DELETE FROM mcp_oauth_tokens WHERE api_key_id = ?", [apiKeyId]));
  }

  /**
   * Deletes requests, codes and tokens past their expiry, then clients registered before `unusedBeforeMs` that hold
   * nothing (no request, code or token left: no grant, or only dead ones); returns how many rows went.
   */
  purgeExpired(nowMs: number, unusedBeforeMs: number): Promise<number> {
    return this.db.transaction(async (tx) => {
      let purged = 0;
      for (const table of ["mcp_oauth_requests", "mcp_oauth_codes", "mcp_oauth_tokens"])
        purged += await tx.run(`DELETE FROM ${table} WHERE expires_at <= ?`, [nowMs]);
      purged += await tx.run(
        "DELETE FROM mcp_oauth_clients WHERE created_at < ?" +
          " AND NOT EXISTS (SELECT 1 FROM mcp_oauth_requests r WHERE r.client_id = mcp_oauth_clients.client_id)" +
          " AND NOT EXISTS (SELECT 1 FROM mcp_oauth_codes k WHERE k.client_id = mcp_oauth_clients.client_id)" +
          " AND NOT EXISTS (SELECT 1 FROM mcp_oauth_tokens t WHERE t.client_id = mcp_oauth_clients.client_id)",
        [unusedBeforeMs],
      );
      return purged;
    });
  }
}
