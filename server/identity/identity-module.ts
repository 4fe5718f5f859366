import type { Config } from "../config";
import type { Database } from "../db/sql";
import type { Ledger } from "../ledger/ledger";
import type { HousekeepingTask } from "../housekeeping";
import { ApiKeys } from "./api-keys";
import { MagicLinks, type MailMessage, type Mailer, createMailer } from "./email";
import { McpOAuth } from "./mcp-oauth";
import { OAuthSignIn, oauthSettings } from "./oauth";
import { Sessions } from "./sessions";
import { SiweNonces } from "./siwe";

/** How often API keys' last use, noted in memory by the call path, is written to their rows (in one transaction). */
export const KEY_LAST_USED_FLUSH_INTERVAL_MS = 10_000;

/** The settings the identity path reads: key caching, sign-in limits and lifetimes, mail, the OAuth providers. */
export type IdentityConfig = Pick<
  Config,
  | "keyCacheTtlMs"
  | "emailLinkTtlMs"
  | "emailLinksMax"
  | "oauthStatesMax"
  | "mcpAccessTokenTtlMs"
  | "mcpRefreshTokenTtlMs"
  | "mcpOAuthClientsMax"
  | "mcpOAuthRequestsMax"
  | "siweNoncesPerClientMax"
  | "siweNoncesMax"
  | "pruneIntervalMs"
  | "smtpUrl"
  | "mailFrom"
> &
  Parameters<typeof oauthSettings>[0];

/** What was pruned by one pass over the sign-in state (Identity.pruneExpired). */
export interface PrunedSignInState {
  siweNonces: number;
  emailLinks: number;
  oauthStates: number;
  sessions: number;
  mcpOAuth: number;
}

/** The identity path's services: API keys, sessions, and every way to sign in. */
export interface Identity {
  keys: ApiKeys;
  sessions: Sessions;
  magicLinks: MagicLinks;
  oauth: OAuthSignIn;
  /** The hosted MCP server's OAuth 2.1 authorization server. */
  mcpOAuth: McpOAuth;
  /** SIWE nonces, bounded per client address and in all. */
  siweNonces: SiweNonces;
  /**
   * Deletes the sign-in state that can never be used again: expired SIWE nonces, e-mail links, OAuth states and MCP
   * OAuth grants, and expired or ended sessions. Anyone can make the gateway store the first ones, so they must not
   * accumulate between sign-ins.
   */
  pruneExpired(): Promise<PrunedSignInState>;
  /** Its timers: writing keys' last use, pruning the sign-in state every PRUNE_INTERVAL_SEC. */
  housekeeping: HousekeepingTask[];
  /** Writes the keys' last use one last time. */
  close(log: (message: string, error?: unknown) => void): Promise<void>;
}

export interface IdentityOptions {
  /** Where e-mail goes; by default what the config says (SMTP_URL, or the outbox table). */
  mailer?: Mailer;
  /** With the outbox mailer: also hands each message here, for a developer to read. */
  outboxEcho?: (message: MailMessage) => void;
  /** The clock of MCP OAuth grants; Date.now by default. */
  now?: () => number;
}

/** The identity path on `ledger`'s database (accounts are opened in its books). */
export function createIdentity(db: Database, ledger: Ledger, config: IdentityConfig, options: IdentityOptions = {}): Identity {
  const keys = new ApiKeys(db, config.keyCacheTtlMs, () => ledger.caughtUp());
  const sessions = new Sessions(ledger);
  const magicLinks = new MagicLinks(db, options.mailer ?? createMailer(config, db, options.outboxEcho), {
    ttlMs: config.emailLinkTtlMs,
    pendingMax: config.emailLinksMax,
  });
  const oauth = new OAuthSignIn(db, oauthSettings(config), config.oauthStatesMax);
  const mcpOAuth = new McpOAuth(
    db,
    keys,
    {
      accessTokenTtlMs: config.mcpAccessTokenTtlMs,
      refreshTokenTtlMs: config.mcpRefreshTokenTtlMs,
      clientsMax: config.mcpOAuthClientsMax,
      requestsMax: config.mcpOAuthRequestsMax,
    },
    options.now,
  );
  const siweNonces = new SiweNonces(db, { perClientMax: config.siweNoncesPerClientMax, max: config.siweNoncesMax });
  const pruneExpired = async (): Promise<PrunedSignInState> => ({
    siweNonces: await siweNonces.purgeExpired(),
    emailLinks: await magicLinks.purgeExpired(),
    oauthStates: await oauth.purgeExpired(),
    sessions: await sessions.purgeExpired(),
    mcpOAuth: await mcpOAuth.purgeExpired(),
  });
  return {
    keys,
    sessions,
    magicLinks,
    oauth,
    mcpOAuth,
    siweNonces,
    pruneExpired,
    housekeeping: [
      { name: "recording API keys' last use", everyMs: KEY_LAST_USED_FLUSH_INTERVAL_MS, run: () => keys.flushLastUsed() },
      { name: "pruning expired sign-in state and sessions", everyMs: config.pruneIntervalMs, run: pruneExpired },
    ],
    async close(log) {
      await keys.flushLastUsed().catch((error) => log("recording API keys' last use at close failed", error));
    },
  };
}
