import fs from "node:fs";
import { LEGACY_SCOPES } from "../../server/identity/scopes";
import os from "node:os";
import path from "node:path";
import { type Config, loadConfig } from "../../server/config";
import type { Skill } from "../../server/catalog/skills";
import { type GatewayOptions, type RunningGateway, startGateway } from "../../server/index";
import { type AccountKind, PLATFORM_ACCOUNT_ID } from "../../server/ledger/ledger";
import { usdToMicros } from "../../server/ledger/money";
import { setDisplayName } from "../../server/identity/display-name-store";
import { type TestBackend, startTestBackend } from "./backend";
import { PublicStandInEgress } from "./egress";
import { assertDeclared, send } from "./session";
import { type EngineName, freshPostgresDatabase } from "./engines";
import { copyMigratedSqlite } from "./sqlite-template";

export interface TestStack {
  gw: RunningGateway;
  backend: TestBackend;
  url: string;
  /** An API key of the buyer. */
  key: string;
  buyerId: string;
  sellerId: string;
  dbPath: string;
  /** The engine the stack's tables are on. */
  engine: EngineName;
  /** With the postgres engine: the database's URL (for a second replica, or a direct look). */
  databaseUrl: string;
  /** Registers a skill sold by the test seller, backed by a route of the test backend. */
  addSkill(slug: string, route: string, overrides?: Partial<Parameters<RunningGateway["skills"]["upsert"]>[0]>): Promise<Skill>;
  /** Creates an account with a dev_credit balance and an API key. */
  addBuyer(usd: string, kind?: AccountKind): Promise<{ accountId: string; key: string }>;
  /** POSTs JSON (a string is sent as is) with the buyer's key unless `key` is given (null: no header). */
  post(
    pathname: string,
    body: unknown,
    options?: { key?: string | null; headers?: Record<string, string> },
  ): Promise<{ status: number; headers: Headers; body: any }>;
  get(pathname: string, key?: string | null): Promise<{ status: number; headers: Headers; body: any }>;
  /** Balances in base units. */
  available(accountId?: string): Promise<bigint>;
  earned(accountId?: string): Promise<bigint>;
  fees(): Promise<bigint>;
  close(): Promise<void>;
}

/**
 * Starts the real gateway on port 0 with a fresh database (a SQLite file, or with `engine: "postgres"` a fresh
 * database on the test process's PostgreSQL server: ./engines.ts), a real test backend, a seller with the
 * skills `echo` (0.001), `fail`, `reject`, `hang`, `notjson`, `big`, and a buyer with `buyerUsd` of dev
 * credit and an API key.
 *
 * The test backend is on loopback, and plays two parts: its origin is on the operator's allowlist, for the
 * skills registered here (`addSkill`, as `npm run register-skill` registers them), and it stands in for a
 * seller's public backend (./egress.ts), so that sellers' own listings in tests can name it. `publicStandIns`
 * adds other stand-ins; an origin only in `config.skillBackendAllowlist` is the operator's alone.
 */
export async function startStack(
  options: {
    config?: Partial<Config>;
    buyerUsd?: string;
    dbPath?: string;
    gateway?: GatewayOptions;
    engine?: EngineName;
    publicStandIns?: string[];
  } = {},
): Promise<TestStack> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "skill-gw-"));
  // What a stack that fails to start (a test of a refused configuration) has started, closed before the error goes on.
  const started: { backend?: TestBackend; gw?: RunningGateway } = {};
  try {
    const dbPath = options.dbPath ?? path.join(dir, "gateway.db");
    const engine = options.engine ?? "sqlite";
    const databaseUrl = engine === "postgres" ? await freshPostgresDatabase() : "";
    // A fresh file of this stack's own only: a path the test names keeps what the test put there (or nothing).
    if (engine === "sqlite" && options.dbPath === undefined && options.config?.dbPath === undefined) copyMigratedSqlite(dbPath);
    // The test backend is on loopback: allowlisted, as npm start does for its demo backend.
    const backend = (started.backend = await startTestBackend());
    const config = loadConfig(
      {},
      {
        port: 0,
        dbPath,
        databaseUrl,
        logLevel: "silent",
        ...options.config,
        skillBackendAllowlist: [backend.url, ...(options.config?.skillBackendAllowlist ?? [])],
      },
    );
    const egress = new PublicStandInEgress(
      { allowlist: config.skillBackendAllowlist, allowedPorts: config.skillBackendPorts },
      [backend.url, ...(options.publicStandIns ?? [])],
      options.gateway?.resolveHost,
    );
    const gw = (started.gw = await startGateway(config, { log: () => {}, egress, ...options.gateway }));
    const sellerId = "seller-1";
    await gw.ledger.ensureAccount({ id: sellerId, kind: "seller", name: "Seller One" });
    // The marketplace shows a seller by the display name it chose (never its account's name): this one chose its name.
    await setDisplayName(gw.db, sellerId, "Seller One");

    const addSkill: TestStack["addSkill"] = (slug, route, overrides = {}) =>
      gw.skills.upsert({
        slug,
        name: slug,
        priceMicros: 1_000n,
        sellerAccountId: sellerId,
        backendUrl: backend.url + route,
        timeoutMs: 2_000,
        ...overrides,
      });
    for (const route of ["echo", "fail", "reject", "hang", "notjson", "big", "unavailable"]) await addSkill(route, `/${route}`);

    let buyers = 0;
    const addBuyer: TestStack["addBuyer"] = async (usd, kind = "user") => {
      const accountId = `buyer-${++buyers}`;
      await gw.ledger.ensureAccount({ id: accountId, kind, name: accountId });
      if (usdToMicros(usd) > 0n) await gw.ledger.credit(accountId, usdToMicros(usd), "dev_credit", "test");
      await gw.db.durable();
      // The stack's buyers hold the scopes every key held before keys had scopes (calls, usage:read, funds:withdraw), so
      // the suites written before scopes test what they always did; the suites about scopes make keys of their own.
      return { accountId, key: (await gw.keys.create(accountId, { scopes: LEGACY_SCOPES })).key };
    };
    const buyer = await addBuyer(options.buyerUsd ?? "10");

    const request = async (
      method: string,
      pathname: string,
      body: unknown,
      key: string | null | undefined,
      headers: Record<string, string> = {},
    ) => {
      const k = key === undefined ? buyer.key : key;
      const reply = await send(gw.url + pathname, method, k === null ? headers : { authorization: `Bearer ${k}`, ...headers }, body);
      assertDeclared(method, gw.url + pathname, reply);
      return reply;
    };

    return {
      gw,
      backend,
      url: gw.url,
      key: buyer.key,
      buyerId: buyer.accountId,
      sellerId,
      dbPath,
      engine,
      databaseUrl,
      addSkill,
      addBuyer,
      post: (p, body, o = {}) => request("POST", p, body, o.key, o.headers),
      get: (p, key) => request("GET", p, undefined, key),
      available: (id = buyer.accountId) => gw.ledger.balanceOf(id, "available"),
      earned: (id = sellerId) => gw.ledger.balanceOf(id, "earned"),
      fees: () => gw.ledger.balanceOf(PLATFORM_ACCOUNT_ID, "fees"),
      async close() {
        await gw.close();
        await backend.close();
        fs.rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (error) {
    await started.gw?.close().catch(() => {});
    await started.backend?.close().catch(() => {});
    fs.rmSync(dir, { recursive: true, force: true });
    throw error;
  }
}
