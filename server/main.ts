/**
 * `npm run serve`: the gateway alone, against infrastructure that already runs. It is given a chain
 * (CHAIN_RPC_URL), the contracts deployed on it (DEPLOYMENT_FILE), the keys of the roles it plays there, a
 * database, and for embedded wallets an ERC-4337 bundler and the paymaster's key; server/config.ts's
 * loadServeConfig lists them.
 *
 * Unlike `npm start` (scripts/start-local.ts, the one-command demo) it never starts a chain, a bundler or a
 * development identity provider, never deploys, never seeds, and never deletes data: it opens the database
 * it is pointed at (creating it the first time) and carries on from whatever that ledger holds.
 *
 * Before it opens the database it checks that everything it was given fits together, and refuses to start,
 * with one line naming the setting and exit code 78 (EX_CONFIG), when something does not: a missing or
 * malformed setting, a deployment file for another chain or whose contracts are not there, a key that is
 * not the one the deployment gave the role to, a paymaster or bundler that is not wired for this escrow.
 * SIGTERM or SIGINT lets the requests in flight finish, then closes the ledger and exits 0.
 */
import {
  type Account,
  type Chain,
  type Hex,
  type HttpTransport,
  type PublicClient,
  type WalletClient,
  createPublicClient,
  createWalletClient,
  defineChain,
  getAddress,
  http,
} from "viem";
import { type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts";
import { skillEscrowAbi } from "./chain/abi";
import { type Deployment, DeploymentFileError, readDeployment, verifyDeployment } from "./chain/deployment";
import { type Config, ConfigError, loadServeConfig } from "./config";
import { type GatewayOptions, type RunningGateway, startGateway } from "./index";
import { DatabaseLockedError } from "./db/lock";
import { exitOnStopSignals } from "./ops/shutdown";
import { ReplicaRefusedError } from "./db/postgres/replicas";
import { type AaDeployment, verifyAccountAbstraction, verifyBundler } from "./wallets/aa";

/** The exit code of a refusal: sysexits' EX_CONFIG, so a supervisor can tell it from a crash and not loop. */
export const EXIT_REFUSED = 78;

/** A start refused because the configuration does not fit the infrastructure; the message names the setting. */
class StartRefused extends Error {
  override name = "StartRefused";
}

/** How long a check of the chain or the bundler may take before the start is refused. */
const CHECK_TIMEOUT_MS = 15_000;

/** The first line of an error's message (viem's run to several): a refusal is one line. */
function firstLine(error: unknown): string {
  const message = (error as { shortMessage?: string }).shortMessage ?? (error instanceof Error ? error.message : String(error));
  return message.split("\n")[0].trim();
}

/** The key's account, after checking that it is the address `role` was given in the deployment file. */
function roleKey(setting: string, key: string, role: string, expected: string): PrivateKeyAccount {
  const account = privateKeyToAccount(key as Hex);
  if (account.address !== getAddress(expected)) {
    throw new StartRefused(`${setting} is the key of ${account.address}, but the deployment file's ${role} is ${getAddress(expected)}`);
  }
  return account;
}

/** Everything main() checked and built before it opens the database. */
interface Checked {
  deployment: Deployment;
  publicClient: PublicClient<HttpTransport, Chain>;
  options: GatewayOptions;
  /** What is on and off, for the start-up summary (addresses only: never a key). */
  summary: string[];
}

/**
 * Reads the deployment file and asks the chain (and the bundler) whether the configuration fits: the refusals
 * of `npm run serve`. Opens nothing, writes nothing.
 */
export async function check(config: Config): Promise<Checked> {
  let deployment: Deployment;
  try {
    deployment = readDeployment(config.deploymentFile);
  } catch (error) {
    if (error instanceof DeploymentFileError) throw new StartRefused(`DEPLOYMENT_FILE: ${error.message}`);
    throw error;
  }
  const chain = defineChain({
    id: deployment.chainId,
    name: deployment.network,
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [config.chainRpcUrl] } },
  });
  // The start-up checks fail fast; the gateway's own client retries, as a long-running process should.
  const probe = createPublicClient({ chain, transport: http(config.chainRpcUrl, { retryCount: 0, timeout: CHECK_TIMEOUT_MS }) });
  const publicClient = createPublicClient({ chain, transport: http(config.chainRpcUrl) });
  let verified: Awaited<ReturnType<typeof verifyDeployment>>;
  try {
    verified = await verifyDeployment(probe, deployment);
  } catch (error) {
    throw new StartRefused(`CHAIN_RPC_URL: ${config.chainRpcUrl} did not answer the deployment check (${firstLine(error)})`);
  }
  if (!verified.ok) {
    throw new StartRefused(`DEPLOYMENT_FILE ${config.deploymentFile} does not match the chain at CHAIN_RPC_URL: ${verified.reason}`);
  }

  const walletFor = (account: Account): WalletClient<HttpTransport, Chain, Account> =>
    createWalletClient({ account, chain, transport: http(config.chainRpcUrl) });
  const settler = roleKey("SETTLER_PRIVATE_KEY", config.settlerPrivateKey, "settler", deployment.settler);
  const voucherSigner = roleKey("VOUCHER_SIGNER_PRIVATE_KEY", config.voucherSignerPrivateKey, "voucherSigner", deployment.voucherSigner);
  let x402Settler: PrivateKeyAccount | undefined;
  if (config.x402SettlerPrivateKey) {
    x402Settler = privateKeyToAccount(config.x402SettlerPrivateKey as Hex);
    if (x402Settler.address === settler.address) {
      throw new StartRefused("X402_SETTLER_PRIVATE_KEY must not be SETTLER_PRIVATE_KEY: the two would race for the same nonces");
    }
    let holds: boolean;
    try {
      const role = await probe.readContract({ address: deployment.escrow, abi: skillEscrowAbi, functionName: "SETTLER_ROLE" });
      holds = await probe.readContract({
        address: deployment.escrow,
        abi: skillEscrowAbi,
        functionName: "hasRole",
        args: [role, x402Settler.address],
      });
    } catch (error) {
      throw new StartRefused(`CHAIN_RPC_URL: ${config.chainRpcUrl} did not answer the x402 key's check (${firstLine(error)})`);
    }
    if (!holds)
      throw new StartRefused(
        `X402_SETTLER_PRIVATE_KEY is the key of ${x402Settler.address}, which does not hold the escrow's SETTLER_ROLE`,
      );
  }
  const summary = [
    `Chain RPC:        ${config.chainRpcUrl} (chain id ${deployment.chainId})`,
    `Escrow:           ${deployment.escrow}`,
    `USDC:             ${deployment.usdc}${deployment.usdcIsTestToken ? " (test token)" : ""}`,
    `Settler:          ${settler.address}`,
    `Voucher signer:   ${voucherSigner.address}`,
    x402Settler ? `x402 payments:    on (settled by ${x402Settler.address})` : "x402 payments:    off (no X402_SETTLER_PRIVATE_KEY)",
  ];

  // Card top-ups mint test USDC to the funding wallet: only a test token's owner can fund them.
  let fundingWallet: WalletClient<HttpTransport, Chain, Account> | undefined;
  if (config.fundingPrivateKey) {
    if (!deployment.usdcIsTestToken) {
      throw new StartRefused(
        `FUNDING_PRIVATE_KEY funds sandbox card top-ups by minting test USDC, but the deployment's token ${deployment.usdc} is not a test token`,
      );
    }
    fundingWallet = walletFor(
      roleKey("FUNDING_PRIVATE_KEY", config.fundingPrivateKey, "deployer (the test token's owner)", deployment.deployer),
    );
  }
  summary.push(
    `Card top-ups:     ${fundingWallet ? `sandbox, funded by ${fundingWallet.account.address}` : "off (no FUNDING_PRIVATE_KEY)"}`,
  );

  let wallets: GatewayOptions["wallets"];
  if (config.bundlerUrl) {
    const addresses = deployment.accountAbstraction;
    if (!addresses) {
      throw new StartRefused(
        `DEPLOYMENT_FILE ${config.deploymentFile} has no "accountAbstraction" section, which embedded wallets (BUNDLER_URL) need`,
      );
    }
    const aa: AaDeployment = addresses;
    const paymasterSigner = roleKey(
      "PAYMASTER_SIGNER_PRIVATE_KEY",
      config.paymasterSignerPrivateKey,
      "paymasterSigner",
      aa.paymasterSigner,
    );
    let minimumMicros: bigint;
    try {
      const onChain = await verifyAccountAbstraction(probe, aa, { usdc: deployment.usdc, escrow: deployment.escrow });
      if (!onChain.ok) {
        throw new StartRefused(`DEPLOYMENT_FILE ${config.deploymentFile}'s accountAbstraction does not match the chain: ${onChain.reason}`);
      }
      minimumMicros = await probe.readContract({ address: deployment.escrow, abi: skillEscrowAbi, functionName: "minDeposit" });
    } catch (error) {
      if (error instanceof StartRefused) throw error;
      throw new StartRefused(`CHAIN_RPC_URL: ${config.chainRpcUrl} did not answer the embedded wallets' check (${firstLine(error)})`);
    }
    const bundler = await verifyBundler(config.bundlerUrl, { chainId: deployment.chainId, entryPoint: aa.entryPoint }, CHECK_TIMEOUT_MS);
    if (!bundler.ok) throw new StartRefused(`BUNDLER_URL ${config.bundlerUrl}: ${bundler.reason}`);
    wallets = {
      chain: { client: publicClient, aa, bundlerUrl: config.bundlerUrl },
      aa,
      usdc: deployment.usdc,
      escrow: deployment.escrow,
      paymasterSigner,
      encryptionKey: config.walletEncryptionKey,
      minimumMicros,
    };
    summary.push(`Embedded wallets: on (bundler ${config.bundlerUrl}, paymaster ${aa.paymaster})`);
  } else {
    summary.push("Embedded wallets: off (no BUNDLER_URL): e-mail and OAuth accounts get no wallet");
  }

  return {
    deployment,
    publicClient,
    summary,
    options: {
      chain: {
        publicClient: publicClient as PublicClient,
        escrowAddress: deployment.escrow,
        chainId: deployment.chainId,
        deployBlock: deployment.deployBlock,
        settlerWallet: walletFor(settler),
        voucherSigner: walletFor(voucherSigner),
        x402Wallet: x402Settler && walletFor(x402Settler),
        fundingWallet,
      },
      wallets,
    },
  };
}

async function main(): Promise<void> {
  const config = loadServeConfig();
  const checked = await check(config);
  const gateway: RunningGateway = await startGateway(config, checked.options);
  // On SQLite: the indexer, settler, voucher expiry and wallet sweeper start now. Sharing PostgreSQL: this
  // replica contends for the settlement lease and runs them while it holds it.
  gateway.startBackground({ walletSweepIntervalMs: config.walletSweepIntervalMs });

  const recovered =
    gateway.recovered.holds > 0 ? [`Recovered:        released ${gateway.recovered.holds} hold(s) left open by the last run`] : [];
  console.log(
    [
      "Skill Gateway is serving.",
      "",
      `Gateway:          ${gateway.url}`,
      `Database:         ${config.databaseUrl ? `PostgreSQL (DATABASE_URL), replica ${config.replicaId}` : config.dbPath} (fee mode ${config.feeMode}, ${Number(config.feeBps) / 100}% platform fee)`,
      `Shared limits:    ${config.redisUrl ? "Redis (REDIS_URL)" : "in this process (no REDIS_URL)"}`,
      ...checked.summary,
      `E-mail:           ${config.smtpUrl ? "SMTP" : "the outbox table (no SMTP_URL)"}`,
      `Skills:           ${gateway.skills.list().length} listed`,
      ...recovered,
    ].join("\n"),
  );

  // Within SHUTDOWN_DEADLINE_MS: a request or a part still busy at the deadline is named in the log, and the process
  // exits 1 without it (the ledger's writes are transactions: an unfinished one is rolled back, never half-written).
  exitOnStopSignals(() => [{ name: "the gateway (requests in flight, then the ledger)", stop: () => gateway.close() }], {
    onSignal: (signal) => console.log(`${signal}: letting requests in flight finish, then closing the ledger`),
  });
}

/**
 * The one line `npm run serve` prints for a start it refuses (exit EXIT_REFUSED), or undefined for a failure that
 * is not a refusal. A second gateway on the same SQLite ledger is refused too (its message names DB_PATH), and a
 * second replica on PostgreSQL when either has no REDIS_URL (its message says so).
 */
export function refusalLine(error: unknown): string | undefined {
  const refused =
    error instanceof ConfigError ||
    error instanceof StartRefused ||
    error instanceof DatabaseLockedError ||
    error instanceof ReplicaRefusedError;
  return refused ? `npm run serve refused to start: ${firstLine(error)}` : undefined;
}

if (require.main === module) {
  main().catch((error) => {
    const refusal = refusalLine(error);
    if (refusal !== undefined) {
      console.error(refusal);
      process.exit(EXIT_REFUSED);
    }
    console.error(`npm run serve failed to start: ${firstLine(error)}`);
    if (error instanceof Error && error.stack) console.error(error.stack);
    process.exit(1);
  });
}
