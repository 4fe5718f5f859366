/**
 * `npm start`: the whole system on its embedded default. Starts the demo skill backend
 * and the gateway, seeds the demo seller, skills and buyer, makes a fresh API key for the
 * buyer and prints it with a ready `curl`. Ctrl-C stops everything.
 */
import { loadConfig } from "../server/config";
import { startDemoBackend } from "../server/demo/backend";
import { seedDemo } from "../server/demo/seed";
import { startGateway } from "../server/index";
import { microsToUsd } from "../server/ledger/money";

async function main(): Promise<void> {
  const config = loadConfig();
  const backend = await startDemoBackend();
  const gateway = await startGateway(config);
  const { buyerId, credited } = seedDemo(gateway, backend);
  const { key } = gateway.keys.create(buyerId, { name: "npm start" });
  const balance = gateway.ledger.balance(buyerId);

  const body = JSON.stringify({ skill_id: "echo", input: { hello: "world" } });
  console.log(`
Skill Gateway is running.

Gateway:       ${gateway.url}
Demo backend:  ${backend.url}
Database:      ${config.dbPath}  (fee mode ${config.feeMode}, ${Number(config.feeBps) / 100}% platform fee)
Demo buyer:    ${buyerId}, balance ${microsToUsd(balance.availableMicros)} USDC${credited ? " (dev_credit seed step, not a deposit)" : ""}
Skills:        ${gateway.skills.list().map((s) => `${s.slug} (${microsToUsd(s.priceMicros)} USD)`).join(", ")}
${gateway.recovered.holds > 0 ? `Recovered:     released ${gateway.recovered.holds} hold(s) left open by a previous crash\n` : ""}
API key: ${key}

Try it:
curl -s ${gateway.url}/v1/call -H "Authorization: Bearer ${key}" -H "Content-Type: application/json" -d '${body}'

Press Ctrl-C to stop.`);

  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    await gateway.close();
    await backend.close();
    process.exit(0);
  };
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
}

main().catch((error) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
