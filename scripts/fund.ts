/**
 * `npm run fund -- <address> <usd>`: gives an x402 payer test USDC on the local chain `npm start` runs, minted by
 * the token's owner (the chain's deployer account), so that a wallet of your own can pay for calls with x402 (see
 * docs/clients.md, "Paying with x402 from JavaScript"). The payer needs no ETH: the gateway sends the transactions.
 *
 * Local chain only: it refuses a CHAIN_RPC_URL that is not on this machine, and a token that has no owner-only
 * `mint` (real USDC) refuses the transaction anyway.
 */
import path from "node:path";
import {
  type Address,
  type Hash,
  type PublicClient,
  type WalletClient,
  createPublicClient,
  createWalletClient,
  http,
  isAddress,
  parseAbi,
} from "viem";
import { loadConfig } from "../server/config";
import { readDeployment } from "../server/chain/deployment";
import { DEV_ACCOUNT_INDEX, devAccount, localChain } from "../server/devstack/local-node";
import { microsToUsd, usdToMicros } from "../server/ledger/money";

const ROOT = path.resolve(__dirname, "..");
const TOKEN_ABI = parseAbi(["function mint(address to, uint256 amount)", "function balanceOf(address account) view returns (uint256)"]);
/** The most one run mints: a test payer needs cents, and a typo of a few zeros should not pass. */
export const FUND_MAX_MICROS = 1_000_000_000n; // 1,000 USDC

export interface FundArguments {
  to: Address;
  amountMicros: bigint;
}

/** Parses `<address> <usd>`, or throws an Error whose message is the one line to print. */
export function parseFundArguments(argv: readonly string[]): FundArguments {
  const usage = "usage: npm run fund -- <address> <usd>   (e.g. npm run fund -- 0x70997970C51812dc3A010C7d01b50e0d17dc79C8 5)";
  if (argv.length !== 2) throw new Error(usage);
  const [to, usd] = argv;
  if (!isAddress(to, { strict: false })) throw new Error(`${JSON.stringify(to)} is not an address (0x and 40 hex digits). ${usage}`);
  let amountMicros: bigint;
  try {
    amountMicros = usdToMicros(usd);
  } catch {
    throw new Error(`${JSON.stringify(usd)} is not a USD amount with at most 6 decimals. ${usage}`);
  }
  if (amountMicros <= 0n) throw new Error(`The amount must be above 0, not ${usd}.`);
  if (amountMicros > FUND_MAX_MICROS) throw new Error(`At most $${microsToUsd(FUND_MAX_MICROS)} per run, not $${usd}.`);
  return { to, amountMicros };
}

export interface FundParameters extends FundArguments {
  publicClient: PublicClient;
  /** The token's owner: the only account its `mint` accepts. */
  walletClient: WalletClient;
  usdc: Address;
}

/** Mints `amountMicros` of test USDC to `to` and returns the transaction and the payer's balance after it. */
export async function fundPayer(parameters: FundParameters): Promise<{ txHash: Hash; balanceMicros: bigint }> {
  const { publicClient, walletClient, usdc, to, amountMicros } = parameters;
  const txHash = await walletClient.writeContract({
    address: usdc,
    abi: TOKEN_ABI,
    functionName: "mint",
    args: [to, amountMicros],
    account: walletClient.account!,
    chain: walletClient.chain,
  });
  const receipt = await publicClient.waitForTransactionReceipt({ hash: txHash });
  if (receipt.status !== "success") throw new Error(`The mint ${txHash} reverted: is ${usdc} the local chain's test USDC?`);
  const balanceMicros = await publicClient.readContract({ address: usdc, abi: TOKEN_ABI, functionName: "balanceOf", args: [to] });
  return { txHash, balanceMicros };
}

/** True for an http(s) URL on this machine. */
export function isLoopbackUrl(url: string): boolean {
  try {
    return ["127.0.0.1", "localhost", "[::1]"].includes(new URL(url).hostname);
  } catch {
    return false;
  }
}

async function main(): Promise<void> {
  const { to, amountMicros } = parseFundArguments(process.argv.slice(2));
  const config = loadConfig();
  const rpcUrl = config.chainRpcUrl || `http://127.0.0.1:${config.chainPort}`;
  if (!isLoopbackUrl(rpcUrl)) {
    throw new Error(`CHAIN_RPC_URL is ${rpcUrl}: npm run fund mints test USDC on the local chain npm start runs, not on another chain.`);
  }
  const deploymentFile = path.resolve(ROOT, config.deploymentFile);
  let deployment: ReturnType<typeof readDeployment>;
  try {
    deployment = readDeployment(deploymentFile);
  } catch (error) {
    throw new Error(`No deployment at ${deploymentFile} (${(error as Error).message}): start the local chain with npm start first.`);
  }
  const chain = localChain(rpcUrl, deployment.chainId);
  const publicClient = createPublicClient({ chain, transport: http(rpcUrl) });
  try {
    await publicClient.getChainId();
  } catch {
    throw new Error(`No chain answers at ${rpcUrl}: start it with npm start (it runs the local chain and the gateway).`);
  }
  const walletClient = createWalletClient({ account: devAccount(DEV_ACCOUNT_INDEX.deployer), chain, transport: http(rpcUrl) });
  const { txHash, balanceMicros } = await fundPayer({ publicClient, walletClient, usdc: deployment.usdc, to, amountMicros });
  process.stdout.write(
    [
      `Minted $${microsToUsd(amountMicros)} of test USDC to ${to} (transaction ${txHash}); it now holds $${microsToUsd(balanceMicros)}.`,
      `The token, for an x402 client's allowed assets: USDC_ADDRESS=${deployment.usdc} (network eip155:${deployment.chainId}).`,
      "",
    ].join("\n"),
  );
}

if (require.main === module) {
  main().catch((error: Error) => {
    process.stderr.write(`fund: ${error.message}\n`);
    process.exitCode = 1;
  });
}
