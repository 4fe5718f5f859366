/**
 * Creates an API key for an account (until the dashboard exists) and prints it once.
 *
 *   npm run create-key -- <account-id> [--name NAME] [--create user|seller] [--revoke KEY_ID]
 */
import { ApiKeys } from "../server/identity/api-keys";
import { SqliteApiKeysStore } from "../server/identity/api-keys-store";
import { loadConfig } from "../server/config";
import { openDatabase } from "../server/db/db";
import { SCHEMA } from "../server/schema";
import { Ledger } from "../server/ledger/ledger";

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

function main(): void {
  const config = loadConfig();
  const db = openDatabase(config.dbPath, SCHEMA);
  const keys = new ApiKeys(new SqliteApiKeysStore(db), 0);
  const revoke = arg("revoke");
  if (revoke) {
    console.log(keys.revoke(revoke) ? `revoked ${revoke}` : `no live key ${revoke}`);
    db.close();
    return;
  }
  const accountId = process.argv[2];
  if (!accountId || accountId.startsWith("--")) {
    console.error("usage: npm run create-key -- <account-id> [--name NAME] [--create user|seller] | --revoke KEY_ID");
    process.exit(2);
  }
  const ledger = new Ledger(db);
  const kind = arg("create");
  if (kind === "user" || kind === "seller") ledger.ensureAccount({ id: accountId, kind, name: accountId });
  if (!ledger.getAccount(accountId)) {
    console.error(`no account "${accountId}" (pass --create user to make one)`);
    process.exit(1);
  }
  ledger.commit.flush();
  const { key, record } = keys.create(accountId, { name: arg("name") ?? "" });
  console.log(`key id:  ${record.id}\nAPI key: ${key}\n(shown once: only its SHA-256 is stored)`);
  db.close();
}

main();
