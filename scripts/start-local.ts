/**
 * `npm start`: the whole system on its embedded default. Starts a real local chain
 * (`hardhat node`, chain id 8453), deploys the escrow and test USDC, has the demo buyer
 * deposit 10 USDC into the escrow from its own wallet, starts the demo skill backend and
 * the gateway with its deposit indexer, and prints a fresh API key with a ready `curl`.
 * Ctrl-C stops everything, the chain included.
 *
 * Without GitHub/Google OAuth apps configured (GITHUB_CLIENT_ID, GOOGLE_CLIENT_ID), the
 * embedded default runs a local development identity provider in their place
 * (server/devstack/dev-identity-provider.ts), so both sign-ins work offline.
 *
 * With CHAIN_RPC_URL set it uses that chain and the DEPLOYMENT_FILE's contracts instead of
 * starting its own (no demo deposit is made there).
 */
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { type Hex, createPublicClient, createWalletClient, http } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { randomBytes } from "node:crypto";
import { type DevIdentityProvider, startDevIdentityProvider } from "../server/devstack/dev-identity-provider";
import { startLocalAccountAbstraction } from "../server/devstack/aa-local";
import { skillEscrowAbi } from "../server/chain/abi";
import { type Deployment, readDeployment, writeDeployment } from "../server/chain/deployment";
import { DEV_ACCOUNT_INDEX, type LocalNode, devAccount, localChain, startLocalNode } from "../server/devstack/local-node";
import { loadConfig } from "../server/config";
import { exitOnStopSignals } from "../server/ops/shutdown";
import { startDemoBackendThread } from "../server/devstack/demo-backend-thread";
import { deployDemoChain } from "../server/devstack/chain-seed";
import { DEMO_DEPOSIT_USD, seedDemo } from "../server/devstack/seed";
import { startGateway } from "../server/index";
import { SqliteLedgerWriter } from "../server/gateway/ledger-writer";
import { createLogger } from "../server/ops/log";
import { lockDatabase } from "../server/db/lock";
import { microsToUsd, usdToMicros } from "../server/ledger/money";

const ROOT = path.resolve(__dirname, "..");
let startedBundler: { stop(): Promise<void> } | undefined;
let devIdentity: DevIdentityProvider | undefined;

/** Compiles the contracts if they changed (a no-op otherwise), so a fresh clone just works. */
function compileContracts(): void {
  const result = spawnSync(path.join(ROOT, "node_modules/.bin/hardhat"), ["compile", "--quiet"], { cwd: ROOT, stdio: "inherit" });
  if (result.status !== 0) throw new Error("hardhat compile failed");
}

async function main(): Promise<void> {
  let config = loadConfig(process.env);
  let node: LocalNode | undefined;
  let deployment: Deployment;
  let rpcUrl = config.chainRpcUrl;

  if (!rpcUrl) {
    compileContracts();
    node = await startLocalNode({ port: config.chainPort });
    rpcUrl = node.rpcUrl;
  }
  try {
    if (node && (!config.githubClientId || !config.googleClientId)) {
      // No OAuth apps on the embedded default: a local provider stands in for GitHub and Google.
      devIdentity = await startDevIdentityProvider({ github: !config.githubClientId, google: !config.googleClientId });
      config = loadConfig(process.env, devIdentity.settings);
    }
    if (node) {
      deployment = (await deployDemoChain(node, usdToMicros(DEMO_DEPOSIT_USD))).deployment;
      writeDeployment(path.resolve(ROOT, config.deploymentFile), deployment);
      // A fresh chain forgets everything on exit, so the ledger starts fresh with it: a
      // ledger holding deposits of a chain that no longer exists would credit money nobody
      // has. The lock makes sure no running gateway is using the file being removed.
      lockDatabase(config.dbPath);
      for (const suffix of ["", "-wal", "-shm"]) fs.rmSync(config.dbPath + suffix, { force: true });
    } else {
      deployment = readDeployment(path.resolve(ROOT, config.deploymentFile));
    }
    await serve(config, node, rpcUrl, deployment);
  } catch (error) {
    // The chain and the bundler are child processes: they must not outlive a start that failed half-way.
    await startedBundler?.stop();
    await devIdentity?.stop();
    await node?.stop();
    throw error;
  }
}

async function serve(
  config: ReturnType<typeof loadConfig>,
  node: LocalNode | undefined,
  rpcUrl: string,
  deployment: Deployment,
): Promise<void> {
  const publicClient = node?.publicClient ?? createPublicClient({ chain: localChain(rpcUrl, deployment.chainId), transport: http(rpcUrl) });
  // On a thread of its own: the seller's server does not share the gateway's event loop.
  const backend = await startDemoBackendThread();
  // On the embedded chain the settler and voucher signer are development accounts; on
  // another chain they are SETTLER_PRIVATE_KEY and VOUCHER_SIGNER_PRIVATE_KEY, and without
  // them the gateway indexes deposits and bills calls but settles and signs nothing.
  const chain = localChain(rpcUrl, deployment.chainId);
  const walletOf = (key: string, devIndex: number) => {
    if (node) return node.walletFor(devAccount(devIndex));
    return key ? createWalletClient({ account: privateKeyToAccount(key as Hex), chain, transport: http(rpcUrl) }) : undefined;
  };
  // Embedded wallets on the embedded chain: the ERC-4337 contracts at their canonical
  // addresses, the gateway's paymaster, and the real Alto bundler.
  const aaStack = node ? await startAccountAbstraction(node, deployment) : undefined;
  // The demo backend is on loopback, which the egress policy refuses to every other skill: its
  // origin, and only it, is added to the operator's SKILL_BACKEND_ALLOWLIST.
  config = { ...config, skillBackendAllowlist: [...config.skillBackendAllowlist, backend.url] };
  const gateway = await startGateway(config, {
    // Readable lines in a terminal; JSON lines, as in production, when the output goes elsewhere.
    logger: createLogger({ level: config.logLevel, pretty: process.stdout.isTTY === true }),
    // No mail server here: a sign-in link asked for on the dashboard is printed for you to open.
    outboxEcho: (mail) => console.log(`\n[mail] to ${mail.to}: ${mail.subject}\n${mail.text}\n`),
    wallets: aaStack && {
      chain: { client: node!.publicClient, aa: aaStack.aa, bundlerUrl: aaStack.bundler.url },
      aa: aaStack.aa,
      usdc: deployment.usdc,
      escrow: deployment.escrow,
      paymasterSigner: aaStack.paymasterSigner,
      // A fresh ledger each start, so a fresh key will do unless one is configured.
      encryptionKey: config.walletEncryptionKey || `0x${randomBytes(32).toString("hex")}`,
      minimumMicros: aaStack.minDepositMicros,
    },
    chain: {
      publicClient,
      escrowAddress: deployment.escrow,
      chainId: deployment.chainId,
      deployBlock: deployment.deployBlock,
      voucherSigner: walletOf(config.voucherSignerPrivateKey, DEV_ACCOUNT_INDEX.voucherSigner),
      settlerWallet: walletOf(config.settlerPrivateKey, DEV_ACCOUNT_INDEX.settler),
      // x402 payments are settled with a key of their own (SETTLER_ROLE too), so they never race the batches' nonces.
      x402Wallet: walletOf(config.x402SettlerPrivateKey, DEV_ACCOUNT_INDEX.x402Settler),
      // Card top-ups (sandbox) are funded with test USDC the deployer mints: local chain only.
      fundingWallet: node?.walletFor(devAccount(DEV_ACCOUNT_INDEX.deployer)),
    },
  });
  // The gateway's redirect URIs are built on PUBLIC_URL, else its loopback address (server/http/public-url.ts).
  const signInBase = config.publicUrl.replace(/\/+$/, "") || gateway.url.replace(/\/\/(0\.0\.0\.0|\[::\]):/, "//127.0.0.1:");
  devIdentity?.serve([signInBase]);
  const { buyerId } = await seedDemo(gateway, backend, {
    buyer: devAccount(DEV_ACCOUNT_INDEX.demoBuyer).address,
    seller: devAccount(DEV_ACCOUNT_INDEX.demoSeller).address,
  });
  const moneyPath = gateway.moneyPath!;
  // Index what is already on-chain (the demo deposit) before printing the balance.
  await moneyPath.indexer.poll();
  // The deposit indexer, the settler, voucher expiry, and the wallet sweeper: USDC sent to an embedded
  // wallet is moved into the escrow (a sponsored UserOperation).
  gateway.startBackground({ walletSweepIntervalMs: 3_000 });

  // The owner's own demo key, shown only on their terminal: it calls, reads the account's books and makes withdrawal
  // vouchers (the examples in docs/ do all three). Keys made later get the least, calls (docs/keys.md).
  const { key } = await gateway.keys.create(buyerId, { name: "npm start", scopes: ["calls", "usage:read", "funds:withdraw"] });
  const balance = await gateway.ledger.balance(buyerId);
  const body = JSON.stringify({ skill_id: "echo", input: { hello: "world" } });
  console.log(`
Skill Gateway is running.

Gateway:       ${gateway.url}
Dashboard:     ${gateway.url}/  (sign in with e-mail: the link is printed here)
Demo backend:  ${backend.url}
Bundler:       ${aaStack ? `${aaStack.bundler.url} (Alto, EntryPoint v0.7; every account that signs in gets an embedded wallet)` : "none"}
Chain RPC:     ${rpcUrl} (chain id ${deployment.chainId}${node ? ", a local hardhat node started for this run" : ""})
Escrow:        ${deployment.escrow}
USDC:          ${deployment.usdc}${deployment.usdcIsTestToken ? " (test token)" : ""}
Database:      ${config.dbPath}  (fee mode ${config.feeMode}, ${Number(config.feeBps) / 100}% platform fee; calls' ledger writes ${gateway.holds instanceof SqliteLedgerWriter ? "on a writer thread" : "on the event loop"}, SQLITE_LEDGER_WRITER)
Demo buyer:    ${buyerId} (${devAccount(DEV_ACCOUNT_INDEX.demoBuyer).address}), balance ${microsToUsd(balance.availableMicros)} USDC, deposited on-chain
Skills:        ${gateway.skills
    .list()
    .map((s) => `${s.slug} (${microsToUsd(s.priceMicros)} USD)`)
    .join(", ")}
${config.metricsToken ? `Metrics:       curl -s ${gateway.url}/metrics -H "Authorization: Bearer $METRICS_TOKEN"\n` : ""}${devIdentity ? `Sign-in:       ${signInLine(signInBase, devIdentity.settings)}\n` : ""}${gateway.recovered.holds > 0 ? `Recovered:     released ${gateway.recovered.holds} hold(s) left open by a previous crash\n` : ""}
API key: ${key}

Try it:
curl -s ${gateway.url}/v1/call -H "Authorization: Bearer ${key}" -H "Content-Type: application/json" -d '${body}'

${
  gateway.x402
    ? `Or pay per call with x402, no account (any x402 v2 client, e.g. @x402/fetch; see the README):
curl -si ${gateway.url}/x402/skills/echo/call -H "Content-Type: application/json" -d '{"text":"hi"}'   (402 + PAYMENT-REQUIRED)
Payable skills: ${gateway.url}/x402/discovery/resources
${node ? `Fund a payer:  npm run fund -- <address> <usd>   (test USDC ${deployment.usdc}; a plain-JavaScript client: docs/clients.md)\n` : ""}
`
    : ""
}Or give an agent its skills with the command-line client (clients/cli), in the agent's project:
export SKILL_GATEWAY_URL=${gateway.url} SKILL_GATEWAY_API_KEY=${key}
node ${path.join(ROOT, "clients/cli/bin/skill-gateway.cjs")} add echo   (then: call echo --input '{"hi":1}', list, remove echo, mcp)

Press Ctrl-C to stop.`);

  // Each part in turn, all within SHUTDOWN_DEADLINE_MS: what has not stopped by then is named, and the process exits.
  const identityProvider = devIdentity;
  exitOnStopSignals(() => [
    { name: "the gateway", stop: () => gateway.close() },
    ...(aaStack ? [{ name: "the bundler", stop: () => aaStack.bundler.stop() }] : []),
    { name: "the demo backend", stop: () => backend.close() },
    ...(identityProvider ? [{ name: "the dev identity provider", stop: () => identityProvider.stop() }] : []),
    ...(node ? [{ name: "the local chain", stop: () => node.stop() }] : []),
  ]);
}

main().catch((error) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});

/** The ERC-4337 stack on the local chain (server/devstack/aa-local.ts), and the escrow's minimum deposit. */
async function startAccountAbstraction(node: LocalNode, deployment: Deployment) {
  const local = await startLocalAccountAbstraction(node, deployment);
  startedBundler = local.bundler;
  const minDepositMicros = await node.publicClient.readContract({
    address: deployment.escrow,
    abi: skillEscrowAbi,
    functionName: "minDeposit",
  });
  return { ...local, minDepositMicros };
}

/** Where to sign in through the local stand-in, for the providers it stands in for. */
function signInLine(gatewayUrl: string, settings: DevIdentityProvider["settings"]): string {
  const stand = [settings.githubClientId && "GitHub", settings.googleClientId && "Google"].filter(Boolean).join(" and ");
  const paths = [settings.githubClientId && "/auth/github/start", settings.googleClientId && "/auth/google/start"].filter(
    Boolean,
  ) as string[];
  return `${gatewayUrl}${paths.join(" and ")} (a local development provider stands in for ${stand})`;
}
