/**
 * Every setting of the gateway, read from the environment in one place, validated, with
 * defaults that make `npm start` work on a fresh machine. Nothing else reads process.env.
 */

import os from "node:os";
import ipaddr from "ipaddr.js";
import type { FeeMode } from "./ledger/fees";
import { LOG_LEVELS, type LogLevel } from "./ops/log";
import { usdToMicros } from "./ledger/money";

export interface Config {
  host: string;
  port: number;
  dbPath: string;
  /**
   * DATABASE_URL: postgres://... puts every table on PostgreSQL (several replicas may share it); empty keeps
   * the SQLite file at dbPath (one process). The URL may hold a password: it is never logged.
   */
  databaseUrl: string;
  /**
   * REDIS_URL: redis://... puts the per-key, per-skill and daily limits and cache invalidation on Redis, so
   * they hold across replicas; empty keeps them in this process's memory.
   */
  redisUrl: string;
  /** REPLICA_ID: this replica's name in logs, metrics, pg_stat_activity and its holds' ownership. */
  replicaId: string;
  /** With DATABASE_URL: how long the settlement leader's lease lasts without renewal before another replica may take over. */
  leaderLeaseMs: number;
  /**
   * With DATABASE_URL: a ping of PostgreSQL unanswered this long makes the database unavailable (server/db/postgres/watch.ts):
   * the operations waiting on it, and every new one until it answers again, fail with 503 database_unavailable.
   */
  databasePingTimeoutMs: number;
  /** `included` (spec variant B): caller pays the listed price. `on_top` (variant A): price + fee. */
  feeMode: FeeMode;
  feeBps: bigint;
  rateLimitPerMin: number;
  /** Calls per account per UTC day; 0 switches the cap off. */
  dailyCallCap: number;
  maxRequestBytes: number;
  /** How long a client may take to send a request's headers (a slow client holds a socket). */
  headersTimeoutMs: number;
  /** How long a client may take to send a whole request, headers and body. */
  requestTimeoutMs: number;
  /** GET /readyz fails once the deposit indexer or the settler has gone this long without a successful step. */
  readyMaxLagMs: number;
  maxResponseBytes: number;
  defaultSkillTimeoutMs: number;
  /**
   * Origins of skill backends the gateway may call whatever their address (loopback, a private
   * network): the egress policy's exceptions, for the operator's own skills only (npm run
   * register-skill). Every other backend, and every seller's listing, must be a public address.
   */
  skillBackendAllowlist: string[];
  /** Ports a skill backend may use; empty allows any. */
  skillBackendPorts: number[];
  idempotencyTtlMs: number;
  keyCacheTtlMs: number;
  /** Most calls whose ledger writes share one durable SQLite commit. */
  groupCommitMaxOps: number;
  /** JSON-RPC of the chain holding the escrow; empty for the embedded default, which starts its own. */
  chainRpcUrl: string;
  /** The deployment file (addresses, chain id, deploy block) when chainRpcUrl is set. */
  deploymentFile: string;
  /** Port of the embedded local chain (0 for any free port). */
  chainPort: number;
  /** Blocks a deposit waits on top of it before it is credited. 0 credits at the head (a local chain). */
  depositConfirmations: number;
  /** How often the deposit indexer polls the chain. */
  indexerIntervalMs: number;
  /** How often the settler posts a batch of paid calls (sooner once settleTriggerCalls wait). */
  settleIntervalMs: number;
  /** Most calls in one settlement batch. */
  settleMaxCalls: number;
  /** A batch goes out early once this many calls wait. */
  settleTriggerCalls: number;
  /** With CHAIN_RPC_URL: the key holding SETTLER_ROLE (0x + 64 hex); empty settles nothing. Never logged. */
  settlerPrivateKey: string;
  /** With CHAIN_RPC_URL: the key holding VOUCHER_SIGNER_ROLE; empty issues no vouchers. Never logged. */
  voucherSignerPrivateKey: string;
  /** The least a withdrawal voucher may be for, in base units: dust costs more to redeem than it pays out. */
  voucherMinMicros: bigint;
  /** Unredeemed, unexpired withdrawal vouchers one account may hold at once. */
  vouchersOpenPerAccountMax: number;
  /** Withdrawal vouchers one account may be issued in any hour (a sliding window). */
  voucherRateLimitPerHour: number;
  /**
   * With CHAIN_RPC_URL: a key holding SETTLER_ROLE that settles this replica's x402 payments (one per replica, not the
   * batch settler's); empty turns the x402 endpoint off. Never logged.
   */
  x402SettlerPrivateKey: string;
  /**
   * AES-256-GCM key (32 bytes: 64 hex digits, or base64) that encrypts the owner keys of embedded wallets the
   * server holds (e-mail and OAuth accounts). Empty: such wallets cannot be created or used. Never logged.
   */
  walletEncryptionKey: string;
  /** The dashboard's public origin (scheme, host, port): SIWE's domain and URI, and where sign-in links point. */
  publicUrl: string;
  /**
   * COOKIE_SECURE: session cookies carry Secure and the __Host- prefix. It follows PUBLIC_URL (on when that is https);
   * a value that contradicts it is refused at start.
   */
  secureCookies: boolean;
  /** How long an e-mail sign-in link works. */
  emailLinkTtlMs: number;
  /** smtp:// or smtps:// URL of the mail server; empty writes mail to the `outbox` table instead. Never logged. */
  smtpUrl: string;
  /** The From of the gateway's e-mail. */
  mailFrom: string;
  /** GitHub OAuth app; sign-in with GitHub is off while the id is empty. The secret is never logged. */
  githubClientId: string;
  githubClientSecret: string;
  githubAuthorizationUrl: string;
  githubTokenUrl: string;
  /** GitHub's GET /user (the API), which names the token's account. */
  githubUserUrl: string;
  githubScope: string;
  /** Google OAuth client; sign-in with Google is off while the id is empty. The secret is never logged. */
  googleClientId: string;
  googleClientSecret: string;
  /** OpenID Connect issuer, discovered through /.well-known/openid-configuration. */
  googleIssuer: string;
  /** The chain id a SIWE message must name (Base mainnet unless configured). */
  siweChainId: number;
  /** The cheapest and dearest per-call price a seller may list a skill at, in base units. */
  minSkillPriceMicros: bigint;
  maxSkillPriceMicros: bigint;
  /**
   * Which proxies in front of the gateway to believe about the client's address
   * (X-Forwarded-For), as Express's `trust proxy`: false (none: the socket's peer is the
   * client), a number of hops, or addresses/CIDRs and the names loopback, linklocal,
   * uniquelocal. Every per-address limit keys on the address this yields.
   */
  trustProxy: false | number | string[];
  /** Requests per minute per client address to the sign-in endpoints (e-mail, SIWE, GitHub, Google). */
  signInRateLimitPerMin: number;
  /** Requests per minute per client address to every other endpoint, but those counted per credential or as health checks. */
  publicRateLimitPerMin: number;
  /** Requests per minute per API key or dashboard session, to the endpoints that consume it (instead of its address's). */
  credentialRateLimitPerMin: number;
  /** Requests per minute per client address to GET /healthz and /readyz, counted apart from everything else. */
  healthRateLimitPerMin: number;
  /** SIWE nonces one client address may hold unused at once; asking for more drops its oldest. */
  siweNoncesPerClientMax: number;
  /** Unused SIWE nonces in all; beyond it, a new one is refused (429) until the oldest expires. */
  siweNoncesMax: number;
  /** E-mail sign-in links waiting to be used, in all; beyond it, POST /auth/email/start is refused (429). */
  emailLinksMax: number;
  /** Started GitHub/Google sign-ins waiting for their callback, in all; beyond it, a start is refused (429). */
  oauthStatesMax: number;
  /** How often expired nonces, links, OAuth states and sessions are deleted. */
  pruneIntervalMs: number;
  /** How long an OAuth access token of the hosted MCP server is good for (docs/mcp.md). */
  mcpAccessTokenTtlMs: number;
  /** How long an OAuth refresh token of the hosted MCP server is good for (each use rotates it; never past its grant's expiry). */
  mcpRefreshTokenTtlMs: number;
  /** OAuth clients registered with the hosted MCP server, in all (anyone may register one); beyond it, 400 too_many_requests. */
  mcpOAuthClientsMax: number;
  /** OAuth authorization requests waiting for a person's consent, in all; beyond it, a new one is refused. */
  mcpOAuthRequestsMax: number;

  // The production entry's settings (`npm run serve`, server/main.ts); loadServeConfig says which it requires.
  /** JSON-RPC of the ERC-4337 bundler embedded wallets' operations go to; empty: no embedded wallets under serve. */
  bundlerUrl: string;
  /** The key GatewayPaymaster trusts (its verifyingSigner): it approves each sponsored operation. Never logged. */
  paymasterSignerPrivateKey: string;
  /** The TestUSDC owner's key that funds sandbox card top-ups (test tokens only); empty: card top-ups off. Never logged. */
  fundingPrivateKey: string;
  /** How often embedded wallets are checked for USDC to sweep into the escrow. */
  walletSweepIntervalMs: number;
  /** The least severe log lines written (LOG_LEVEL): fatal, error, warn, info (the default), debug, trace or silent. */
  logLevel: LogLevel;
  /** The bearer token GET /metrics asks of a scraper (METRICS_TOKEN); empty: /metrics is not served. Never logged. */
  metricsToken: string;
}

export class ConfigError extends Error {
  override name = "ConfigError";
}

type Env = Record<string, string | undefined>;

function int(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  if (!/^-?\d+$/.test(raw.trim())) throw new ConfigError(`${name} must be an integer, got "${raw}"`);
  const value = Number(raw);
  if (value < min || value > max) throw new ConfigError(`${name} must be between ${min} and ${max}, got ${value}`);
  return value;
}

function oneOf<T extends string>(env: Env, name: string, allowed: readonly T[], fallback: T): T {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  if (!(allowed as readonly string[]).includes(raw)) {
    throw new ConfigError(`${name} must be one of ${allowed.join(", ")}, got "${raw}"`);
  }
  return raw as T;
}

function usd(env: Env, name: string, fallback: string): bigint {
  const raw = env[name];
  const value = raw === undefined || raw === "" ? fallback : raw;
  if (!/^\d+(\.\d{1,6})?$/.test(value.trim()))
    throw new ConfigError(`${name} must be a USD amount with at most 6 decimals, got "${value}"`);
  return usdToMicros(value);
}

/** An https URL, or http for a server on this machine (a local provider, in development and tests). */
function url(env: Env, name: string, fallback: string, protocols: readonly string[] = ["https:"]): string {
  const raw = env[name] || fallback;
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new ConfigError(`${name} must be a URL, got "${raw}"`);
  }
  const loopback = ["127.0.0.1", "localhost", "[::1]"].includes(parsed.hostname);
  if (!protocols.includes(parsed.protocol) && !(parsed.protocol === "http:" && loopback)) {
    throw new ConfigError(`${name} must be a ${protocols.join(" or ")} URL (http only on this machine), got "${raw}"`);
  }
  return raw.replace(/\/+$/, "");
}

/**
 * A URL that may carry a password (DATABASE_URL, REDIS_URL), or empty when unset. Its errors never repeat
 * the value: a configuration error is printed, and the password with it would be.
 */
function secretUrl(env: Env, name: string, protocols: readonly string[]): string {
  const raw = (env[name] ?? "").trim();
  if (raw === "") return "";
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new ConfigError(`${name} is not a URL`);
  }
  if (!protocols.includes(parsed.protocol)) throw new ConfigError(`${name} must start with ${protocols.map((p) => `${p}//`).join(" or ")}`);
  if (parsed.hostname === "") throw new ConfigError(`${name} names no host`);
  return raw;
}

/** A comma-separated list of http(s) origins (scheme://host[:port], nothing after), each written as URL.origin does. */
function origins(env: Env, name: string): string[] {
  const raw = (env[name] ?? "").trim();
  if (raw === "") return [];
  return raw.split(",").map((item) => {
    const text = item.trim();
    let parsed: URL;
    try {
      parsed = new URL(text);
    } catch {
      throw new ConfigError(`${name}: "${text}" is not a URL`);
    }
    if (
      (parsed.protocol !== "http:" && parsed.protocol !== "https:") ||
      parsed.username ||
      parsed.password ||
      parsed.search ||
      parsed.hash ||
      parsed.pathname !== "/"
    ) {
      throw new ConfigError(`${name}: "${text}" must be an origin, http(s)://host[:port], with no path or credentials`);
    }
    return parsed.origin;
  });
}

/** A comma-separated list of TCP ports; empty when unset. */
function ports(env: Env, name: string): number[] {
  const raw = (env[name] ?? "").trim();
  if (raw === "") return [];
  return raw.split(",").map((item) => {
    const text = item.trim();
    if (!/^\d{1,5}$/.test(text) || Number(text) < 1 || Number(text) > 65535)
      throw new ConfigError(`${name}: "${text}" is not a port (1 to 65535)`);
    return Number(text);
  });
}

/** A client id and its secret come together or not at all. */
function clientPair(env: Env, idName: string, secretName: string): [string, string] {
  const id = env[idName] || "";
  const secret = env[secretName] || "";
  if ((id === "") !== (secret === "")) throw new ConfigError(`${idName} and ${secretName} must be set together`);
  return [id, secret];
}

/** 32 bytes as 64 hex digits (0x optional) or base64; empty when unset. */
function aesKey(env: Env, name: string): string {
  const raw = (env[name] ?? "").trim();
  if (raw === "") return "";
  const hex = raw.replace(/^0x/i, "");
  if (/^[0-9a-fA-F]{64}$/.test(hex)) return raw;
  if (/^[A-Za-z0-9+/_-]+={0,2}$/.test(raw) && Buffer.from(raw, "base64").length === 32) return raw;
  throw new ConfigError(`${name} must be 32 bytes: 64 hex digits or base64`);
}

function privateKey(env: Env, name: string): string {
  const raw = env[name] ?? "";
  if (raw !== "" && !/^0x[0-9a-fA-F]{64}$/.test(raw)) throw new ConfigError(`${name} must be 0x followed by 64 hex digits`);
  return raw;
}

/** An IPv4 (dotted quad) or IPv6 address, optionally with a /prefix of a fitting length. */
function addressOrCidr(entry: string): boolean {
  const [address, prefix, ...rest] = entry.split("/");
  if (rest.length > 0) return false;
  const v4 = ipaddr.IPv4.isValidFourPartDecimal(address);
  if (!v4 && !ipaddr.IPv6.isValid(address)) return false;
  if (prefix === undefined) return true;
  return /^\d{1,3}$/.test(prefix) && Number(prefix) <= (v4 ? 32 : 128);
}

/** TRUST_PROXY: off, a hop count, or the proxies' addresses; never "true" (every hop). */
function trustProxy(env: Env, name: string): false | number | string[] {
  const raw = (env[name] ?? "").trim();
  if (raw === "" || raw === "false") return false;
  if (raw === "true") {
    throw new ConfigError(
      `${name}=true would believe any client's X-Forwarded-For, so anyone could pick their address and escape the rate limits; give the number of proxies in front of the gateway, or their addresses`,
    );
  }
  if (/^\d+$/.test(raw)) return int(env, name, 0, 0, 10) || false;
  const entries = raw.split(",").map((entry) => entry.trim());
  for (const entry of entries) {
    if (!["loopback", "linklocal", "uniquelocal"].includes(entry) && !addressOrCidr(entry)) {
      throw new ConfigError(
        `${name} must be false, a number of hops, or a comma-separated list of addresses, CIDRs, loopback, linklocal, uniquelocal; got "${entry}"`,
      );
    }
  }
  return entries;
}

/** PUBLIC_URL: empty (the gateway's own loopback address), or the http(s) URL people reach the dashboard at. */
function publicUrl(env: Env): string {
  const raw = (env.PUBLIC_URL ?? "").trim();
  if (raw === "") return "";
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new ConfigError(`PUBLIC_URL must be a URL, got "${raw}"`);
  }
  if (parsed.protocol !== "https:" && parsed.protocol !== "http:")
    throw new ConfigError(`PUBLIC_URL must be an https or http URL, got "${raw}"`);
  return raw;
}

/**
 * COOKIE_SECURE follows PUBLIC_URL: session cookies carry Secure (and the __Host- prefix) by default when the dashboard
 * is served over https. A setting that contradicts PUBLIC_URL is refused at start rather than half-working:
 * COOKIE_SECURE=false under an https PUBLIC_URL would let a session cookie travel over plain http, and
 * COOKIE_SECURE=true under an http PUBLIC_URL (other than this machine's) would have browsers drop every session
 * cookie, so that no one could stay signed in.
 */
function cookieSecure(env: Env, url: string): boolean {
  const parsed = url === "" ? undefined : new URL(url);
  const https = parsed?.protocol === "https:";
  const secure = oneOf(env, "COOKIE_SECURE", ["true", "false"] as const, https ? "true" : "false") === "true";
  if (https && !secure)
    throw new ConfigError("COOKIE_SECURE=false contradicts an https PUBLIC_URL: leave COOKIE_SECURE unset (it follows PUBLIC_URL)");
  const loopback = parsed !== undefined && /^(127\.\d+\.\d+\.\d+|localhost|.+\.localhost|\[::1\])$/.test(parsed.hostname);
  if (parsed?.protocol === "http:" && !loopback && secure)
    throw new ConfigError(
      "COOKIE_SECURE=true contradicts an http PUBLIC_URL: browsers would drop the session cookies; serve the dashboard over https",
    );
  return secure;
}

/** A bearer token for an operator's tool: 16 to 256 characters of the token68 alphabet, or empty. */
function bearerSecret(env: Env, name: string): string {
  const raw = (env[name] ?? "").trim();
  if (raw !== "" && !/^[A-Za-z0-9._~+/-]{16,256}$/.test(raw)) {
    throw new ConfigError(`${name} must be 16 to 256 characters of A-Z a-z 0-9 . _ ~ + / - (e.g. openssl rand -hex 32)`);
  }
  return raw;
}

/** REPLICA_ID, or host name and process id: letters, digits and . _ - only (it appears in logs and lock names). */
function replicaId(env: Env): string {
  const raw = (env.REPLICA_ID ?? "").trim();
  if (raw === "")
    return `${os
      .hostname()
      .replace(/[^A-Za-z0-9._-]/g, "-")
      .slice(0, 40)}-${process.pid}`;
  if (!/^[A-Za-z0-9._-]{1,64}$/.test(raw)) throw new ConfigError("REPLICA_ID must be 1 to 64 characters of A-Z a-z 0-9 . _ -");
  return raw;
}

/** Builds the configuration from an environment (process.env by default), throwing ConfigError on a bad value. */
export function loadConfig(env: Env = process.env, overrides: Partial<Config> = {}): Config {
  const github = clientPair(env, "GITHUB_CLIENT_ID", "GITHUB_CLIENT_SECRET");
  const google = clientPair(env, "GOOGLE_CLIENT_ID", "GOOGLE_CLIENT_SECRET");
  const config: Config = {
    host: env.HOST || "127.0.0.1",
    port: int(env, "PORT", 8787, 0, 65535),
    dbPath: env.DB_PATH || "data/gateway.db",
    databaseUrl: secretUrl(env, "DATABASE_URL", ["postgres:", "postgresql:"]),
    redisUrl: secretUrl(env, "REDIS_URL", ["redis:", "rediss:"]),
    replicaId: replicaId(env),
    leaderLeaseMs: int(env, "LEADER_LEASE_MS", 5_000, 200, 600_000),
    databasePingTimeoutMs: int(env, "DATABASE_PING_TIMEOUT_MS", 1_000, 100, 60_000),
    feeMode: oneOf(env, "FEE_MODE", ["included", "on_top"] as const, "included"),
    feeBps: BigInt(int(env, "FEE_BPS", 1000, 0, 10_000)),
    rateLimitPerMin: int(env, "RATE_LIMIT_PER_MIN", 100, 1, 10_000_000),
    dailyCallCap: int(env, "DAILY_CALL_CAP", 0, 0, 1_000_000_000),
    maxRequestBytes: int(env, "MAX_REQUEST_BYTES", 256 * 1024, 1024, 64 * 1024 * 1024),
    headersTimeoutMs: int(env, "HEADERS_TIMEOUT_MS", 10_000, 500, 300_000),
    requestTimeoutMs: int(env, "REQUEST_TIMEOUT_MS", 30_000, 500, 3_600_000),
    readyMaxLagMs: int(env, "READY_MAX_LAG_MS", 300_000, 1_000, 86_400_000),
    maxResponseBytes: int(env, "MAX_RESPONSE_BYTES", 1024 * 1024, 1024, 256 * 1024 * 1024),
    defaultSkillTimeoutMs: int(env, "SKILL_TIMEOUT_MS", 10_000, 10, 300_000),
    skillBackendAllowlist: origins(env, "SKILL_BACKEND_ALLOWLIST"),
    skillBackendPorts: ports(env, "SKILL_BACKEND_PORTS"),
    idempotencyTtlMs: int(env, "IDEMPOTENCY_TTL_HOURS", 24, 1, 24 * 30) * 3_600_000,
    keyCacheTtlMs: int(env, "KEY_CACHE_TTL_MS", 5_000, 0, 3_600_000),
    groupCommitMaxOps: int(env, "GROUP_COMMIT_MAX_OPS", 512, 1, 100_000),
    chainRpcUrl: env.CHAIN_RPC_URL || "",
    deploymentFile: env.DEPLOYMENT_FILE || "deployments/localhost.json",
    chainPort: int(env, "CHAIN_PORT", 8545, 0, 65535),
    // The embedded chain has no reorgs and mines only when asked; a real chain does reorg.
    depositConfirmations: int(env, "DEPOSIT_CONFIRMATIONS", env.CHAIN_RPC_URL ? 12 : 0, 0, 10_000),
    indexerIntervalMs: int(env, "INDEXER_INTERVAL_MS", 1_000, 50, 3_600_000),
    settleIntervalMs: int(env, "SETTLE_INTERVAL_MS", 10_000, 100, 86_400_000),
    settleMaxCalls: int(env, "SETTLE_MAX_CALLS", 1_000, 1, 100_000),
    settleTriggerCalls: int(env, "SETTLE_TRIGGER_CALLS", 1_000, 1, 100_000),
    settlerPrivateKey: privateKey(env, "SETTLER_PRIVATE_KEY"),
    voucherSignerPrivateKey: privateKey(env, "VOUCHER_SIGNER_PRIVATE_KEY"),
    // A cent: below it a voucher costs more gas to redeem than it pays; the escrow's $1.00 minimum deposit would
    // strand the change of ordinary use (a $5 top-up less its calls) behind the timed exit's delay. How many
    // vouchers an account holds and is issued is what the two limits after it bound.
    voucherMinMicros: usd(env, "VOUCHER_MIN_USD", "0.01"),
    vouchersOpenPerAccountMax: int(env, "VOUCHERS_OPEN_PER_ACCOUNT_MAX", 5, 1, 1_000),
    voucherRateLimitPerHour: int(env, "VOUCHER_RATE_LIMIT_PER_HOUR", 10, 1, 10_000),
    x402SettlerPrivateKey: privateKey(env, "X402_SETTLER_PRIVATE_KEY"),
    walletEncryptionKey: aesKey(env, "WALLET_ENCRYPTION_KEY"),
    publicUrl: publicUrl(env),
    secureCookies: cookieSecure(env, publicUrl(env)),
    emailLinkTtlMs: int(env, "EMAIL_LINK_TTL_MIN", 15, 1, 24 * 60) * 60_000,
    smtpUrl: env.SMTP_URL ? url(env, "SMTP_URL", "", ["smtp:", "smtps:"]) : "",
    mailFrom: env.MAIL_FROM || "Skill Gateway <no-reply@localhost>",
    githubClientId: github[0],
    githubClientSecret: github[1],
    githubAuthorizationUrl: url(env, "GITHUB_AUTHORIZATION_URL", "https://github.com/login/oauth/authorize"),
    githubTokenUrl: url(env, "GITHUB_TOKEN_URL", "https://github.com/login/oauth/access_token"),
    githubUserUrl: url(env, "GITHUB_USER_URL", "https://api.github.com/user"),
    githubScope: env.GITHUB_SCOPE || "read:user",
    googleClientId: google[0],
    googleClientSecret: google[1],
    googleIssuer: url(env, "GOOGLE_ISSUER", "https://accounts.google.com"),
    siweChainId: int(env, "SIWE_CHAIN_ID", 8453, 1, 2 ** 53 - 1),
    // The spec's "typically 0.001 to 0.50 USD"; an operator may allow more either way.
    minSkillPriceMicros: usd(env, "MIN_SKILL_PRICE_USD", "0.001"),
    maxSkillPriceMicros: usd(env, "MAX_SKILL_PRICE_USD", "0.50"),
    trustProxy: trustProxy(env, "TRUST_PROXY"),
    // A sign-in costs a person 2 or 3 of these (e-mail: start, preview, verify); 20 leaves room
    // for a few people behind one NAT, and holds one address to 20 mails a minute.
    signInRateLimitPerMin: int(env, "SIGN_IN_RATE_LIMIT_PER_MIN", 20, 1, 1_000_000),
    // A dashboard page load is about 5 requests (page, script, styles, two API reads).
    publicRateLimitPerMin: int(env, "PUBLIC_RATE_LIMIT_PER_MIN", 600, 1, 10_000_000),
    // The same as an address: a signed-in person or an agent is never worse off than an anonymous client,
    // and 10 a second is ample for the account routes (a dashboard page reads 2 or 3), which cost more
    // than a public read (usage, CSV, earnings on chain). Calls have their own GCRA (RATE_LIMIT_PER_MIN).
    credentialRateLimitPerMin: int(env, "CREDENTIAL_RATE_LIMIT_PER_MIN", 600, 1, 10_000_000),
    // An orchestrator probes each path every few seconds from each node; 20 a second per address leaves
    // room for many behind one address, and a probe costs little (/readyz's answer is kept for a second).
    healthRateLimitPerMin: int(env, "HEALTH_RATE_LIMIT_PER_MIN", 1_200, 1, 10_000_000),
    siweNoncesPerClientMax: int(env, "SIWE_NONCES_PER_CLIENT_MAX", 5, 1, 1_000),
    siweNoncesMax: int(env, "SIWE_NONCES_MAX", 10_000, 1, 10_000_000),
    emailLinksMax: int(env, "EMAIL_LINKS_MAX", 1_000, 1, 10_000_000),
    oauthStatesMax: int(env, "OAUTH_STATES_MAX", 10_000, 1, 10_000_000),
    pruneIntervalMs: int(env, "PRUNE_INTERVAL_SEC", 300, 1, 86_400) * 1_000,
    // Short-lived: a stolen access token is worth an hour; the client refreshes it without the person.
    mcpAccessTokenTtlMs: int(env, "MCP_ACCESS_TOKEN_TTL_SEC", 3_600, 1, 86_400) * 1_000,
    mcpRefreshTokenTtlMs: int(env, "MCP_REFRESH_TOKEN_TTL_SEC", 30 * 86_400, 60, 366 * 86_400) * 1_000,
    mcpOAuthClientsMax: int(env, "MCP_OAUTH_CLIENTS_MAX", 10_000, 1, 10_000_000),
    mcpOAuthRequestsMax: int(env, "MCP_OAUTH_REQUESTS_MAX", 10_000, 1, 10_000_000),
    // The production entry's settings (see loadServeConfig below).
    bundlerUrl: env.BUNDLER_URL ? url(env, "BUNDLER_URL", "", ["https:", "http:"]) : "",
    paymasterSignerPrivateKey: privateKey(env, "PAYMASTER_SIGNER_PRIVATE_KEY"),
    fundingPrivateKey: privateKey(env, "FUNDING_PRIVATE_KEY"),
    walletSweepIntervalMs: int(env, "WALLET_SWEEP_INTERVAL_MS", 10_000, 1_000, 3_600_000),
    logLevel: oneOf(env, "LOG_LEVEL", LOG_LEVELS, "info"),
    metricsToken: bearerSecret(env, "METRICS_TOKEN"),
  };
  if (config.headersTimeoutMs > config.requestTimeoutMs) throw new ConfigError("HEADERS_TIMEOUT_MS must not be above REQUEST_TIMEOUT_MS");
  if (config.minSkillPriceMicros > config.maxSkillPriceMicros) {
    throw new ConfigError("MIN_SKILL_PRICE_USD must not be above MAX_SKILL_PRICE_USD");
  }
  return { ...config, ...overrides };
}

/**
 * The names of the environment variables loadConfig reads, in the order it reads them: found by running it on an empty
 * environment that records every name asked of it, so the list is the declarations above and cannot drift from them.
 * It holds as long as each setting is read whatever the others say (test/config-env-names.test.ts checks every name written in
 * this file is in it). `npm run start:cluster` passes these through to its replicas (server/devstack/cluster-settings.ts).
 */
export function configEnvNames(): string[] {
  const names = new Set<string>();
  const recorder = new Proxy<Env>(
    {},
    {
      get(_target, name) {
        if (typeof name === "string") names.add(name);
        return undefined;
      },
    },
  );
  loadConfig(recorder);
  return [...names];
}

// ---------------------------------------------------------------------------------------------------------
// The production entry (`npm run serve`, server/main.ts)
// ---------------------------------------------------------------------------------------------------------

/**
 * Builds the configuration of the production entry: loadConfig's, plus what a gateway that starts no chain
 * of its own must be given. Throws ConfigError naming the first setting that is missing or malformed:
 *
 * - CHAIN_RPC_URL (an http(s) URL) and DEPLOYMENT_FILE (no default: the demo's file is not a production one);
 * - SETTLER_PRIVATE_KEY and VOUCHER_SIGNER_PRIVATE_KEY: a gateway that bills calls must settle them, and pay
 *   out withdrawals;
 * - embedded wallets are all or nothing: BUNDLER_URL, PAYMASTER_SIGNER_PRIVATE_KEY and WALLET_ENCRYPTION_KEY
 *   together (a random encryption key, as the demo uses, would lose every wallet at the next start).
 *
 * Whether the keys and the deployment match the chain is server/main.ts's check, once it can ask the chain.
 */
export function loadServeConfig(env: Env = process.env): Config {
  const config = loadConfig(env);
  const required = (name: string, value: string) => {
    if (value === "") throw new ConfigError(`${name} is required by npm run serve`);
  };
  required("CHAIN_RPC_URL", env.CHAIN_RPC_URL ?? "");
  const chainRpcUrl = url(env, "CHAIN_RPC_URL", "", ["https:", "http:"]);
  required("DEPLOYMENT_FILE", env.DEPLOYMENT_FILE ?? "");
  required("SETTLER_PRIVATE_KEY", config.settlerPrivateKey);
  required("VOUCHER_SIGNER_PRIVATE_KEY", config.voucherSignerPrivateKey);
  if (config.bundlerUrl !== "" || config.paymasterSignerPrivateKey !== "") {
    required("BUNDLER_URL", config.bundlerUrl);
    required("PAYMASTER_SIGNER_PRIVATE_KEY", config.paymasterSignerPrivateKey);
    if (config.walletEncryptionKey === "") {
      throw new ConfigError("WALLET_ENCRYPTION_KEY is required by npm run serve with embedded wallets (BUNDLER_URL)");
    }
  }
  return { ...config, chainRpcUrl };
}
