/**
 * Deploys TestUSDC (or uses an existing USDC) and SkillEscrow to a running node and writes the deployment
 * file the gateway reads. A thin CLI over server/devstack/deploy.ts.
 *
 *   npx hardhat compile
 *   npx hardhat node &                                  # chain id 8453 (or FORK_URL=… to fork Base)
 *   npx ts-node --transpile-only scripts/deploy.ts      # → deployments/localhost.json
 *
 * `npx hardhat run scripts/deploy.ts --network localhost` works too (the script only talks to RPC_URL).
 *
 * Environment (all optional, validated below):
 *   RPC_URL                 node to deploy to                       default http://127.0.0.1:8545
 *   NETWORK                 deployment name → deployments/<NETWORK>.json   default localhost
 *   DEPLOYMENT_FILE         write the file here instead
 *   DEPLOYER_PRIVATE_KEY    sender; default: the node's first unlocked account
 *   SETTLER_ADDRESS         default: the node's second unlocked account
 *   VOUCHER_SIGNER_ADDRESS  default: the node's third unlocked account
 *   TREASURY_ADDRESS, ADMIN_ADDRESS   default: the deployer
 *   USDC_ADDRESS            existing 6-decimal token (e.g. USDC on a Base fork); no TestUSDC is deployed
 *   MINT_USDC               whole test USDC minted to each unlocked node account   default 10000 (0 = none)
 *   PAYMASTER_SIGNER_ADDRESS  also deploy the ERC-4337 contracts embedded wallets need (EntryPoint v0.7 and
 *                           the SimpleAccount factory where missing, a GatewayPaymaster trusting this address)
 *                           and record them in the file's "accountAbstraction" section (npm run serve's BUNDLER_URL)
 *   PAYMASTER_DEPOSIT_WEI   ETH the paymaster's EntryPoint deposit starts with   default 100000000000000000 (0.1)
 */
import { createPublicClient, createWalletClient, defineChain, getAddress, http, isAddress, isHex, type Account, type Address } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { deployAccountAbstraction } from "../server/devstack/aa-deploy";
import { deployContracts, deploymentPath, writeDeployment } from "../server/devstack/deploy";

type Options = {
  rpcUrl: string;
  network: string;
  deploymentFile?: string;
  deployerPrivateKey?: `0x${string}`;
  settler?: Address;
  voucherSigner?: Address;
  treasury?: Address;
  admin?: Address;
  usdc?: Address;
  mintUsdc: bigint;
  paymasterSigner?: Address;
  paymasterDepositWei: bigint;
};

/** Every setting the script takes, read from the environment in one place and validated. */
function readOptions(env: NodeJS.ProcessEnv): Options {
  const address = (name: string): Address | undefined => {
    const value = env[name];
    if (!value) return undefined;
    if (!isAddress(value, { strict: false })) throw new Error(`${name} must be an address, got "${value}"`);
    return getAddress(value);
  };
  const key = env.DEPLOYER_PRIVATE_KEY;
  if (key && !(isHex(key) && key.length === 66)) throw new Error("DEPLOYER_PRIVATE_KEY must be 32 bytes of 0x-hex");
  const mint = env.MINT_USDC ?? "10000";
  if (!/^\d+$/.test(mint)) throw new Error(`MINT_USDC must be a whole number of USDC, got "${mint}"`);
  const depositWei = env.PAYMASTER_DEPOSIT_WEI || "100000000000000000";
  if (!/^\d+$/.test(depositWei)) throw new Error(`PAYMASTER_DEPOSIT_WEI must be a whole number of wei, got "${depositWei}"`);
  return {
    rpcUrl: env.RPC_URL || "http://127.0.0.1:8545",
    network: env.NETWORK || "localhost",
    deploymentFile: env.DEPLOYMENT_FILE || undefined,
    deployerPrivateKey: key as `0x${string}` | undefined,
    settler: address("SETTLER_ADDRESS"),
    voucherSigner: address("VOUCHER_SIGNER_ADDRESS"),
    treasury: address("TREASURY_ADDRESS"),
    admin: address("ADMIN_ADDRESS"),
    usdc: address("USDC_ADDRESS"),
    mintUsdc: BigInt(mint),
    paymasterSigner: address("PAYMASTER_SIGNER_ADDRESS"),
    paymasterDepositWei: BigInt(depositWei),
  };
}

async function main(): Promise<void> {
  const options = readOptions(process.env);
  const transport = http(options.rpcUrl);
  const probe = createPublicClient({ transport });
  const chainId = await probe.getChainId();
  const chain = defineChain({
    id: chainId,
    name: options.network,
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [options.rpcUrl] } },
  });
  const publicClient = createPublicClient({ chain, transport });
  const unlocked = (await createWalletClient({ chain, transport }).getAddresses()).map((a) => getAddress(a));

  const need = (value: Address | undefined, index: number, name: string): Address => {
    const chosen = value ?? unlocked[index];
    if (!chosen) throw new Error(`${name} is not set and the node has no unlocked account #${index} to use`);
    return chosen;
  };
  const account: Account | Address = options.deployerPrivateKey
    ? privateKeyToAccount(options.deployerPrivateKey)
    : need(undefined, 0, "DEPLOYER_PRIVATE_KEY");
  const walletClient = createWalletClient({ chain, transport, account });
  const settler = need(options.settler, 1, "SETTLER_ADDRESS");
  const voucherSigner = need(options.voucherSigner, 2, "VOUCHER_SIGNER_ADDRESS");
  const mint = options.usdc || options.mintUsdc === 0n ? [] : unlocked.map((to) => ({ to, amountMicros: options.mintUsdc * 1_000_000n }));

  const deployment = await deployContracts({
    network: options.network,
    publicClient,
    walletClient,
    settler,
    voucherSigner,
    treasury: options.treasury,
    admin: options.admin,
    usdc: options.usdc,
    mint,
  });
  // Embedded wallets: on a chain without the deterministic deployer (a fresh `hardhat node`) it is put there
  // with hardhat_setCode; a real chain has it, and refuses that call.
  const accountAbstraction = options.paymasterSigner
    ? await deployAccountAbstraction({
        publicClient,
        walletClient,
        setCode: async (address, code) => {
          await publicClient.request({ method: "hardhat_setCode" as never, params: [address, code] as never });
        },
        usdc: deployment.usdc,
        escrow: deployment.escrow,
        paymasterSigner: options.paymasterSigner,
        paymasterDepositWei: options.paymasterDepositWei,
      })
    : undefined;
  const file = options.deploymentFile ?? deploymentPath(options.network);
  writeDeployment(file, accountAbstraction ? { ...deployment, accountAbstraction } : deployment);

  console.log(`Deployed to ${options.rpcUrl} (chain ${deployment.chainId}), block ${deployment.deployBlock}:
  SkillEscrow     ${deployment.escrow}
  USDC            ${deployment.usdc}${deployment.usdcIsTestToken ? ` (TestUSDC, owner ${deployment.deployer})` : ""}
  admin           ${deployment.admin}
  treasury        ${deployment.treasury}
  settler         ${deployment.settler}
  voucher signer  ${deployment.voucherSigner}${
    accountAbstraction
      ? `\n  EntryPoint      ${accountAbstraction.entryPoint}\n  factory         ${accountAbstraction.accountFactory}\n  paymaster       ${accountAbstraction.paymaster} (signer ${accountAbstraction.paymasterSigner})`
      : ""
  }${mint.length ? `\n  minted          ${options.mintUsdc} USDC to each of ${mint.length} node accounts` : ""}
Wrote ${file}`);
}

main().catch((error) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
