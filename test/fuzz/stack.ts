import { randomBytes, randomUUID } from "node:crypto";
import { usdToMicros } from "../../server/ledger/money";
import { type TestStack, startStack } from "../helpers/gateway";
import { signedIn } from "../helpers/session";
import type { Target } from "./cases";
import { BACKEND_ROUTES, type Canary, type FuzzServer, startCanary, startFuzzBackend } from "./servers";

/**
 * The stack a fuzz run aims at: the real gateway (startStack, in this process) with a
 * funded buyer, a buyer with nothing, a rate-limited key and a revoked one; a signed-in
 * seller with its own key; one skill per behaviour of the fuzz backend, four with input
 * schemas; skills already pointing at internal addresses; and the canary.
 */
export interface FuzzStack {
  stack: TestStack;
  backend: FuzzServer;
  canary: Canary;
  target: Target;
  /** The accounts that pay for calls, with their available balance before the run (base units). */
  payers: { accountId: string; startMicros: bigint }[];
  /** What the gateway logged: internal errors it hid from clients show up here. */
  gatewayLog: string[];
  close(): Promise<void>;
}

/** The input schemas of the schema skills: ordinary rules, and the three a hostile input aims at. */
const SCHEMAS: Record<string, object> = {
  "fz-schema-basic": {
    type: "object",
    required: ["name"],
    additionalProperties: false,
    properties: {
      name: { type: "string", pattern: "^[a-z]{1,16}$" },
      n: { type: "integer", minimum: 0, maximum: 100 },
      tags: { type: "array", maxItems: 5, items: { type: "string" } },
    },
  },
  // Listing bounds need a maxItems beside uniqueItems (uniqueness is quadratic in the length).
  "fz-schema-unique": { type: "object", properties: { items: { type: "array", uniqueItems: true, maxItems: 100 } } },
  // Recursive through $defs: a bare "#" does not resolve in the registry's compiler.
  "fz-schema-ref": {
    $defs: { node: { type: "object", properties: { child: { $ref: "#/$defs/node" }, v: { type: "number" } } } },
    $ref: "#/$defs/node",
  },
  "fz-schema-redos": { type: "object", properties: { s: { type: "string", pattern: "^(a+)+$" } } },
};

/** Backends that take a skill's whole timeout to fail: given a short one, so the run stays quick. */
const SLOW_ROUTES = new Set(["/hang", "/trickle"]);

export const slugOf = (route: string) => `fz-${route.slice(1).replaceAll("/", "-")}`;

export async function startFuzzStack(): Promise<FuzzStack> {
  const canary = await startCanary();
  const backend = await startFuzzBackend();
  const gatewayLog: string[] = [];
  const stack = await startStack({
    buyerUsd: "1000",
    // The per-key limit would answer most calls 429 within the first second; one key below keeps a low one.
    // The fuzz backend is on loopback: allowlisted for the skills registered below, and a stand-in for a public
    // backend, so that the fuzz seller's own listings can name it too (../helpers/egress.ts); the canary is neither.
    config: { rateLimitPerMin: 10_000_000, skillBackendAllowlist: [backend.url] },
    publicStandIns: [backend.url],
    gateway: {
      log: (message, error) =>
        void gatewayLog.push(`${message}: ${error instanceof Error ? `${error.name}: ${error.message}` : String(error ?? "")}`),
    },
  });

  for (const route of BACKEND_ROUTES) {
    await stack.addSkill(slugOf(route), route, { backendUrl: backend.url + route, timeoutMs: SLOW_ROUTES.has(route) ? 300 : 2_000 });
  }
  for (const [slug, schema] of Object.entries(SCHEMAS))
    await stack.addSkill(slug, "/echo", { backendUrl: `${backend.url}/echo`, inputSchema: schema });

  // Written straight into the catalogue, as a skill listed before any egress check would be,
  // or one whose host name resolves to an internal address: only the call path can refuse them.
  const gatewayPort = Number(new URL(stack.url).port);
  const internal = [
    `http://127.0.0.1:${canary.port}/`,
    `http://localhost:${canary.port}/rpc`,
    `http://0x7f.1:${canary.port}/`,
    `http://[::ffff:127.0.0.1]:${canary.port}/`,
    ...(canary.v6Port ? [`http://[::1]:${canary.v6Port}/`] : []),
    `http://127.0.0.1:${gatewayPort}/healthz`,
    "http://169.254.169.254/latest/meta-data/",
    "http://10.0.0.1/",
  ];
  const hostileSkills: string[] = [];
  for (const [i, url] of internal.entries()) hostileSkills.push(await insertUnchecked(stack, `fz-internal-${i}`, url));
  await stack.gw.skills.refresh();

  const poor = await stack.addBuyer("0");
  const limited = (await stack.gw.keys.create(stack.buyerId, { name: "limited", rateLimitPerMin: 3 })).key;
  const revoked = await stack.gw.keys.create(stack.buyerId, { name: "revoked" });
  await stack.gw.keys.revoke(revoked.record.id);

  const seller = await signedIn(stack, "fuzz-seller@example.com");
  await stack.gw.ledger.credit(seller.accountId, usdToMicros("100"), "dev_credit", "fuzz");
  const sellerKey = await stack.gw.keys.create(seller.accountId, { name: "try" });
  await stack.gw.db.durable();

  const standard = ["fail", "reject", "notjson", "big", "unavailable"];
  const slugs = [...BACKEND_ROUTES.map(slugOf), ...Object.keys(SCHEMAS), ...standard];
  const target: Target = {
    keys: { rich: stack.key, poor: poor.key, limited, revoked: revoked.key },
    skills: slugs.map((slug) => ({ slug, id: stack.gw.skills.resolve(slug)!.id })),
    schemaSkills: Object.keys(SCHEMAS),
    redosSkill: "fz-schema-redos",
    hostileSkills,
    session: { cookie: seller.cookie, csrf: seller.csrfToken, keyId: sellerKey.record.id },
    internalPorts: [canary.port, gatewayPort],
    canaryV6Port: canary.v6Port,
    origin: new URL(stack.url).origin,
    backendUrl: backend.url,
  };
  const payers: FuzzStack["payers"] = [];
  for (const accountId of [stack.buyerId, poor.accountId, seller.accountId]) {
    payers.push({ accountId, startMicros: await stack.available(accountId) });
  }

  return {
    stack,
    backend,
    canary,
    target,
    payers,
    gatewayLog,
    async close() {
      await stack.close();
      await backend.close();
      await canary.close();
    },
  };
}

/** Inserts a skill without the registry's checks (the egress policy among them). */
async function insertUnchecked(stack: TestStack, slug: string, backendUrl: string): Promise<string> {
  const now = Date.now();
  await stack.gw.db.run(
    `INSERT INTO skills (id, slug, name, description, price_micros, seller_account_id, backend_url, timeout_ms,
                         rate_limit_per_min, input_schema, signing_secret, active, created_at, updated_at)
     VALUES (?, ?, ?, '', 1000, ?, ?, 300, NULL, NULL, ?, 1, ?, ?)`,
    [randomUUID(), slug, slug, stack.sellerId, backendUrl, randomBytes(32).toString("hex"), now, now],
  );
  return slug;
}
