/**
 * The real gateway for the Python client's integration tests: startStack (port 0, a fresh
 * SQLite file, the test backend) plus a few skills and buyers, announced as one JSON line on
 * stdout. It runs until its stdin closes (the pytest fixture that spawned it ends).
 *
 *   node -r ts-node/register/transpile-only clients/python/tests/gateway_server.ts
 */
import { startStack } from "../../../test/helpers/gateway";

const UPPERCASE_SCHEMA = {
  type: "object",
  properties: { text: { type: "string", description: "The text to upper-case." } },
  required: ["text"],
  additionalProperties: false,
};

async function main(): Promise<void> {
  // A generous per-key limit: the concurrency test fires many calls at once.
  const stack = await startStack({ buyerUsd: "10" });
  await stack.addSkill("uppercase", "/echo", { description: "Echoes text: a stand-in for an upper-casing skill.", priceMicros: 2_000n, inputSchema: UPPERCASE_SCHEMA });
  await stack.addSkill("broken", "/fail");
  const empty = await stack.addBuyer("0");
  const concurrent = await stack.addBuyer("1");
  // A funded account whose key may spend 0.001 USD in all: one call of echo.
  const limited = await stack.addBuyer("1");
  const limitedKey = await stack.gw.keys.create(limited.accountId, {
    scopes: ["calls", "usage:read"],
    spendLimit: { limitMicros: 1_000n, period: "total" },
  });
  // Budgets (tests/test_budgets.py): a key that may spend 0.01 USD a day, and one whose limit (0.0005 in all) is
  // below any call's price, each on a funded account of its own.
  const budget = await stack.addBuyer("1");
  const budgetKey = await stack.gw.keys.create(budget.accountId, {
    scopes: ["calls", "usage:read"],
    spendLimit: { limitMicros: 10_000n, period: "day" },
  });
  const capped = await stack.addBuyer("1");
  const cappedKey = await stack.gw.keys.create(capped.accountId, { spendLimit: { limitMicros: 500n, period: "total" } });
  // Keys made by code (test_keys.py): a funded account of its own, whose provisioning key makes the keys.
  const provisioned = await stack.addBuyer("1");
  const managerKey = await stack.gw.keys.create(provisioned.accountId, { name: "provisioner", scopes: ["keys:manage"] });
  process.stdout.write(
    JSON.stringify({
      url: stack.url,
      key: stack.key,
      empty_key: empty.key,
      concurrent_key: concurrent.key,
      limited_key: limitedKey.key,
      budget_key: budgetKey.key,
      capped_key: cappedKey.key,
      manager_key: managerKey.key,
    }) + "\n",
  );
  let closing = false;
  const close = async () => {
    if (closing) return;
    closing = true;
    await stack.close();
    process.exit(0);
  };
  process.stdin.on("end", close);
  process.stdin.on("close", close);
  process.stdin.resume();
  process.on("SIGTERM", close);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
