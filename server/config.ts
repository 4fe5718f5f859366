/**
 * Every setting of the gateway, read from the environment in one place, validated, with
 * defaults that make `npm start` work on a fresh machine. Nothing else reads process.env.
 */

import os from "node:os";
import ipaddr from "ipaddr.js";
import type { FeeMode } from "./ledger/fees";
import { LOG_LEVELS, type LogLevel } from "./ops/log";
import { usdToMicros } from "./ledger/money";

/**
 * Every setting, with what it does: each field's doc comment is the "what it does" column of
 * docs/configuration.md (`npm run docs:config` writes that table from this file: the variable, its default and
 * what it accepts come from loadConfig's readers below). Write it for an operator, about the variable.
 */
export interface Config {
  /** The address the gateway listens on. */
  host: string;
  /** The port the gateway listens on (0: any free port). */
  port: number;
  /** The SQLite ledger's file, when DATABASE_URL is empty. */
  dbPath: string;
  /**
   * postgres://... puts every table on PostgreSQL (several replicas may share it, see docs/scaling.md); empty keeps
   * the SQLite file at DB_PATH (one process). On the same host, a Unix socket: its folder in ?host=, which is read over
   * the URL's host (postgres://user@localhost:5432/database?host=/run/postgresql). The URL may hold a password: it is
   * never logged.
   */
  databaseUrl: string;
  /**
   * redis://... puts the per-key, per-skill and daily limits and cache invalidation on Redis, so they hold across
   * replicas; empty keeps them in this process's memory.
   */
  redisUrl: string;
  /** This replica's name in logs, metrics, pg_stat_activity and its holds' ownership. */
  replicaId: string;
  /** With DATABASE_URL: how long the settlement leader's lease lasts without renewal before another replica may take over. */
  leaderLeaseMs: number;
  /**
   * With DATABASE_URL: a ping of PostgreSQL unanswered this long makes the database unavailable (server/db/postgres/watch.ts):
   * the operations waiting on it, and every new one until it answers again, fail with 503 database_unavailable.
   */
  databasePingTimeoutMs: number;
  /**
   * `included` (spec variant B): the caller pays the listed price, the platform keeps its fee out of it. `on_top`
   * (variant A): the caller pays price + fee, the seller gets the price.
   */
  feeMode: FeeMode;
  /** The platform's fee, in basis points of a call's price (1000: 10%). */
  feeBps: bigint;
  /** Calls per minute per API key (a key may carry its own limit). */
  rateLimitPerMin: number;
  /** Calls per account per UTC day (an account may carry its own); 0 switches the cap off. */
  dailyCallCap: number;
  /** The largest request body, in bytes (413 above it). */
  maxRequestBytes: number;
  /** How long a client may take to send a request's headers (a slow client holds a socket; 408 after). */
  headersTimeoutMs: number;
  /** How long a client may take to send a whole request, headers and body (408 after). */
  requestTimeoutMs: number;
  /** GET /readyz fails once the deposit indexer or the settler has gone this long without a successful step. */
  readyMaxLagMs: number;
  /** The largest skill backend answer, in bytes (502 above it). */
  maxResponseBytes: number;
  /** The backend timeout a new skill starts with (each skill has its own). */
  defaultSkillTimeoutMs: number;
  /**
   * Origins of skill backends the gateway may call whatever their address (loopback, a private network): the
   * egress policy's exceptions, for the operator's own skills only (npm run register-skill; npm start adds its demo
   * backend). Every other backend, and every seller's listing, must be a public address.
   */
  skillBackendAllowlist: string[];
  /** Ports a skill backend may use, e.g. 443; empty allows any. */
  skillBackendPorts: number[];
  /** How long an Idempotency-Key is remembered (the variable is in hours). */
  idempotencyTtlMs: number;
  /** How long a verified API key is cached in memory. */
  keyCacheTtlMs: number;
  /** Most calls whose ledger writes share one durable SQLite commit. */
  groupCommitMaxOps: number;
  /**
   * On SQLite, who writes keyed calls' holds and charges: `thread`, a ledger writer thread with a connection of its own
   * (server/gateway/ledger-writer.ts), or `loop`, the event loop's connection, as every other write. A file only: an
   * in-memory database is always written on the loop.
   */
  sqliteLedgerWriter: "thread" | "loop";
  /** JSON-RPC of the chain holding the escrow (a Base fork, Base Sepolia); empty: npm start runs its own local chain. */
  chainRpcUrl: string;
  /**
   * The deployment file (contract addresses, chain id, deploy block; for embedded wallets also the ERC-4337
   * contracts), read with CHAIN_RPC_URL. npm run serve requires it.
   */
  deploymentFile: string;
  /** Port of the embedded local chain (0 for any free port). */
  chainPort: number;
  /** Blocks a deposit waits on top of it before it is credited: 0 on the embedded chain, 12 by default with CHAIN_RPC_URL. */
  depositConfirmations: number;
  /** How often the deposit indexer polls the chain. */
  indexerIntervalMs: number;
  /** How often the settler posts a batch of paid calls (sooner once SETTLE_TRIGGER_CALLS wait). */
  settleIntervalMs: number;
  /** Most calls in one settlement batch. */
  settleMaxCalls: number;
  /** A batch goes out early once this many calls wait. */
  settleTriggerCalls: number;
  /**
   * With CHAIN_RPC_URL: the key holding the escrow's SETTLER_ROLE; empty settles nothing (the embedded chain uses a
   * development account). npm run serve requires it. Never logged.
   */
  settlerPrivateKey: string;
  /** With CHAIN_RPC_URL: the key holding VOUCHER_SIGNER_ROLE; empty issues no vouchers. npm run serve requires it. Never logged. */
  voucherSignerPrivateKey: string;
  /** The least a withdrawal voucher may be for (400 amount_below_minimum below it): dust costs more to redeem than it pays out. */
  voucherMinMicros: bigint;
  /** Unredeemed, unexpired withdrawal vouchers one account may hold at once (429 rate_limited beyond). */
  vouchersOpenPerAccountMax: number;
  /** Withdrawal vouchers one account may be issued in any hour, a sliding window (429 rate_limited beyond). */
  voucherRateLimitPerHour: number;
  /**
   * With CHAIN_RPC_URL: a key holding SETTLER_ROLE that settles this replica's x402 payments (one per replica, not the
   * batch settler's); empty: the x402 endpoints answer 503 (docs/x402.md). Never logged.
   */
  x402SettlerPrivateKey: string;
  /**
   * AES-256-GCM key that encrypts the owner keys of embedded wallets the server holds (e-mail and OAuth accounts).
   * Empty: such wallets cannot be created or used (npm start makes a random one; npm run serve requires it with
   * BUNDLER_URL, for a lost key is lost wallets). Never logged.
   */
  walletEncryptionKey: string;
  /** The dashboard's public origin (scheme, host, port): SIWE's domain and URI, and where sign-in links point; empty: the gateway's own address. */
  publicUrl: string;
  /**
   * Session cookies carry Secure and the __Host- prefix. It follows PUBLIC_URL (on when that is https); a value that
   * contradicts it is refused at start.
   */
  secureCookies: boolean;
  /** How long an e-mail sign-in link works, in minutes. */
  emailLinkTtlMs: number;
  /** smtp:// or smtps:// URL of the mail server; empty writes mail to the `outbox` table instead. Never logged. */
  smtpUrl: string;
  /** The From of the gateway's e-mail. */
  mailFrom: string;
  /** The GitHub OAuth app's client id; sign-in with GitHub is off while it is empty. */
  githubClientId: string;
  /** The GitHub OAuth app's secret. Never logged. */
  githubClientSecret: string;
  /** GitHub's authorization endpoint (another only for a test provider). */
  githubAuthorizationUrl: string;
  /** GitHub's token endpoint. */
  githubTokenUrl: string;
  /** GitHub's GET /user (the API), which names the token's account. */
  githubUserUrl: string;
  /** The scope asked of GitHub. */
  githubScope: string;
  /** The Google OAuth client's id; sign-in with Google is off while it is empty. */
  googleClientId: string;
  /** The Google OAuth client's secret. Never logged. */
  googleClientSecret: string;
  /** OpenID Connect issuer, discovered through /.well-known/openid-configuration. */
  googleIssuer: string;
  /** The chain id a SIWE message must name (Base mainnet unless configured). */
  siweChainId: number;
  /** The cheapest per-call price a seller may list a skill at. */
  minSkillPriceMicros: bigint;
  /** The dearest per-call price a seller may list a skill at. */
  maxSkillPriceMicros: bigint;
  /**
   * Which proxies in front of the gateway to believe about the client's address (X-Forwarded-For), as Express's
   * `trust proxy`: false (none: the socket's peer is the client), a number of hops, or addresses/CIDRs and the names
   * loopback, linklocal, uniquelocal; true is refused. Every per-address limit keys on the address this yields.
   */
  trustProxy: false | number | string[];
  /** Requests per minute per client address to the sign-in endpoints (e-mail, SIWE, GitHub, Google). */
  signInRateLimitPerMin: number;
  /** Requests per minute per client address to every other endpoint, but those counted per credential or as health checks (calls with a bad key included). */
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
  /** How often expired nonces, links, OAuth states and sessions are deleted, in seconds. */
  pruneIntervalMs: number;
  /** How long an OAuth access token of the hosted MCP server is good for, in seconds (docs/mcp.md). */
  mcpAccessTokenTtlMs: number;
  /** How long an OAuth refresh token of the hosted MCP server is good for, in seconds (each use rotates it; never past its grant's expiry). */
  mcpRefreshTokenTtlMs: number;
  /** OAuth clients registered with the hosted MCP server, in all (anyone may register one); beyond it, 400 too_many_requests. */
  mcpOAuthClientsMax: number;
  /** OAuth authorization requests waiting for a person's consent, in all; beyond it, a new one is refused. */
  mcpOAuthRequestsMax: number;

  // The production entry's settings (`npm run serve`, server/main.ts); loadServeConfig says which it requires.
  /** npm run serve: JSON-RPC of the ERC-4337 bundler (EntryPoint v0.7) embedded wallets' operations go to; empty: no embedded wallets. */
  bundlerUrl: string;
  /**
   * npm run serve, with BUNDLER_URL: the key GatewayPaymaster trusts (its verifyingSigner), which approves each
   * sponsored operation (npm start makes a random one). Never logged.
   */
  paymasterSignerPrivateKey: string;
  /**
   * npm run serve: the TestUSDC owner's key (the deployment's deployer), which funds sandbox card top-ups by minting;
   * test tokens only; empty: card top-ups off (npm start uses the deployer). Never logged.
   */
  fundingPrivateKey: string;
  /** npm run serve: how often embedded wallets are checked for USDC to sweep into the escrow (npm start: every 3 s). */
  walletSweepIntervalMs: number;
  /** The least severe log lines written: fatal, error, warn, info, debug, trace or silent (docs/observability.md). */
  logLevel: LogLevel;
  /** The bearer token GET /metrics asks of a scraper; empty: /metrics is not served (docs/observability.md). Never logged. */
  metricsToken: string;
}

export class ConfigError extends Error {
  override name = "ConfigError";
}

type Env = Record<string, string | undefined>;

/** What a reader says of the variable it reads: its default, as written in the environment, and what it accepts. */
export interface SettingDeclaration {
  name: string;
  /** The default as an operator would write it ("" when the setting is empty unless set). */
  fallback: string;
  /** The default in words, when it is not one value (it follows another setting, or the machine). */
  fallbackNote?: string;
  /** What a value must be, in a few words. */
  accepts: string;
}

/** While configSettings runs, each reader adds its declaration here; undefined otherwise (an ordinary load). */
let declarations: SettingDeclaration[] | undefined;

function declare(name: string, fallback: string, accepts: string, fallbackNote?: string): void {
  declarations?.push({ name, fallback, accepts, ...(fallbackNote === undefined ? {} : { fallbackNote }) });
}

/** 10000000 as 10,000,000: bounds an operator reads at a glance. */
function grouped(value: number): string {
  return value.toLocaleString("en-US");
}

/** Free text, or its default when unset or empty. */
function text(env: Env, name: string, fallback: string): string {
  declare(name, fallback, "text");
  return env[name] || fallback;
}

function int(env: Env, name: string, fallback: number, min: number, max: number): number {
  declare(name, String(fallback), `an integer from ${grouped(min)} to ${grouped(max)}`);
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  if (!/^-?\d+$/.test(raw.trim())) throw new ConfigError(`${name} must be an integer, got "${raw}"`);
  const value = Number(raw);
  if (value < min || value > max) throw new ConfigError(`${name} must be between ${min} and ${max}, got ${value}`);
  return value;
}

function oneOf<T extends string>(env: Env, name: string, allowed: readonly T[], fallback: T): T {
  declare(name, fallback, allowed.map((value) => `\`${value}\``).join(", "));
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  if (!(allowed as readonly string[]).includes(raw)) {
    throw new ConfigError(`${name} must be one of ${allowed.join(", ")}, got "${raw}"`);
  }
  return raw as T;
}

function usd(env: Env, name: string, fallback: string): bigint {
  declare(name, fallback, "USD, at most 6 decimals");
  const raw = env[name];
  const value = raw === undefined || raw === "" ? fallback : raw;
  if (!/^\d+(\.\d{1,6})?$/.test(value.trim()))
    throw new ConfigError(`${name} must be a USD amount with at most 6 decimals, got "${value}"`);
  return usdToMicros(value);
}

/** An https URL, or http for a server on this machine (a local provider, in development and tests). */
function url(env: Env, name: string, fallback: string, protocols: readonly string[] = ["https:"]): string {
  declare(name, fallback, urlRule(protocols));
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

function urlRule(protocols: readonly string[]): string {
  const schemes = protocols.map((p) => `${p}//`).join(" or ");
  return protocols.includes("http:") ? `${schemes} URL` : `${schemes} URL (http:// on this machine)`;
}

/** An optional URL (url's rules), empty when unset. */
function optionalUrl(env: Env, name: string, protocols: readonly string[]): string {
  declare(name, "", urlRule(protocols));
  const raw = env[name] ?? "";
  if (raw === "") return "";
  const saved = declarations;
  declarations = undefined;
  try {
    return url(env, name, "", protocols);
  } finally {
    declarations = saved;
  }
}

/**
 * A URL that may carry a password (DATABASE_URL, REDIS_URL), or empty when unset. Its errors never repeat
 * the value: a configuration error is printed, and the password with it would be.
 */
/** How a DATABASE_URL names a Unix socket (libpq's form, which node-postgres reads: its folder in ?host=, over the host). */
export const DATABASE_URL_SOCKET_FORM = "postgres://user@localhost:5432/database?host=/path/of/the/socket/folder";

function secretUrl(env: Env, name: string, protocols: readonly string[]): string {
  declare(name, "", `${protocols.map((p) => `${p}//`).join(" or ")} URL`);
  const raw = (env[name] ?? "").trim();
  if (raw === "") return "";
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new ConfigError(`${name} is not a URL`);
  }
  if (!protocols.includes(parsed.protocol)) throw new ConfigError(`${name} must start with ${protocols.map((p) => `${p}//`).join(" or ")}`);
  if (parsed.hostname === "") {
    const socket = name === "DATABASE_URL" ? ` (a Unix socket: ${DATABASE_URL_SOCKET_FORM})` : "";
    throw new ConfigError(`${name} names no host${socket}`);
  }
  return raw;
}

/** A comma-separated list of http(s) origins (scheme://host[:port], nothing after), each written as URL.origin does. */
function origins(env: Env, name: string): string[] {
  declare(name, "", "comma-separated origins, http(s)://host[:port]");
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
  declare(name, "", "comma-separated ports, 1 to 65535");
  const raw = (env[name] ?? "").trim();
  if (raw === "") return [];
  return raw.split(",").map((item) => {
    const text = item.trim();
    if (!/^\d{1,5}$/.test(text) || Number(text) < 1 || Number(text) > 65535)
      throw new ConfigError(`${name}: "${text}" is not a port (1 to 65535)`);
    return Number(text);
  });
}

/** One of a client id and its secret, which come together or not at all. */
function paired(env: Env, name: string, partner: string): string {
  declare(name, "", `text, set together with ${partner}`);
  const value = env[name] || "";
  if ((value === "") !== ((env[partner] || "") === "")) {
    const [first, second] = [name, partner].sort();
    throw new ConfigError(`${first} and ${second} must be set together`);
  }
  return value;
}

/** 32 bytes as 64 hex digits (0x optional) or base64; empty when unset. */
function aesKey(env: Env, name: string): string {
  declare(name, "", "32 bytes: 64 hex digits or base64");
  const raw = (env[name] ?? "").trim();
  if (raw === "") return "";
  const hex = raw.replace(/^0x/i, "");
  if (/^[0-9a-fA-F]{64}$/.test(hex)) return raw;
  if (/^[A-Za-z0-9+/_-]+={0,2}$/.test(raw) && Buffer.from(raw, "base64").length === 32) return raw;
  throw new ConfigError(`${name} must be 32 bytes: 64 hex digits or base64`);
}

function privateKey(env: Env, name: string): string {
  declare(name, "", "0x and 64 hex digits");
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
  declare(name, "false", "`false`, hops 1 to 10, or comma-separated addresses, CIDRs, `loopback`, `linklocal`, `uniquelocal`");
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
function publicUrl(env: Env, name: string): string {
  declare(name, "", "https:// or http:// URL", "the gateway's own address");
  const raw = (env[name] ?? "").trim();
  if (raw === "") return "";
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new ConfigError(`${name} must be a URL, got "${raw}"`);
  }
  if (parsed.protocol !== "https:" && parsed.protocol !== "http:")
    throw new ConfigError(`${name} must be an https or http URL, got "${raw}"`);
  return raw;
}

/**
 * COOKIE_SECURE follows PUBLIC_URL: session cookies carry Secure (and the __Host- prefix) by default when the dashboard
 * is served over https. A setting that contradicts PUBLIC_URL is refused at start rather than half-working:
 * COOKIE_SECURE=false under an https PUBLIC_URL would let a session cookie travel over plain http, and
 * COOKIE_SECURE=true under an http PUBLIC_URL (other than this machine's) would have browsers drop every session
 * cookie, so that no one could stay signed in.
 */
function cookieSecure(env: Env, name: string, url: string): boolean {
  const parsed = url === "" ? undefined : new URL(url);
  const https = parsed?.protocol === "https:";
  declare(name, "false", "`true`, `false`", "`true` under an https PUBLIC_URL, else `false`");
  const saved = declarations;
  declarations = undefined;
  const secure = oneOf(env, name, ["true", "false"] as const, https ? "true" : "false") === "true";
  declarations = saved;
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
  declare(name, "", "16 to 256 characters of `A-Z a-z 0-9 . _ ~ + / -`");
  const raw = (env[name] ?? "").trim();
  if (raw !== "" && !/^[A-Za-z0-9._~+/-]{16,256}$/.test(raw)) {
    throw new ConfigError(`${name} must be 16 to 256 characters of A-Z a-z 0-9 . _ ~ + / - (e.g. openssl rand -hex 32)`);
  }
  return raw;
}

/** REPLICA_ID, or host name and process id: letters, digits and . _ - only (it appears in logs and lock names). */
function replicaId(env: Env, name: string): string {
  declare(name, "", "1 to 64 characters of `A-Z a-z 0-9 . _ -`", "the host name and process id");
  const raw = (env[name] ?? "").trim();
  if (raw === "")
    return `${os
      .hostname()
      .replace(/[^A-Za-z0-9._-]/g, "-")
      .slice(0, 40)}-${process.pid}`;
  if (!/^[A-Za-z0-9._-]{1,64}$/.test(raw)) throw new ConfigError(`${name} must be 1 to 64 characters of A-Z a-z 0-9 . _ -`);
  return raw;
}

/** Builds the configuration from an environment (process.env by default), throwing ConfigError on a bad value. */
export function loadConfig(env: Env = process.env, overrides: Partial<Config> = {}): Config {
  const config: Config = {
    host: text(env, "HOST", "127.0.0.1"),
    port: int(env, "PORT", 8787, 0, 65535),
    dbPath: text(env, "DB_PATH", "data/gateway.db"),
    databaseUrl: secretUrl(env, "DATABASE_URL", ["postgres:", "postgresql:"]),
    redisUrl: secretUrl(env, "REDIS_URL", ["redis:", "rediss:"]),
    replicaId: replicaId(env, "REPLICA_ID"),
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
    sqliteLedgerWriter: oneOf(env, "SQLITE_LEDGER_WRITER", ["thread", "loop"] as const, "thread"),
    chainRpcUrl: text(env, "CHAIN_RPC_URL", ""),
    deploymentFile: text(env, "DEPLOYMENT_FILE", "deployments/localhost.json"),
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
    publicUrl: publicUrl(env, "PUBLIC_URL"),
    secureCookies: cookieSecure(env, "COOKIE_SECURE", (env.PUBLIC_URL ?? "").trim()),
    emailLinkTtlMs: int(env, "EMAIL_LINK_TTL_MIN", 15, 1, 24 * 60) * 60_000,
    smtpUrl: optionalUrl(env, "SMTP_URL", ["smtp:", "smtps:"]),
    mailFrom: text(env, "MAIL_FROM", "Skill Gateway <no-reply@localhost>"),
    githubClientId: paired(env, "GITHUB_CLIENT_ID", "GITHUB_CLIENT_SECRET"),
    githubClientSecret: paired(env, "GITHUB_CLIENT_SECRET", "GITHUB_CLIENT_ID"),
    githubAuthorizationUrl: url(env, "GITHUB_AUTHORIZATION_URL", "https://github.com/login/oauth/authorize"),
    githubTokenUrl: url(env, "GITHUB_TOKEN_URL", "https://github.com/login/oauth/access_token"),
    githubUserUrl: url(env, "GITHUB_USER_URL", "https://api.github.com/user"),
    githubScope: text(env, "GITHUB_SCOPE", "read:user"),
    googleClientId: paired(env, "GOOGLE_CLIENT_ID", "GOOGLE_CLIENT_SECRET"),
    googleClientSecret: paired(env, "GOOGLE_CLIENT_SECRET", "GOOGLE_CLIENT_ID"),
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
    bundlerUrl: optionalUrl(env, "BUNDLER_URL", ["https:", "http:"]),
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
 * Every variable loadConfig reads, in the order it reads them, with its default and what it accepts, as its reader
 * declares them: docs/configuration.md's table is written from these and the Config fields' doc comments
 * (scripts/config-table.ts).
 */
export function configSettings(): SettingDeclaration[] {
  declarations = [];
  try {
    loadConfig({});
    return declarations;
  } finally {
    declarations = undefined;
  }
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
