/**
 * Creates an API key for an account (until the dashboard exists) and prints it once.
 *
 *   npm run create-key -- <account-id> [--name NAME] [--scopes calls,usage:read,...] [--create user|seller] [--revoke KEY_ID]
 */
import { ApiKeys } from "../server/identity/api-keys";
import { KEY_SCOPES, isKeyScope } from "../server/identity/scopes";
import { loadConfig } from "../server/config";
import { openGatewayDatabase } from "../server/database";
import { Ledger } from "../server/ledger/ledger";

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

async function main(): Promise<void> {
  const config = loadConfig();
  // The gateway's database, whichever engine it is on (DATABASE_URL, else the SQLite file at DB_PATH).
  const db = await openGatewayDatabase({ databaseUrl: config.databaseUrl, sqlitePath: config.dbPath });
  const keys = new ApiKeys(db, 0);
  const revoke = arg("revoke");
  if (revoke) {
    // Replicas sharing the database keep a revoked key in their caches until KEY_CACHE_TTL_MS ends: a key
    // revoked here does not announce itself on Redis (the dashboard's and the API's revocations do).
    console.log((await keys.revoke(revoke)) ? `revoked ${revoke}` : `no live key ${revoke}`);
    await db.close();
    return;
  }
  const accountId = process.argv[2];
  if (!accountId || accountId.startsWith("--")) {
    console.error(
      `usage: npm run create-key -- <account-id> [--name NAME] [--scopes ${KEY_SCOPES.join(",")}] [--create user|seller] | --revoke KEY_ID`,
    );
    process.exit(2);
  }
  const ledger = await Ledger.open(db);
  const kind = arg("create");
  if (kind === "user" || kind === "seller") await ledger.ensureAccount({ id: accountId, kind, name: accountId });
  if (!(await ledger.getAccount(accountId))) {
    console.error(`no account "${accountId}" (pass --create user to make one)`);
    await db.close();
    process.exit(1);
  }
  // The least by default (calls), as the dashboard's keys: --scopes asks for others (docs/keys.md).
  const scopeList = (arg("scopes") ?? "calls").split(",").map((scope) => scope.trim());
  const unknown = scopeList.filter((scope) => !isKeyScope(scope));
  if (unknown.length > 0 || scopeList.length === 0) {
    console.error(`unknown scope(s) ${unknown.join(", ")}: use ${KEY_SCOPES.join(", ")}`);
    await db.close();
    process.exit(2);
  }
  const scopes = scopeList.filter(isKeyScope);
  const { key, record } = await keys.create(accountId, { name: arg("name") ?? "", scopes });
  console.log(`key id:  ${record.id}\nscopes:  ${record.scopes.join(" ")}\nAPI key: ${key}\n(shown once: only its SHA-256 is stored)`);
  await db.close();
}

main().catch((error) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
