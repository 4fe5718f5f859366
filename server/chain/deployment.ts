/**
 * The deployment file: one JSON document per network (default `deployments/<network>.json`) that records
 * where the contracts are. Written by the deploy script (or by the gateway when it deploys on start),
 * read by the gateway. Example:
 *
 *   {
 *     "network": "localhost", "chainId": 8453,
 *     "usdc": "0x…", "usdcIsTestToken": true, "escrow": "0x…", "deployBlock": 3,
 *     "deployer": "0x…", "admin": "0x…", "treasury": "0x…", "settler": "0x…", "voucherSigner": "0x…"
 *   }
 *
 * A chain with embedded wallets (ERC-4337) adds where their contracts are:
 *
 *     "accountAbstraction": { "entryPoint": "0x…", "accountFactory": "0x…", "paymaster": "0x…", "paymasterSigner": "0x…" }
 */
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import path from "node:path";
import { getAddress, isAddress, type Address, type PublicClient } from "viem";
import { skillEscrowAbi } from "./abi";

/** `<repo>/deployments`. */
export const DEFAULT_DEPLOYMENTS_DIR = path.resolve(__dirname, "../../deployments");

/** Where the contracts of one network are. Addresses are checksummed. */
export type Deployment = {
  /** Network name, e.g. "localhost"; also the file's base name. */
  network: string;
  chainId: number;
  /** The escrowed token. */
  usdc: Address;
  /** True when `usdc` is a TestUSDC created by this deployment (its owner, `deployer`, can mint). */
  usdcIsTestToken: boolean;
  /** SkillEscrow. */
  escrow: Address;
  /** Block that created the escrow: where an event indexer starts. A JSON number in the file. */
  deployBlock: bigint;
  /** Account that sent the deployment transactions. */
  deployer: Address;
  /** Holder of DEFAULT_ADMIN_ROLE. */
  admin: Address;
  /** Receiver of platform fees. */
  treasury: Address;
  /** Holder of SETTLER_ROLE. */
  settler: Address;
  /** Holder of VOUCHER_SIGNER_ROLE. */
  voucherSigner: Address;
  /** The ERC-4337 contracts of embedded wallets, when this chain has them. */
  accountAbstraction?: AccountAbstractionAddresses;
};

/** Where the ERC-4337 contracts of embedded wallets are (the shape of server/wallets/aa.ts's AaDeployment). */
export type AccountAbstractionAddresses = {
  /** EntryPoint v0.7. */
  entryPoint: Address;
  /** The SimpleAccount factory embedded wallets are created by. */
  accountFactory: Address;
  /** GatewayPaymaster, which sponsors the gateway's own flows. */
  paymaster: Address;
  /** The address of the key the paymaster trusts (the key itself stays with the gateway). */
  paymasterSigner: Address;
};

// Internal error, plain on purpose: a start-up refusal for the operator, never a client's answer.
/** A deployment file that is missing, unreadable or malformed. */
export class DeploymentFileError extends Error {
  override name = "DeploymentFileError";
}

const ADDRESS_FIELDS = ["usdc", "escrow", "deployer", "admin", "treasury", "settler", "voucherSigner"] as const;
const AA_ADDRESS_FIELDS = ["entryPoint", "accountFactory", "paymaster", "paymasterSigner"] as const;

/** `dir/<network>.json`. The network name must be a plain identifier (no path tricks). */
export function deploymentPath(network: string, dir: string = DEFAULT_DEPLOYMENTS_DIR): string {
  if (!/^[A-Za-z0-9][A-Za-z0-9_-]*$/.test(network)) {
    throw new DeploymentFileError(`network name must be letters, digits, "-" or "_", got "${network}"`);
  }
  return path.join(dir, `${network}.json`);
}

/** The file's JSON text (deployBlock as a plain number, stable field order, trailing newline). */
export function serializeDeployment(deployment: Deployment): string {
  if (deployment.deployBlock > BigInt(Number.MAX_SAFE_INTEGER)) {
    throw new DeploymentFileError(`deployBlock ${deployment.deployBlock} does not fit a JSON number`);
  }
  const { network, chainId, usdc, usdcIsTestToken, escrow, deployBlock, accountAbstraction, ...roles } = deployment;
  // A file without embedded wallets keeps exactly the fields it always had.
  const json = {
    network,
    chainId,
    usdc,
    usdcIsTestToken,
    escrow,
    deployBlock: Number(deployBlock),
    ...roles,
    ...(accountAbstraction ? { accountAbstraction } : {}),
  };
  return `${JSON.stringify(json, null, 2)}\n`;
}

/** Validates parsed JSON as a Deployment; throws DeploymentFileError naming the first bad field. */
export function parseDeployment(json: unknown, source = "deployment"): Deployment {
  const fail = (message: string): never => {
    throw new DeploymentFileError(`${source}: ${message}`);
  };
  if (typeof json !== "object" || json === null || Array.isArray(json)) return fail("expected a JSON object");
  const record = json as Record<string, unknown>;

  const { network, chainId, usdcIsTestToken, deployBlock } = record;
  if (typeof network !== "string" || network === "") fail(`"network" must be a non-empty string`);
  if (typeof chainId !== "number" || !Number.isSafeInteger(chainId) || chainId <= 0) {
    fail(`"chainId" must be a positive integer, got ${JSON.stringify(chainId)}`);
  }
  if (typeof usdcIsTestToken !== "boolean") fail(`"usdcIsTestToken" must be a boolean`);
  if (typeof deployBlock !== "number" || !Number.isSafeInteger(deployBlock) || deployBlock < 0) {
    fail(`"deployBlock" must be a non-negative integer, got ${JSON.stringify(deployBlock)}`);
  }
  const addresses = {} as Record<(typeof ADDRESS_FIELDS)[number], Address>;
  for (const field of ADDRESS_FIELDS) {
    const value = record[field];
    if (typeof value !== "string" || !isAddress(value, { strict: false })) {
      fail(`"${field}" must be a 20-byte hex address, got ${JSON.stringify(value)}`);
    }
    addresses[field] = getAddress(value as string);
  }
  const deployment: Deployment = {
    network: network as string,
    chainId: chainId as number,
    usdcIsTestToken: usdcIsTestToken as boolean,
    deployBlock: BigInt(deployBlock as number),
    ...addresses,
  };
  const aa = record.accountAbstraction;
  if (aa === undefined) return deployment;
  if (typeof aa !== "object" || aa === null || Array.isArray(aa)) return fail(`"accountAbstraction" must be an object`);
  const aaAddresses = {} as AccountAbstractionAddresses;
  for (const field of AA_ADDRESS_FIELDS) {
    const value = (aa as Record<string, unknown>)[field];
    if (typeof value !== "string" || !isAddress(value, { strict: false })) {
      fail(`"accountAbstraction.${field}" must be a 20-byte hex address, got ${JSON.stringify(value)}`);
    }
    aaAddresses[field] = getAddress(value as string);
  }
  return { ...deployment, accountAbstraction: aaAddresses };
}

/** Writes the file atomically (temp file + rename), creating its directory. */
export function writeDeployment(filePath: string, deployment: Deployment): void {
  mkdirSync(path.dirname(filePath), { recursive: true });
  const temporary = `${filePath}.${process.pid}.tmp`;
  writeFileSync(temporary, serializeDeployment(deployment));
  renameSync(temporary, filePath);
}

/** Reads and validates a deployment file; throws DeploymentFileError if it is missing or malformed. */
export function readDeployment(filePath: string): Deployment {
  let text: string;
  try {
    text = readFileSync(filePath, "utf8");
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new DeploymentFileError(
      code === "ENOENT" ? `${filePath} does not exist: deploy first` : `${filePath}: ${(error as Error).message}`,
    );
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new DeploymentFileError(`${filePath}: not JSON (${(error as Error).message})`);
  }
  return parseDeployment(json, filePath);
}

export type VerifyDeploymentReturnType = { ok: true } | { ok: false; reason: string };

/**
 * Whether a deployment file describes contracts that exist on the chain behind `publicClient`: same chain id,
 * code at both addresses, the escrow holding that token and the settler holding its role. A file left from an
 * earlier `hardhat node` (which forgets everything on restart) fails this check; the caller then redeploys.
 */
export async function verifyDeployment(
  publicClient: Pick<PublicClient, "getChainId" | "getCode" | "readContract">,
  deployment: Deployment,
): Promise<VerifyDeploymentReturnType> {
  const chainId = await publicClient.getChainId();
  if (chainId !== deployment.chainId) {
    return { ok: false, reason: `chain id is ${chainId}, the file is for ${deployment.chainId}` };
  }
  for (const [name, address] of [
    ["escrow", deployment.escrow],
    ["usdc", deployment.usdc],
  ] as const) {
    const code = await publicClient.getCode({ address });
    if (!code || code === "0x") return { ok: false, reason: `no contract at ${name} ${address}` };
  }
  const token = await publicClient.readContract({ address: deployment.escrow, abi: skillEscrowAbi, functionName: "usdc" });
  if (getAddress(token) !== deployment.usdc) {
    return { ok: false, reason: `escrow ${deployment.escrow} holds token ${token}, not ${deployment.usdc}` };
  }
  const settlerRole = await publicClient.readContract({
    address: deployment.escrow,
    abi: skillEscrowAbi,
    functionName: "SETTLER_ROLE",
  });
  const isSettler = await publicClient.readContract({
    address: deployment.escrow,
    abi: skillEscrowAbi,
    functionName: "hasRole",
    args: [settlerRole, deployment.settler],
  });
  if (!isSettler) return { ok: false, reason: `${deployment.settler} does not hold SETTLER_ROLE` };
  return { ok: true };
}
