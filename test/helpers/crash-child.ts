/**
 * A gateway process for the crash test: started on a given database with a skill whose
 * backend never answers, it prints its URL and a buyer's key, then waits to be killed.
 */
import { loadConfig } from "../../server/config";
import { startGateway } from "../../server/index";

async function main(): Promise<void> {
  const [dbPath, backendUrl] = process.argv.slice(2);
  const gw = await startGateway(loadConfig({}, { port: 0, dbPath, skillBackendAllowlist: [new URL(backendUrl).origin] }), { log: () => {} });
  gw.ledger.ensureAccount({ id: "seller", kind: "seller", name: "seller" });
  gw.ledger.ensureAccount({ id: "buyer", kind: "user", name: "buyer" });
  gw.ledger.credit("buyer", 1_000_000n, "dev_credit", "crash test");
  gw.skills.upsert({ slug: "hang", name: "hang", priceMicros: 250_000n, sellerAccountId: "seller", backendUrl, timeoutMs: 60_000 });
  gw.ledger.commit.flush();
  const { key } = gw.keys.create("buyer");
  process.stdout.write(JSON.stringify({ url: gw.url, key }) + "\n");
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
