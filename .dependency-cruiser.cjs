/**
 * The import direction of server/, checked by `npm run lint` (and so by `npm test`).
 *
 *   http ─────────────┐   the only layer that knows HTTP: statuses, headers, bodies, cookies
 *     │               │
 *   x402              │   pay per call with x402 (verify, forward, settle on-chain)
 *     │   \           │
 *   gateway  payments │   the call path; card top-ups
 *     │   \  /   │    │
 *   catalog wallets   │   skills and their schemas; embedded wallets and 4337 flows
 *     │      │        │
 *   identity settlement   accounts, keys, sessions, sign-in; the chain side of money
 *     │      │
 *   ledger  chain         the books; the chain adapter (deployment, receipts, retry loop)
 *     │
 *   db                    SQLite handle, migrations, group commit, ids; PostgreSQL pool, migrations (db/postgres/),
 *                         the leader lease (db/leader.ts). db/ imports nothing of ours.
 *
 * config.ts (the validated configuration) and errors.ts (the error codes and the base error every
 * layer throws) sit outside the layers: any part may import them, and they import nothing of server/.
 * text.ts (the policy for text people type and others read) sits beside them, and imports only errors.ts.
 * housekeeping.ts (a module's named timers, started by the composition root) sits beside them too, importing nothing.
 * threads.ts (worker threads running the gateway's TypeScript, bundled by esbuild) likewise.
 *
 * Each module keeps its tables' migration steps beside it (server/<module>/schema.ts). server/schema.ts, beside the
 * composition root, gathers them into the ordered list db/ applies (openDatabase takes the list): it is the one file
 * besides the entries that imports every module, db/ stays free of the domain, and no module may import it (each
 * module's rule below leaves it out), so the entries, scripts and tests hand it to openDatabase.
 *
 * devstack/ (local chain, bundler, demo) is imported only by scripts and tests: a production
 * entry never starts a chain. ops/ reads health from every layer and is read by http/.
 */
const CORE = "^server/(x402|gateway|catalog|identity|payments|wallets|settlement|ledger|chain|db|ops)/";

/** A rule saying `from` may import nothing under server/ outside `allowed`. */
function onlyImports(name, from, allowed, comment) {
  return {
    name,
    comment,
    severity: "error",
    from: { path: `^server/${from}/` },
    to: {
      path: "^server/",
      pathNot: [
        `^server/(${[from, ...allowed].join("|")})/`,
        "^server/config\\.ts$",
        "^server/errors\\.ts$",
        "^server/text\\.ts$",
        "^server/error-log\\.ts$",
        "^server/housekeeping\\.ts$",
        "^server/threads\\.ts$",
      ],
    },
  };
}

module.exports = {
  forbidden: [
    {
      name: "core-never-imports-http",
      comment: "The core decides outcomes; only server/http/ decides statuses, headers and bodies.",
      severity: "error",
      from: { path: CORE },
      to: { path: "^server/http/" },
    },
    {
      name: "devstack-only-from-scripts-and-tests",
      comment: "The development stack (local chain, bundler, demo seed) is never part of a production entry.",
      severity: "error",
      from: { path: "^server/", pathNot: "^server/devstack/" },
      to: { path: "^server/devstack/" },
    },
    {
      name: "nothing-imports-an-entry",
      comment: "server/index.ts and server/main.ts compose the parts; no part imports them.",
      severity: "error",
      from: { path: "^server/", pathNot: ["^server/devstack/", "^server/main\\.ts$"] },
      to: { path: "^server/(index|main)\\.ts$" },
    },
    {
      name: "routes-never-import-db",
      comment: "No route runs SQL: a route asks its module's store or service, which owns the tables (issue 13).",
      severity: "error",
      from: { path: "^server/http/routes/" },
      to: { path: "^server/db/" },
    },
    {
      name: "only-stores-hold-the-database",
      comment:
        "Each module's SQL lives in its store files (*-store.ts, store.ts) behind a small interface; only they, db/, " +
        "the ledger and the composition root hold the SQLite handle's type (test/lint/sql-in-stores.test.ts checks " +
        "that no other file runs SQL through `ledger.db` without importing it).",
      severity: "error",
      from: {
        path: "^server/",
        pathNot: [
          "(/|-)store\\.ts$",
          "^server/db/",
          "^server/ledger/",
          "^server/(index|main|database|replication)\\.ts$",
          "^server/devstack/",
        ],
      },
      to: { path: ["^server/db/db\\.ts$", "^better-sqlite3$", "(^|/)node_modules/better-sqlite3/"] },
    },
    {
      name: "redis-opened-in-one-place",
      comment:
        "Redis connections (shared rate limits, daily caps, cache invalidation: issue 14) are opened by server/db/redis.ts, " +
        "which sets how they reconnect and fail while Redis is down; other modules take the connection it opens.",
      severity: "error",
      from: { path: "^server/", pathNot: "^server/db/redis\\.ts$" },
      to: { path: ["^ioredis$", "(^|/)node_modules/ioredis/"], dependencyTypesNot: ["type-only"] },
    },
    {
      name: "only-stores-speak-postgres",
      comment:
        "The PostgreSQL driver and pool (issue 14) stay where the SQLite handle stays: in db/, the ledger, the store files " +
        "and the composition root. A service reaches PostgreSQL through its module's store, never by its own SQL.",
      severity: "error",
      from: {
        path: "^server/",
        pathNot: [
          "(/|-)store\\.ts$",
          "^server/db/",
          "^server/ledger/",
          "^server/(index|main|database|replication)\\.ts$",
          "^server/devstack/",
        ],
      },
      to: { path: ["^pg$", "(^|/)node_modules/pg/", "^server/db/postgres/"] },
    },
    onlyImports("db-stands-alone", "db", [], "db/ knows SQLite, PostgreSQL and Redis, and nothing of the domain."),
    onlyImports("chain-stands-alone", "chain", [], "chain/ is the chain adapter: deployment, ABIs, receipts, retry loop."),
    onlyImports("ledger-sits-on-db", "ledger", ["db"], "The ledger is the books; it knows nothing of HTTP, the chain or accounts."),
    onlyImports("identity-sits-on-ledger", "identity", ["db", "ledger"], "Accounts, keys, sessions and sign-in."),
    onlyImports("catalog-sits-on-ledger", "catalog", ["db", "ledger"], "Skills, listings and their schemas."),
    onlyImports("settlement-sits-on-ledger-and-chain", "settlement", ["db", "ledger", "chain"], "The chain side of money."),
    onlyImports(
      "wallets-sit-on-settlement",
      "wallets",
      ["db", "ledger", "chain", "settlement", "identity"],
      "Embedded wallets and 4337 flows.",
    ),
    onlyImports("payments-sit-on-wallets", "payments", ["db", "ledger", "chain", "settlement", "wallets", "identity"], "Card top-ups."),
    onlyImports("gateway-sits-on-catalog", "gateway", ["db", "ledger", "catalog", "identity"], "The call path."),
    onlyImports(
      "x402-sits-on-gateway-and-settlement",
      "x402",
      ["db", "ledger", "chain", "catalog", "gateway", "settlement"],
      "Pay per call with x402: the call path's forwarding, settled on-chain through the escrow.",
    ),
    {
      name: "no-circular",
      severity: "error",
      from: { path: "^server/" },
      to: { circular: true },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    exclude: { path: "^server/web/" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    moduleSystems: ["cjs", "es6"],
  },
};
