import os from "node:os";
import { expect } from "chai";
import { ConfigError, loadConfig, type Config } from "../server/config";

/** Without REPLICA_ID a replica is named after its host (what REPLICA_ID allows of it, 40 characters at most) and process id. */
const DEFAULT_REPLICA_ID = `${os
  .hostname()
  .replace(/[^A-Za-z0-9._-]/g, "-")
  .slice(0, 40)}-${process.pid}`;

const DEFAULTS: Config = {
  host: "127.0.0.1",
  port: 8787,
  dbPath: "data/gateway.db",
  databaseUrl: "",
  redisUrl: "",
  replicaId: DEFAULT_REPLICA_ID,
  leaderLeaseMs: 5_000,
  databasePingTimeoutMs: 1_000,
  feeMode: "included",
  feeBps: 1000n,
  rateLimitPerMin: 100,
  dailyCallCap: 0,
  maxRequestBytes: 256 * 1024,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  readyMaxLagMs: 300_000,
  maxResponseBytes: 1024 * 1024,
  defaultSkillTimeoutMs: 10_000,
  skillBackendAllowlist: [],
  skillBackendPorts: [],
  idempotencyTtlMs: 24 * 3_600_000,
  keyCacheTtlMs: 5_000,
  groupCommitMaxOps: 512,
  sqliteLedgerWriter: "thread",
  chainRpcUrl: "",
  deploymentFile: "deployments/localhost.json",
  chainPort: 8545,
  depositConfirmations: 0,
  indexerIntervalMs: 1_000,
  settleIntervalMs: 10_000,
  settleMaxCalls: 1_000,
  settleTriggerCalls: 1_000,
  settlerPrivateKey: "",
  voucherSignerPrivateKey: "",
  voucherMinMicros: 10_000n,
  vouchersOpenPerAccountMax: 5,
  voucherRateLimitPerHour: 10,
  x402SettlerPrivateKey: "",
  walletEncryptionKey: "",
  publicUrl: "",
  secureCookies: false,
  emailLinkTtlMs: 15 * 60_000,
  smtpUrl: "",
  mailFrom: "Skill Gateway <no-reply@localhost>",
  githubClientId: "",
  githubClientSecret: "",
  githubAuthorizationUrl: "https://github.com/login/oauth/authorize",
  githubTokenUrl: "https://github.com/login/oauth/access_token",
  githubUserUrl: "https://api.github.com/user",
  githubScope: "read:user",
  googleClientId: "",
  googleClientSecret: "",
  googleIssuer: "https://accounts.google.com",
  siweChainId: 8453,
  minSkillPriceMicros: 1_000n,
  maxSkillPriceMicros: 500_000n,
  trustProxy: false,
  signInRateLimitPerMin: 20,
  publicRateLimitPerMin: 600,
  credentialRateLimitPerMin: 600,
  healthRateLimitPerMin: 1_200,
  siweNoncesPerClientMax: 5,
  siweNoncesMax: 10_000,
  emailLinksMax: 1_000,
  oauthStatesMax: 10_000,
  pruneIntervalMs: 300_000,
  mcpAccessTokenTtlMs: 3_600_000,
  mcpRefreshTokenTtlMs: 2_592_000_000,
  mcpOAuthClientsMax: 10_000,
  mcpOAuthRequestsMax: 10_000,
  // The production entry's settings.
  bundlerUrl: "",
  paymasterSignerPrivateKey: "",
  fundingPrivateKey: "",
  walletSweepIntervalMs: 10_000,
  logLevel: "info",
  metricsToken: "",
};

describe("loadConfig", () => {
  it("gives the defaults for an empty environment: the spec's 10% fee and 100 calls per minute", () => {
    expect(loadConfig({})).to.deep.equal(DEFAULTS);
  });

  it("waits 12 confirmations for a deposit on a real chain unless told otherwise, none on the embedded one", () => {
    expect(loadConfig({ CHAIN_RPC_URL: "https://base.example/rpc" }).depositConfirmations).to.equal(12);
    expect(loadConfig({ CHAIN_RPC_URL: "https://base.example/rpc", DEPOSIT_CONFIRMATIONS: "3" }).depositConfirmations).to.equal(3);
    expect(loadConfig({}).depositConfirmations).to.equal(0);
  });

  it("treats empty values as unset", () => {
    expect(loadConfig({ PORT: "", FEE_MODE: "", HOST: "", DB_PATH: "" })).to.deep.equal(DEFAULTS);
    expect(loadConfig({ DATABASE_URL: "", REDIS_URL: " ", REPLICA_ID: "", LEADER_LEASE_MS: "" })).to.deep.equal(DEFAULTS);
  });

  it("reads every setting from the environment it is given", () => {
    const config = loadConfig({
      HOST: "0.0.0.0",
      PORT: "9000",
      DB_PATH: "/var/lib/gateway.db",
      DATABASE_URL: "postgres://gateway:pg-secret@db.internal:5432/gateway",
      REDIS_URL: "rediss://:redis-secret@cache.internal:6380/2",
      REPLICA_ID: "gw-eu.1_a",
      LEADER_LEASE_MS: "8000",
      DATABASE_PING_TIMEOUT_MS: "2500",
      FEE_MODE: "on_top",
      FEE_BPS: "250",
      RATE_LIMIT_PER_MIN: "600",
      DAILY_CALL_CAP: "5000",
      MAX_REQUEST_BYTES: "2048",
      HEADERS_TIMEOUT_MS: "5000",
      REQUEST_TIMEOUT_MS: "20000",
      READY_MAX_LAG_MS: "60000",
      MAX_RESPONSE_BYTES: "4096",
      SKILL_TIMEOUT_MS: "1500",
      SKILL_BACKEND_ALLOWLIST: "http://127.0.0.1:9100, https://skills.internal.example:8443/",
      SKILL_BACKEND_PORTS: "80,443, 8443",
      IDEMPOTENCY_TTL_HOURS: "48",
      KEY_CACHE_TTL_MS: "0",
      GROUP_COMMIT_MAX_OPS: "64",
      SQLITE_LEDGER_WRITER: "loop",
      CHAIN_RPC_URL: "https://base.example/rpc",
      DEPLOYMENT_FILE: "deployments/base.json",
      CHAIN_PORT: "0",
      DEPOSIT_CONFIRMATIONS: "12",
      INDEXER_INTERVAL_MS: "2000",
      SETTLE_INTERVAL_MS: "5000",
      SETTLE_MAX_CALLS: "500",
      SETTLE_TRIGGER_CALLS: "200",
      SETTLER_PRIVATE_KEY: `0x${"11".repeat(32)}`,
      VOUCHER_SIGNER_PRIVATE_KEY: `0x${"22".repeat(32)}`,
      VOUCHER_MIN_USD: "0.5",
      VOUCHERS_OPEN_PER_ACCOUNT_MAX: "3",
      VOUCHER_RATE_LIMIT_PER_HOUR: "30",
      X402_SETTLER_PRIVATE_KEY: `0x${"33".repeat(32)}`,
      WALLET_ENCRYPTION_KEY: "33".repeat(32),
      PUBLIC_URL: "https://gateway.example",
      COOKIE_SECURE: "true",
      EMAIL_LINK_TTL_MIN: "5",
      SMTP_URL: "smtps://user:pass@mail.example:465",
      MAIL_FROM: "Gateway <hello@gateway.example>",
      GITHUB_CLIENT_ID: "gh-id",
      GITHUB_CLIENT_SECRET: "gh-secret",
      GITHUB_AUTHORIZATION_URL: "https://ghe.example/login/oauth/authorize",
      GITHUB_TOKEN_URL: "https://ghe.example/login/oauth/access_token",
      GITHUB_USER_URL: "https://ghe.example/api/v3/user",
      GITHUB_SCOPE: "read:user user:email",
      GOOGLE_CLIENT_ID: "g-id",
      GOOGLE_CLIENT_SECRET: "g-secret",
      GOOGLE_ISSUER: "http://127.0.0.1:9000",
      SIWE_CHAIN_ID: "84532",
      MIN_SKILL_PRICE_USD: "0.0001",
      MAX_SKILL_PRICE_USD: "5",
      TRUST_PROXY: "1",
      SIGN_IN_RATE_LIMIT_PER_MIN: "5",
      PUBLIC_RATE_LIMIT_PER_MIN: "100",
      CREDENTIAL_RATE_LIMIT_PER_MIN: "300",
      HEALTH_RATE_LIMIT_PER_MIN: "60",
      SIWE_NONCES_PER_CLIENT_MAX: "3",
      SIWE_NONCES_MAX: "50",
      EMAIL_LINKS_MAX: "40",
      OAUTH_STATES_MAX: "30",
      PRUNE_INTERVAL_SEC: "60",
      MCP_ACCESS_TOKEN_TTL_SEC: "600",
      MCP_REFRESH_TOKEN_TTL_SEC: "86400",
      MCP_OAUTH_CLIENTS_MAX: "500",
      MCP_OAUTH_REQUESTS_MAX: "200",
      // The production entry's settings.
      BUNDLER_URL: "https://bundler.example/rpc",
      PAYMASTER_SIGNER_PRIVATE_KEY: `0x${"44".repeat(32)}`,
      FUNDING_PRIVATE_KEY: `0x${"55".repeat(32)}`,
      WALLET_SWEEP_INTERVAL_MS: "30000",
      LOG_LEVEL: "warn",
      METRICS_TOKEN: "scrape-0123456789abcdef",
    });
    expect(config).to.deep.equal({
      host: "0.0.0.0",
      port: 9000,
      dbPath: "/var/lib/gateway.db",
      databaseUrl: "postgres://gateway:pg-secret@db.internal:5432/gateway",
      redisUrl: "rediss://:redis-secret@cache.internal:6380/2",
      replicaId: "gw-eu.1_a",
      leaderLeaseMs: 8000,
      databasePingTimeoutMs: 2500,
      feeMode: "on_top",
      feeBps: 250n,
      rateLimitPerMin: 600,
      dailyCallCap: 5000,
      maxRequestBytes: 2048,
      headersTimeoutMs: 5000,
      requestTimeoutMs: 20000,
      readyMaxLagMs: 60000,
      maxResponseBytes: 4096,
      defaultSkillTimeoutMs: 1500,
      skillBackendAllowlist: ["http://127.0.0.1:9100", "https://skills.internal.example:8443"],
      skillBackendPorts: [80, 443, 8443],
      idempotencyTtlMs: 48 * 3_600_000,
      keyCacheTtlMs: 0,
      groupCommitMaxOps: 64,
      sqliteLedgerWriter: "loop",
      chainRpcUrl: "https://base.example/rpc",
      deploymentFile: "deployments/base.json",
      chainPort: 0,
      depositConfirmations: 12,
      indexerIntervalMs: 2000,
      settleIntervalMs: 5000,
      settleMaxCalls: 500,
      settleTriggerCalls: 200,
      settlerPrivateKey: `0x${"11".repeat(32)}`,
      voucherSignerPrivateKey: `0x${"22".repeat(32)}`,
      voucherMinMicros: 500_000n,
      vouchersOpenPerAccountMax: 3,
      voucherRateLimitPerHour: 30,
      x402SettlerPrivateKey: `0x${"33".repeat(32)}`,
      walletEncryptionKey: "33".repeat(32),
      publicUrl: "https://gateway.example",
      secureCookies: true,
      emailLinkTtlMs: 5 * 60_000,
      smtpUrl: "smtps://user:pass@mail.example:465",
      mailFrom: "Gateway <hello@gateway.example>",
      githubClientId: "gh-id",
      githubClientSecret: "gh-secret",
      githubAuthorizationUrl: "https://ghe.example/login/oauth/authorize",
      githubTokenUrl: "https://ghe.example/login/oauth/access_token",
      githubUserUrl: "https://ghe.example/api/v3/user",
      githubScope: "read:user user:email",
      googleClientId: "g-id",
      googleClientSecret: "g-secret",
      googleIssuer: "http://127.0.0.1:9000",
      siweChainId: 84532,
      minSkillPriceMicros: 100n,
      maxSkillPriceMicros: 5_000_000n,
      trustProxy: 1,
      signInRateLimitPerMin: 5,
      publicRateLimitPerMin: 100,
      credentialRateLimitPerMin: 300,
      healthRateLimitPerMin: 60,
      siweNoncesPerClientMax: 3,
      siweNoncesMax: 50,
      emailLinksMax: 40,
      oauthStatesMax: 30,
      pruneIntervalMs: 60_000,
      mcpAccessTokenTtlMs: 600_000,
      mcpRefreshTokenTtlMs: 86_400_000,
      mcpOAuthClientsMax: 500,
      mcpOAuthRequestsMax: 200,
      // The production entry's settings.
      bundlerUrl: "https://bundler.example/rpc",
      paymasterSignerPrivateKey: `0x${"44".repeat(32)}`,
      fundingPrivateKey: `0x${"55".repeat(32)}`,
      walletSweepIntervalMs: 30_000,
      logLevel: "warn",
      metricsToken: "scrape-0123456789abcdef",
    });
  });

  /** TRUST_PROXY values and what Express's `trust proxy` gets for each. */
  const TRUST_PROXY: Array<[string, false | number | string[]]> = [
    ["false", false],
    ["0", false],
    ["2", 2],
    ["loopback", ["loopback"]],
    ["10.0.0.0/8, fd00::/8, 192.0.2.7, uniquelocal", ["10.0.0.0/8", "fd00::/8", "192.0.2.7", "uniquelocal"]],
  ];
  for (const [raw, value] of TRUST_PROXY) {
    it(`reads TRUST_PROXY=${raw}`, () => {
      expect(loadConfig({ TRUST_PROXY: raw }).trustProxy).to.deep.equal(value);
    });
  }

  const COOKIES: [string, Record<string, string>, boolean][] = [
    ["an https PUBLIC_URL makes them Secure without COOKIE_SECURE", { PUBLIC_URL: "https://gateway.example" }, true],
    ["an https PUBLIC_URL with COOKIE_SECURE=true", { PUBLIC_URL: "https://gateway.example", COOKIE_SECURE: "true" }, true],
    ["no PUBLIC_URL leaves them as COOKIE_SECURE says", { COOKIE_SECURE: "true" }, true],
    ["a loopback http PUBLIC_URL may have them Secure", { PUBLIC_URL: "http://localhost:8787", COOKIE_SECURE: "true" }, true],
    ["a plain-http PUBLIC_URL leaves them plain", { PUBLIC_URL: "http://gateway.example" }, false],
    ["neither leaves them plain", {}, false],
  ];
  for (const [what, env, secure] of COOKIES) {
    it(`reads whether session cookies are Secure from PUBLIC_URL and COOKIE_SECURE: ${what}`, () => {
      expect(loadConfig(env).secureCookies).to.equal(secure);
    });
  }

  it("accepts the ends of each range", () => {
    expect(loadConfig({ PORT: "0", FEE_BPS: "0", RATE_LIMIT_PER_MIN: "1" })).to.include({ port: 0, feeBps: 0n, rateLimitPerMin: 1 });
    expect(loadConfig({ PORT: "65535", FEE_BPS: "10000" })).to.include({ port: 65535, feeBps: 10_000n });
  });

  it("tolerates whitespace around a number", () => {
    expect(loadConfig({ PORT: " 9000 " }).port).to.equal(9000);
  });

  it("lets explicit overrides win over the environment", () => {
    expect(loadConfig({ PORT: "9000" }, { port: 0, dbPath: ":memory:" })).to.include({ port: 0, dbPath: ":memory:" });
  });

  it("reads process.env when given no environment", () => {
    const saved = process.env.RATE_LIMIT_PER_MIN;
    process.env.RATE_LIMIT_PER_MIN = "321";
    try {
      expect(loadConfig().rateLimitPerMin).to.equal(321);
    } finally {
      if (saved === undefined) delete process.env.RATE_LIMIT_PER_MIN;
      else process.env.RATE_LIMIT_PER_MIN = saved;
    }
  });

  const bad: [string, Record<string, string>, string][] = [
    ["a word for a number", { PORT: "eighty" }, 'PORT must be an integer, got "eighty"'],
    ["a fraction", { RATE_LIMIT_PER_MIN: "1.5" }, "RATE_LIMIT_PER_MIN must be an integer"],
    ["an exponent", { SKILL_TIMEOUT_MS: "1e4" }, "SKILL_TIMEOUT_MS must be an integer"],
    ["a hex number", { GROUP_COMMIT_MAX_OPS: "0x10" }, "GROUP_COMMIT_MAX_OPS must be an integer"],
    ["a number with a unit", { SKILL_TIMEOUT_MS: "500ms" }, "SKILL_TIMEOUT_MS must be an integer"],
    ["a port above 65535", { PORT: "65536" }, "PORT must be between 0 and 65535, got 65536"],
    ["a negative port", { PORT: "-1" }, "PORT must be between 0 and 65535, got -1"],
    ["a fee above 100%", { FEE_BPS: "10001" }, "FEE_BPS must be between 0 and 10000"],
    ["a rate limit of 0", { RATE_LIMIT_PER_MIN: "0" }, "RATE_LIMIT_PER_MIN must be between 1 and"],
    ["a negative daily cap", { DAILY_CALL_CAP: "-5" }, "DAILY_CALL_CAP must be between 0 and"],
    [
      "a 16-byte wallet encryption key",
      { WALLET_ENCRYPTION_KEY: "ab".repeat(16) },
      "WALLET_ENCRYPTION_KEY must be 32 bytes: 64 hex digits or base64",
    ],
    ["a request cap under 1 KiB", { MAX_REQUEST_BYTES: "1023" }, "MAX_REQUEST_BYTES must be between 1024 and"],
    ["a response cap under 1 KiB", { MAX_RESPONSE_BYTES: "100" }, "MAX_RESPONSE_BYTES must be between 1024 and"],
    ["a skill timeout under 10 ms", { SKILL_TIMEOUT_MS: "9" }, "SKILL_TIMEOUT_MS must be between 10 and"],
    ["an idempotency TTL of 0 hours", { IDEMPOTENCY_TTL_HOURS: "0" }, "IDEMPOTENCY_TTL_HOURS must be between 1 and"],
    ["a key cache TTL over an hour", { KEY_CACHE_TTL_MS: "3600001" }, "KEY_CACHE_TTL_MS must be between 0 and 3600000"],
    ["a group commit of 0 operations", { GROUP_COMMIT_MAX_OPS: "0" }, "GROUP_COMMIT_MAX_OPS must be between 1 and"],
    ["a huge number", { PORT: "99999999999999999999" }, "PORT must be between 0 and 65535"],
    ["an unknown FEE_MODE", { FEE_MODE: "on-top" }, 'FEE_MODE must be one of included, on_top, got "on-top"'],
    ["a FEE_MODE in the wrong case", { FEE_MODE: "INCLUDED" }, "FEE_MODE must be one of included, on_top"],
    ["an unknown SQLITE_LEDGER_WRITER", { SQLITE_LEDGER_WRITER: "worker" }, "SQLITE_LEDGER_WRITER must be one of thread, loop"],
    [
      "a GitHub client id without its secret",
      { GITHUB_CLIENT_ID: "gh-id" },
      "GITHUB_CLIENT_ID and GITHUB_CLIENT_SECRET must be set together",
    ],
    [
      "a plain-http issuer on another machine",
      { GOOGLE_ISSUER: "http://idp.example" },
      'GOOGLE_ISSUER must be a https: URL (http only on this machine), got "http://idp.example"',
    ],
    ["an SMTP_URL that is not smtp", { SMTP_URL: "https://mail.example" }, "SMTP_URL must be a smtp: or smtps: URL"],
    ["an e-mail link TTL of 0", { EMAIL_LINK_TTL_MIN: "0" }, "EMAIL_LINK_TTL_MIN must be between 1 and 1440"],
    ["a SIWE chain id of 0", { SIWE_CHAIN_ID: "0" }, "SIWE_CHAIN_ID must be between 1 and"],
    [
      "a price with 7 decimals",
      { MAX_SKILL_PRICE_USD: "0.0000001" },
      'MAX_SKILL_PRICE_USD must be a USD amount with at most 6 decimals, got "0.0000001"',
    ],
    ["a negative price", { MIN_SKILL_PRICE_USD: "-1" }, "MIN_SKILL_PRICE_USD must be a USD amount"],
    ["a voucher minimum with 7 decimals", { VOUCHER_MIN_USD: "0.0000001" }, "VOUCHER_MIN_USD must be a USD amount with at most 6 decimals"],
    ["no open voucher at all", { VOUCHERS_OPEN_PER_ACCOUNT_MAX: "0" }, "VOUCHERS_OPEN_PER_ACCOUNT_MAX must be between 1 and"],
    ["a voucher rate limit of 0", { VOUCHER_RATE_LIMIT_PER_HOUR: "0" }, "VOUCHER_RATE_LIMIT_PER_HOUR must be between 1 and"],
    [
      "an unknown LOG_LEVEL",
      { LOG_LEVEL: "verbose" },
      'LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent, got "verbose"',
    ],
    ["a METRICS_TOKEN too short to resist guessing", { METRICS_TOKEN: "secret" }, "METRICS_TOKEN must be 16 to 256 characters"],
    ["a METRICS_TOKEN with a space", { METRICS_TOKEN: "0123456789 abcdef" }, "METRICS_TOKEN must be 16 to 256 characters"],
    [
      "an allowlisted backend with a path",
      { SKILL_BACKEND_ALLOWLIST: "http://127.0.0.1:9100/skill" },
      'SKILL_BACKEND_ALLOWLIST: "http://127.0.0.1:9100/skill" must be an origin',
    ],
    [
      "an allowlisted backend with credentials",
      { SKILL_BACKEND_ALLOWLIST: "http://u:p@127.0.0.1:9100" },
      "must be an origin, http(s)://host[:port], with no path or credentials",
    ],
    ["an allowlisted file URL", { SKILL_BACKEND_ALLOWLIST: "file:///etc" }, 'SKILL_BACKEND_ALLOWLIST: "file:///etc" must be an origin'],
    ["an allowlisted word", { SKILL_BACKEND_ALLOWLIST: "localhost" }, 'SKILL_BACKEND_ALLOWLIST: "localhost" is not a URL'],
    ["a backend port of 0", { SKILL_BACKEND_PORTS: "443,0" }, 'SKILL_BACKEND_PORTS: "0" is not a port'],
    ["a backend port that is a word", { SKILL_BACKEND_PORTS: "https" }, 'SKILL_BACKEND_PORTS: "https" is not a port'],
    [
      "a headers time-out above the request time-out",
      { HEADERS_TIMEOUT_MS: "40000" },
      "HEADERS_TIMEOUT_MS must not be above REQUEST_TIMEOUT_MS",
    ],
    [
      "a minimum price above the maximum",
      { MIN_SKILL_PRICE_USD: "1", MAX_SKILL_PRICE_USD: "0.5" },
      "MIN_SKILL_PRICE_USD must not be above MAX_SKILL_PRICE_USD",
    ],
    [
      "TRUST_PROXY=true, which would let any client pick its address",
      { TRUST_PROXY: "true" },
      "TRUST_PROXY=true would believe any client's X-Forwarded-For",
    ],
    ["a TRUST_PROXY hop count above 10", { TRUST_PROXY: "11" }, "TRUST_PROXY must be between 0 and 10"],
    ["a TRUST_PROXY entry that is no address", { TRUST_PROXY: "proxy.example" }, 'got "proxy.example"'],
    ["a TRUST_PROXY address in a legacy IPv4 form", { TRUST_PROXY: "10.1" }, 'got "10.1"'],
    ["a TRUST_PROXY prefix too long for IPv4", { TRUST_PROXY: "10.0.0.0/33" }, 'got "10.0.0.0/33"'],
    ["an empty TRUST_PROXY entry", { TRUST_PROXY: "loopback,,10.0.0.1" }, 'got ""'],
    ["a sign-in rate limit of 0", { SIGN_IN_RATE_LIMIT_PER_MIN: "0" }, "SIGN_IN_RATE_LIMIT_PER_MIN must be between 1 and"],
    ["a public rate limit of 0", { PUBLIC_RATE_LIMIT_PER_MIN: "0" }, "PUBLIC_RATE_LIMIT_PER_MIN must be between 1 and"],
    ["a credential rate limit of 0", { CREDENTIAL_RATE_LIMIT_PER_MIN: "0" }, "CREDENTIAL_RATE_LIMIT_PER_MIN must be between 1 and"],
    ["a health rate limit of 0", { HEALTH_RATE_LIMIT_PER_MIN: "0" }, "HEALTH_RATE_LIMIT_PER_MIN must be between 1 and"],
    ["no SIWE nonce per client", { SIWE_NONCES_PER_CLIENT_MAX: "0" }, "SIWE_NONCES_PER_CLIENT_MAX must be between 1 and"],
    ["no SIWE nonce at all", { SIWE_NONCES_MAX: "0" }, "SIWE_NONCES_MAX must be between 1 and"],
    ["no e-mail link at all", { EMAIL_LINKS_MAX: "0" }, "EMAIL_LINKS_MAX must be between 1 and"],
    ["no OAuth state at all", { OAUTH_STATES_MAX: "0" }, "OAUTH_STATES_MAX must be between 1 and"],
    ["a prune interval of 0", { PRUNE_INTERVAL_SEC: "0" }, "PRUNE_INTERVAL_SEC must be between 1 and"],
    ["an MCP access token good for 0 s", { MCP_ACCESS_TOKEN_TTL_SEC: "0" }, "MCP_ACCESS_TOKEN_TTL_SEC must be between 1 and"],
    ["an MCP refresh token good for 10 s", { MCP_REFRESH_TOKEN_TTL_SEC: "10" }, "MCP_REFRESH_TOKEN_TTL_SEC must be between 60 and"],
    [
      "a DATABASE_URL for another database",
      { DATABASE_URL: "mysql://db.internal/gateway" },
      "DATABASE_URL must start with postgres:// or postgresql://",
    ],
    ["a DATABASE_URL that is a file path", { DATABASE_URL: "/var/lib/gateway.db" }, "DATABASE_URL is not a URL"],
    [
      "a DATABASE_URL without a host",
      { DATABASE_URL: "postgres:///gateway" },
      "DATABASE_URL names no host (a Unix socket: postgres://user@localhost:5432/database?host=/path/of/the/socket/folder)",
    ],
    ["a REDIS_URL without a host", { REDIS_URL: "redis:///0?host=/run/redis" }, "REDIS_URL names no host"],
    ["a REDIS_URL over http", { REDIS_URL: "http://cache.internal:6379" }, "REDIS_URL must start with redis:// or rediss://"],
    ["a REDIS_URL that is a bare host", { REDIS_URL: "cache.internal:6379" }, "REDIS_URL must start with redis:// or rediss://"],
    ["a REPLICA_ID with a space", { REPLICA_ID: "replica 1" }, "REPLICA_ID must be 1 to 64 characters of A-Z a-z 0-9 . _ -"],
    ["a REPLICA_ID with a slash", { REPLICA_ID: "eu/1" }, "REPLICA_ID must be 1 to 64 characters"],
    ["a REPLICA_ID with a quote", { REPLICA_ID: "r1'; DROP TABLE holds; --" }, "REPLICA_ID must be 1 to 64 characters"],
    ["a REPLICA_ID with a non-ASCII letter", { REPLICA_ID: "réplica" }, "REPLICA_ID must be 1 to 64 characters"],
    ["a REPLICA_ID of 65 characters", { REPLICA_ID: "r".repeat(65) }, "REPLICA_ID must be 1 to 64 characters"],
    [
      "session cookies without Secure under an https PUBLIC_URL",
      { PUBLIC_URL: "https://gateway.example", COOKIE_SECURE: "false" },
      "COOKIE_SECURE=false contradicts an https PUBLIC_URL",
    ],
    [
      "Secure session cookies under a plain-http PUBLIC_URL on another machine, which browsers would drop",
      { PUBLIC_URL: "http://gateway.example", COOKIE_SECURE: "true" },
      "COOKIE_SECURE=true contradicts an http PUBLIC_URL",
    ],
    ["a PUBLIC_URL without a scheme", { PUBLIC_URL: "gateway.example" }, 'PUBLIC_URL must be a URL, got "gateway.example"'],
    ["a PUBLIC_URL that is not http(s)", { PUBLIC_URL: "ftp://gateway.example" }, "PUBLIC_URL must be an https or http URL"],
    ["a leader lease under 200 ms", { LEADER_LEASE_MS: "199" }, "LEADER_LEASE_MS must be between 200 and 600000"],
    ["a leader lease over 10 minutes", { LEADER_LEASE_MS: "600001" }, "LEADER_LEASE_MS must be between 200 and 600000"],
    ["a database ping timeout under 100 ms", { DATABASE_PING_TIMEOUT_MS: "99" }, "DATABASE_PING_TIMEOUT_MS must be between 100 and 60000"],
    [
      "a database ping timeout over a minute",
      { DATABASE_PING_TIMEOUT_MS: "60001" },
      "DATABASE_PING_TIMEOUT_MS must be between 100 and 60000",
    ],
  ];
  for (const [what, env, message] of bad) {
    it(`throws a ConfigError naming the setting for ${what}`, () => {
      expect(() => loadConfig(env))
        .to.throw(ConfigError)
        .with.property("message")
        .that.includes(message);
    });
  }

  it("accepts either PostgreSQL scheme and either Redis scheme, and keeps the URL as given", () => {
    for (const url of ["postgres://db.internal/gateway", "postgresql://gw:pw@10.0.0.5:6432/gateway?sslmode=require"]) {
      expect(loadConfig({ DATABASE_URL: url }).databaseUrl).to.equal(url);
    }
    for (const url of ["redis://127.0.0.1:6379", "rediss://default:pw@cache.example:6380/1"]) {
      expect(loadConfig({ REDIS_URL: url }).redisUrl).to.equal(url);
    }
    expect(loadConfig({ DATABASE_URL: " postgres://db.internal/gateway " }).databaseUrl).to.equal("postgres://db.internal/gateway");
    // A Unix socket's folder instead of a host, as libpq reads it.
    const socket = "postgres://gateway@localhost:5432/gateway?host=/run/postgresql";
    expect(loadConfig({ DATABASE_URL: socket }).databaseUrl).to.equal(socket);
  });

  /** Refused database and Redis URLs that carry a password, which no part of the error may repeat. */
  const SECRET = "s3cr3t-Pa55";
  const refusedWithPassword: [string, Record<string, string>, string][] = [
    [
      "a DATABASE_URL with another scheme",
      { DATABASE_URL: `mysql://gateway:${SECRET}@db.internal/gateway` },
      "DATABASE_URL must start with",
    ],
    ["a DATABASE_URL without its scheme", { DATABASE_URL: `gateway:${SECRET}@db.internal/gateway` }, "DATABASE_URL must start with"],
    ["a DATABASE_URL that does not parse", { DATABASE_URL: `postgres://gateway:${SECRET}@` }, "DATABASE_URL is not a URL"],
    ["a DATABASE_URL without a host", { DATABASE_URL: `postgres://gateway:${SECRET}@/gateway` }, "DATABASE_URL"],
    ["a REDIS_URL with another scheme", { REDIS_URL: `https://:${SECRET}@cache.internal` }, "REDIS_URL must start with"],
    ["a REDIS_URL that does not parse", { REDIS_URL: `redis://:${SECRET}@` }, "REDIS_URL is not a URL"],
  ];
  for (const [what, env, message] of refusedWithPassword) {
    it(`refuses ${what} without repeating its password`, () => {
      let caught: unknown;
      try {
        loadConfig(env);
      } catch (error) {
        caught = error;
      }
      expect(caught).to.be.instanceOf(ConfigError);
      const error = caught as ConfigError;
      expect(error.message).to.include(message);
      expect(error.message).not.to.include(SECRET);
      expect(String(error)).not.to.include(SECRET);
      expect(error.stack ?? "").not.to.include(SECRET);
      expect(JSON.stringify(error, Object.getOwnPropertyNames(error))).not.to.include(SECRET);
    });
  }

  it("takes a REPLICA_ID of letters, digits, dots, underscores and dashes, up to 64 characters", () => {
    for (const id of ["a", "gw-1", "eu.west_2-replica", "R".repeat(64), "0"]) {
      expect(loadConfig({ REPLICA_ID: id }).replicaId).to.equal(id);
    }
    expect(loadConfig({ REPLICA_ID: "  gw-2  " }).replicaId).to.equal("gw-2");
  });

  it("names a replica after its host and process when REPLICA_ID is unset, in REPLICA_ID's own alphabet", () => {
    const id = loadConfig({}).replicaId;
    expect(id).to.equal(DEFAULT_REPLICA_ID);
    expect(id).to.match(/^[A-Za-z0-9._-]{1,64}$/);
    expect(id.endsWith(`-${process.pid}`)).to.equal(true);
  });

  it("accepts the ends of LEADER_LEASE_MS's range", () => {
    expect(loadConfig({ LEADER_LEASE_MS: "200" }).leaderLeaseMs).to.equal(200);
    expect(loadConfig({ LEADER_LEASE_MS: "600000" }).leaderLeaseMs).to.equal(600_000);
  });

  it("names its errors ConfigError", () => {
    try {
      loadConfig({ FEE_MODE: "free" });
      expect.fail("loadConfig accepted FEE_MODE=free");
    } catch (error) {
      expect(error).to.be.instanceOf(ConfigError).and.to.have.property("name", "ConfigError");
    }
  });
});
