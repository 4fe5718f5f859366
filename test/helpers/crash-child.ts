/**
 * A gateway in a process of its own, for the tests that kill it: test/e2e/crash.test.ts and the chaos
 * harness (./chaos.ts). Started by ./crash-child-process.ts with one argument, a JSON CrashChildOptions.
 *
 * It opens the ledger file as production does (startup recovery releases the holds a killed predecessor
 * left open, and the gateway refuses to start on broken books), sets the file up the first time only (a
 * buyer with credit, a seller, the skills), makes a fresh API key for the buyer, prints one JSON line
 * (CrashChildReady) and serves until it is killed. SIGTERM closes it cleanly.
 */
import { loadConfig, type Config } from "../../server/config";
import { startGateway } from "../../server/index";

export interface CrashChildSkill {
  slug: string;
  backendUrl: string;
  /** Base units, as a decimal string (JSON has no bigint). */
  priceMicros: string;
  timeoutMs: number;
}

export interface CrashChildOptions {
  dbPath: string;
  /**
   * The environment the child's configuration is read from, exactly as loadConfig reads process.env (the
   * child never reads its own). Settings a test needs go here, validated like an operator's: a rate limit
   * high enough for load.
   */
  env: Record<string, string>;
  buyer: { id: string; creditMicros: string };
  sellerId: string;
  skills: CrashChildSkill[];
}

export interface CrashChildReady {
  url: string;
  key: string;
  /** What this start's recovery found: the holds and idempotency keys its killed predecessor left open. */
  recovered: { holds: number; idempotencyKeys: number };
}

/**
 * The child's configuration: its environment, a free port, its ledger file. Built from loadConfig, so a new
 * setting is validated here as in production; the skills' backends are on loopback, so their origins join
 * the egress policy's allowlist (SKILL_BACKEND_ALLOWLIST), as npm start's demo backend does.
 */
export function crashChildConfig(options: CrashChildOptions): Config {
  const backends = options.skills.map((skill) => new URL(skill.backendUrl).origin);
  const configured = options.env.SKILL_BACKEND_ALLOWLIST ? [options.env.SKILL_BACKEND_ALLOWLIST] : [];
  return loadConfig(
    { ...options.env, SKILL_BACKEND_ALLOWLIST: [...configured, ...new Set(backends)].join(",") },
    // Standard output carries the ready line to the parent; the child's log is not wanted there.
    { port: 0, dbPath: options.dbPath, logLevel: "silent" },
  );
}

async function main(): Promise<void> {
  const options = JSON.parse(process.argv[2]) as CrashChildOptions;
  const gw = await startGateway(crashChildConfig(options), { log: () => {} });
  await gw.db.transaction(async (tx) => {
    // Once per file: a restart must not credit the buyer again.
    if (!(await gw.ledger.getAccount(options.buyer.id, tx))) {
      await gw.ledger.ensureAccount({ id: options.buyer.id, kind: "user", name: options.buyer.id }, tx);
      await gw.ledger.credit(options.buyer.id, BigInt(options.buyer.creditMicros), "dev_credit", "crash test", tx);
    }
    await gw.ledger.ensureAccount({ id: options.sellerId, kind: "seller", name: options.sellerId }, tx);
  });
  for (const skill of options.skills) {
    await gw.skills.upsert({
      slug: skill.slug,
      name: skill.slug,
      priceMicros: BigInt(skill.priceMicros),
      sellerAccountId: options.sellerId,
      backendUrl: skill.backendUrl,
      timeoutMs: skill.timeoutMs,
    });
  }
  await gw.db.durable();
  const { key } = await gw.keys.create(options.buyer.id);
  process.once("SIGTERM", () => {
    gw.close(1_000).then(
      () => process.exit(0),
      () => process.exit(1),
    );
  });
  const ready: CrashChildReady = { url: gw.url, key, recovered: gw.recovered };
  process.stdout.write(`${JSON.stringify(ready)}\n`);
}

if (require.main === module) {
  main().catch((error) => {
    console.error(error);
    process.exit(1);
  });
}
