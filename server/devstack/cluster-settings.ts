import { configEnvNames, loadConfig } from "../config";

/**
 * Which of a person's gateway settings `npm run start:cluster` hands its replicas. Every setting server/config.ts reads
 * (configEnvNames: the list comes from the config itself) is passed through to every replica as `npm start` honours
 * it, except those the cluster must set itself for the cluster to work at all: those are listed here, each with why,
 * and a person's value for one of them is ignored (and named as ignored), never allowed to break the cluster.
 */

/** The settings the cluster sets itself (or leaves off), whatever the environment says, and why. */
export const CLUSTER_OWNED_SETTINGS: Readonly<Record<string, string>> = {
  HOST: "the replicas listen on 127.0.0.1: a development cluster stays on loopback",
  PORT: "each replica listens on a free port of its own",
  REPLICA_ID: "the replicas are named replica-1, replica-2, ...",
  DATABASE_URL: "the replicas share the throwaway PostgreSQL the cluster starts",
  REDIS_URL: "the replicas share the throwaway Redis the cluster starts",
  DB_PATH: "the ledger is on PostgreSQL, not in a SQLite file",
  CHAIN_RPC_URL: "the cluster starts a chain of its own",
  CHAIN_PORT: "the cluster's chain listens on a free port",
  DEPLOYMENT_FILE: "the contracts are those the cluster deploys on its chain",
  DEPOSIT_CONFIRMATIONS: "0: the cluster's chain has no reorgs and mines a block only for a transaction",
  SETTLER_PRIVATE_KEY: "the development account the cluster's escrow grants the settler role",
  VOUCHER_SIGNER_PRIVATE_KEY: "the development account the cluster's escrow grants the voucher signer role",
  X402_SETTLER_PRIVATE_KEY: "one development account per replica, each with the settler role",
  FUNDING_PRIVATE_KEY: "card top-ups are off in the cluster",
  BUNDLER_URL: "embedded wallets are off in the cluster (no bundler)",
  PAYMASTER_SIGNER_PRIVATE_KEY: "embedded wallets are off in the cluster (no bundler)",
  WALLET_ENCRYPTION_KEY: "embedded wallets are off in the cluster (no bundler)",
};

/** What a person's environment gives the cluster's replicas. */
export interface ClusterUserSettings {
  /** The settings every replica gets, by name (values may be secrets: never print them). */
  passed: Record<string, string>;
  /** Names of settings that were set but are the cluster's own (CLUSTER_OWNED_SETTINGS), so ignored. */
  ignored: string[];
}

/**
 * The gateway settings set (non-empty: every setting reads empty as unset) in `env`, split into those passed to the
 * replicas and those ignored. Throws the config's own ConfigError for a value the replicas would refuse, so a
 * mistake stops `npm run start:cluster` before it starts anything.
 */
export function clusterUserSettings(env: Record<string, string | undefined>): ClusterUserSettings {
  const passed: Record<string, string> = {};
  const ignored: string[] = [];
  for (const name of configEnvNames()) {
    const value = env[name];
    if (value === undefined || value === "") continue;
    if (Object.hasOwn(CLUSTER_OWNED_SETTINGS, name)) ignored.push(name);
    else passed[name] = value;
  }
  // The replicas' own checks beyond loadConfig's (loadServeConfig) are all about the cluster's own settings.
  loadConfig(passed);
  return { passed, ignored };
}
