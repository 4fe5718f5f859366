/**
 * Deploys the escrow (and, on a local chain, the test USDC) with plain viem clients: no Hardhat runtime, so
 * the gateway process can call it against a running `hardhat node` and scripts/deploy.ts can call it from
 * the command line. Reads the compiled artifacts from `artifacts/contracts/…` (run `npx hardhat compile`).
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import {
  erc20Abi,
  getAddress,
  keccak256,
  toHex,
  type Abi,
  type Account,
  type Address,
  type Chain,
  type Hash,
  type Hex,
  type PublicClient,
  type TransactionReceipt,
  type Transport,
  type WalletClient,
} from "viem";
import type { Deployment } from "../chain/deployment";

export {
  DEFAULT_DEPLOYMENTS_DIR,
  DeploymentFileError,
  deploymentPath,
  parseDeployment,
  readDeployment,
  serializeDeployment,
  verifyDeployment,
  writeDeployment,
  type Deployment,
  type VerifyDeploymentReturnType,
} from "../chain/deployment";

/** `<repo>/artifacts`, where `npx hardhat compile` writes. */
export const DEFAULT_ARTIFACTS_DIR = path.resolve(__dirname, "../../artifacts");

export const SETTLER_ROLE: Hex = keccak256(toHex("SETTLER_ROLE"));
export const VOUCHER_SIGNER_ROLE: Hex = keccak256(toHex("VOUCHER_SIGNER_ROLE"));
export const DEFAULT_ADMIN_ROLE: Hex = `0x${"00".repeat(32)}`;

export type ContractName = "SkillEscrow" | "TestUSDC";

/** The parts of a Hardhat artifact that deployment needs. */
export type ContractArtifact = { contractName: ContractName; abi: Abi; bytecode: Hex };

// Internal error, plain on purpose: a deployment script's failure, never a client's answer.
/** Deployment failed: missing artifacts, a bad token address, a reverted transaction. */
export class DeployError extends Error {
  override name = "DeployError";
}

/** Reads `artifacts/contracts/<name>.sol/<name>.json`. */
export function loadArtifact(contractName: ContractName, artifactsDir: string = DEFAULT_ARTIFACTS_DIR): ContractArtifact {
  const file = path.join(artifactsDir, "contracts", `${contractName}.sol`, `${contractName}.json`);
  let json: { abi?: unknown; bytecode?: unknown };
  try {
    json = JSON.parse(readFileSync(file, "utf8"));
  } catch (error) {
    const reason = (error as Error).message;
    throw new DeployError(`cannot read the ${contractName} artifact at ${file} (run \`npx hardhat compile\`): ${reason}`);
  }
  const { abi, bytecode } = json;
  if (!Array.isArray(abi) || typeof bytecode !== "string" || !bytecode.startsWith("0x") || bytecode === "0x") {
    throw new DeployError(`${file} is not a compiled contract artifact`);
  }
  return { contractName, abi: abi as Abi, bytecode: bytecode as Hex };
}

export type DeployContractsParameters = {
  /** Names the deployment (and its file): "localhost", "base-fork", … */
  network: string;
  publicClient: Pick<PublicClient, "getChainId" | "getCode" | "readContract" | "waitForTransactionReceipt">;
  /** Sends every transaction. Holds the admin role during deployment. */
  walletClient: WalletClient<Transport, Chain | undefined, Account>;
  /** Receives SETTLER_ROLE: the gateway's batch-posting key. */
  settler: Address;
  /** Receives VOUCHER_SIGNER_ROLE: the gateway's voucher-signing key. */
  voucherSigner: Address;
  /** Receive SETTLER_ROLE too: the keys that move x402 payments (collectX402, completeX402, refundX402), one per gateway replica. */
  x402Settlers?: readonly Address[];
  /** Receiver of platform fees; the deployer by default. */
  treasury?: Address;
  /** Final holder of DEFAULT_ADMIN_ROLE; the deployer by default. If another address, the deployer renounces. */
  admin?: Address;
  /** An existing USDC (a fork of Base, say). Without it a TestUSDC is deployed, owned by the deployer. */
  usdc?: Address;
  /** Test USDC to mint right away, in base units. Only when a TestUSDC is deployed. */
  mint?: readonly { to: Address; amountMicros: bigint }[];
  artifactsDir?: string;
};

export type DeployContractsReturnType = Deployment;
export type DeployContractsErrorType = DeployError;

/**
 * Deploys TestUSDC (unless `usdc` is given) and SkillEscrow, grants the settler and voucher-signer roles,
 * optionally hands the admin role over, mints test funds, and returns the deployment record to write with
 * `writeDeployment`. Waits for every receipt and throws DeployError if any transaction fails.
 */
export async function deployContracts(parameters: DeployContractsParameters): Promise<DeployContractsReturnType> {
  const { network, publicClient, walletClient, settler, voucherSigner, artifactsDir } = parameters;
  const deployer = getAddress(walletClient.account.address);
  const admin = getAddress(parameters.admin ?? deployer);
  const treasury = getAddress(parameters.treasury ?? deployer);
  const escrowArtifact = loadArtifact("SkillEscrow", artifactsDir);
  const chainId = await publicClient.getChainId();

  const confirm = async (what: string, hash: Hash): Promise<TransactionReceipt> => {
    const receipt = await publicClient.waitForTransactionReceipt({ hash });
    if (receipt.status !== "success") throw new DeployError(`${what} failed (transaction ${hash})`);
    return receipt;
  };
  const deploy = async (artifact: ContractArtifact, args: readonly unknown[]) => {
    const hash = await walletClient.deployContract({
      abi: artifact.abi,
      bytecode: artifact.bytecode,
      args,
      account: walletClient.account,
      chain: walletClient.chain,
    });
    const receipt = await confirm(`deploying ${artifact.contractName}`, hash);
    if (!receipt.contractAddress) throw new DeployError(`deploying ${artifact.contractName} created no contract`);
    return { address: getAddress(receipt.contractAddress), blockNumber: receipt.blockNumber };
  };
  const write = async (what: string, address: Address, abi: Abi, functionName: string, args: readonly unknown[]) => {
    const hash = await walletClient.writeContract({
      address,
      abi,
      functionName,
      args,
      account: walletClient.account,
      chain: walletClient.chain,
    });
    await confirm(what, hash);
  };

  let usdc: Address;
  let usdcIsTestToken: boolean;
  if (parameters.usdc) {
    usdc = getAddress(parameters.usdc);
    usdcIsTestToken = false;
    if (parameters.mint?.length) throw new DeployError("cannot mint an existing token; drop `mint` or `usdc`");
    await assertSixDecimalToken(publicClient, usdc);
  } else {
    const testUsdc = loadArtifact("TestUSDC", artifactsDir);
    usdc = (await deploy(testUsdc, [deployer])).address;
    usdcIsTestToken = true;
    for (const { to, amountMicros } of parameters.mint ?? []) {
      await write(`minting ${amountMicros} to ${to}`, usdc, testUsdc.abi, "mint", [to, amountMicros]);
    }
  }

  // The deployer is the admin while it grants roles; the constructor emits the initial settings.
  const escrow = await deploy(escrowArtifact, [usdc, deployer, treasury]);
  const abi = escrowArtifact.abi;
  await write("granting SETTLER_ROLE", escrow.address, abi, "grantRole", [SETTLER_ROLE, settler]);
  await write("granting VOUCHER_SIGNER_ROLE", escrow.address, abi, "grantRole", [VOUCHER_SIGNER_ROLE, voucherSigner]);
  for (const x402Settler of parameters.x402Settlers ?? []) {
    await write("granting SETTLER_ROLE to an x402 settlement key", escrow.address, abi, "grantRole", [SETTLER_ROLE, x402Settler]);
  }
  if (admin !== deployer) {
    await write("granting DEFAULT_ADMIN_ROLE", escrow.address, abi, "grantRole", [DEFAULT_ADMIN_ROLE, admin]);
    await write("renouncing the deployer's admin role", escrow.address, abi, "renounceRole", [DEFAULT_ADMIN_ROLE, deployer]);
  }

  return {
    network,
    chainId,
    usdc,
    usdcIsTestToken,
    escrow: escrow.address,
    deployBlock: escrow.blockNumber,
    deployer,
    admin,
    treasury,
    settler: getAddress(settler),
    voucherSigner: getAddress(voucherSigner),
  };
}

/** The escrow's 1 USDC minimum assumes 6 decimals; refuse anything else (or an address without a token). */
async function assertSixDecimalToken(publicClient: Pick<PublicClient, "getCode" | "readContract">, token: Address): Promise<void> {
  const code = await publicClient.getCode({ address: token });
  if (!code || code === "0x") throw new DeployError(`no contract at the USDC address ${token}`);
  let decimals: number;
  try {
    decimals = await publicClient.readContract({ address: token, abi: erc20Abi, functionName: "decimals" });
  } catch (error) {
    throw new DeployError(`${token} does not answer decimals(): ${(error as Error).message}`);
  }
  if (decimals !== 6) throw new DeployError(`${token} has ${decimals} decimals; the escrow expects USDC's 6`);
}
