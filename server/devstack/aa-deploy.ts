/**
 * Deploying ERC-4337 for embedded wallets: the deterministic deployer, EntryPoint v0.7 and SimpleAccountFactory
 * at their canonical addresses, and the gateway paymaster for one escrow. The local stack (./aa-local.ts) does
 * it on a fresh `hardhat node`; a production gateway (server/main.ts) is given a chain that has them and uses
 * only server/wallets/aa.ts.
 *
 * The EntryPoint and SimpleAccountFactory come from `@account-abstraction/contracts@0.7.0`'s compiled
 * artifacts (not recompiled: their canonical addresses depend on the exact bytecode) and land at their
 * canonical addresses through the deterministic deployer, like on Base. GatewayPaymaster is this repo's
 * contract (contracts/GatewayPaymaster.sol, `npx hardhat compile`).
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import {
  concat,
  encodeAbiParameters,
  getAddress,
  pad,
  type Abi,
  type Account,
  type Address,
  type Chain,
  type Hex,
  type PublicClient,
  type Transport,
  type WalletClient,
} from "viem";
import { type AaDeployment, AccountAbstractionError, ENTRY_POINT_V07, SIMPLE_ACCOUNT_FACTORY_V07 } from "../wallets/aa";
import { gatewayPaymasterAbi } from "../chain/abi";

/** Arachnid's deterministic deployment proxy (CREATE2 factory), present on Base and most chains. */
export const DETERMINISTIC_DEPLOYER: Address = "0x4e59b44847b379578588920cA78FbF26c0B4956C";
/** Its runtime code, put on a local chain with `hardhat_setCode` (its deployment transaction is pre-EIP-155). */
export const DETERMINISTIC_DEPLOYER_CODE: Hex =
  "0x7fffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffe03601600081602082378035828234f58015156039578182fd5b8082525050506014600cf3";
/** The salt the EntryPoint v0.7 was deployed with everywhere. */
export const ENTRY_POINT_SALT: Hex = "0x90d8084deab30c2a37c45e8d47f49f2f7965183cb6990a98943ef94940681de3";

type Artifact = { abi: Abi; bytecode: Hex };

function readArtifact(file: string, what: string): Artifact {
  let json: { abi?: unknown; bytecode?: unknown };
  try {
    json = JSON.parse(readFileSync(file, "utf8"));
  } catch (error) {
    throw new AccountAbstractionError(`cannot read the ${what} artifact at ${file}: ${(error as Error).message}`);
  }
  if (!Array.isArray(json.abi) || typeof json.bytecode !== "string" || !json.bytecode.startsWith("0x") || json.bytecode.length < 4) {
    throw new AccountAbstractionError(`${file} is not a compiled contract artifact`);
  }
  return { abi: json.abi as Abi, bytecode: json.bytecode as Hex };
}

/** EntryPoint or SimpleAccountFactory, as shipped compiled in @account-abstraction/contracts@0.7.0. */
export function loadAaArtifact(name: "EntryPoint" | "SimpleAccountFactory"): Artifact {
  return readArtifact(require.resolve(`@account-abstraction/contracts/artifacts/${name}.json`), name);
}

/** GatewayPaymaster as compiled by `npx hardhat compile`. */
export function loadPaymasterArtifact(artifactsDir = path.resolve(__dirname, "../../artifacts")): Artifact {
  const file = path.join(artifactsDir, "contracts", "GatewayPaymaster.sol", "GatewayPaymaster.json");
  return readArtifact(file, "GatewayPaymaster (run `npx hardhat compile`)");
}

export type DeployAccountAbstractionParameters = {
  publicClient: Pick<PublicClient, "getCode" | "waitForTransactionReceipt" | "getChainId">;
  /** Sends the deployments and funds the paymaster's EntryPoint deposit. */
  walletClient: WalletClient<Transport, Chain | undefined, Account>;
  /**
   * Puts code at an address (Hardhat's `hardhat_setCode`): used only when the deterministic deployer is
   * missing, as on a fresh local chain. Without it, a missing deployer is an error.
   */
  setCode?: (address: Address, code: Hex) => Promise<void>;
  usdc: Address;
  escrow: Address;
  /** The gateway key's address that approves sponsored operations. */
  paymasterSigner: Address;
  /** ETH (wei) to put in the paymaster's EntryPoint deposit, which pays the sponsored gas. */
  paymasterDepositWei?: bigint;
  artifactsDir?: string;
};

/**
 * Puts the deterministic deployer (if missing and `setCode` is given), EntryPoint v0.7 and SimpleAccountFactory
 * at their canonical addresses (skipping any already there), deploys a GatewayPaymaster for `usdc`/`escrow`
 * and funds its deposit. Throws AccountAbstractionError if a contract does not land where it must.
 */
export async function deployAccountAbstraction(parameters: DeployAccountAbstractionParameters): Promise<AaDeployment> {
  const { publicClient, walletClient } = parameters;
  const hasCode = async (address: Address) => {
    const code = await publicClient.getCode({ address });
    return code !== undefined && code !== "0x";
  };
  const confirm = async (what: string, hash: Hex) => {
    const receipt = await publicClient.waitForTransactionReceipt({ hash });
    if (receipt.status !== "success") throw new AccountAbstractionError(`${what} failed (transaction ${hash})`);
    return receipt;
  };

  if (!(await hasCode(DETERMINISTIC_DEPLOYER))) {
    if (!parameters.setCode) throw new AccountAbstractionError(`no deterministic deployer at ${DETERMINISTIC_DEPLOYER} on this chain`);
    await parameters.setCode(DETERMINISTIC_DEPLOYER, DETERMINISTIC_DEPLOYER_CODE);
  }
  const create2 = async (what: string, target: Address, salt: Hex, initCode: Hex) => {
    if (await hasCode(target)) return;
    const hash = await walletClient.sendTransaction({
      to: DETERMINISTIC_DEPLOYER,
      data: concat([salt, initCode]),
      account: walletClient.account,
      chain: walletClient.chain,
      gas: 8_000_000n,
    });
    await confirm(`deploying ${what}`, hash);
    if (!(await hasCode(target))) throw new AccountAbstractionError(`${what} did not land at ${target}`);
  };
  await create2("EntryPoint v0.7", ENTRY_POINT_V07, ENTRY_POINT_SALT, loadAaArtifact("EntryPoint").bytecode);
  const factoryInit = concat([
    loadAaArtifact("SimpleAccountFactory").bytecode,
    encodeAbiParameters([{ type: "address" }], [ENTRY_POINT_V07]),
  ]);
  await create2("SimpleAccountFactory", SIMPLE_ACCOUNT_FACTORY_V07, pad("0x00", { size: 32 }), factoryInit);

  const artifact = loadPaymasterArtifact(parameters.artifactsDir);
  const hash = await walletClient.deployContract({
    abi: artifact.abi,
    bytecode: artifact.bytecode,
    args: [ENTRY_POINT_V07, parameters.usdc, parameters.escrow, SIMPLE_ACCOUNT_FACTORY_V07, parameters.paymasterSigner],
    account: walletClient.account,
    chain: walletClient.chain,
  });
  const receipt = await confirm("deploying GatewayPaymaster", hash);
  if (!receipt.contractAddress) throw new AccountAbstractionError("deploying GatewayPaymaster created no contract");
  const paymaster = getAddress(receipt.contractAddress);
  const depositWei = parameters.paymasterDepositWei ?? 10n ** 18n;
  if (depositWei > 0n) {
    const funded = await walletClient.writeContract({
      address: paymaster,
      abi: gatewayPaymasterAbi,
      functionName: "deposit",
      value: depositWei,
      account: walletClient.account,
      chain: walletClient.chain,
    });
    await confirm("funding the paymaster's deposit", funded);
  }
  return {
    entryPoint: ENTRY_POINT_V07,
    accountFactory: SIMPLE_ACCOUNT_FACTORY_V07,
    paymaster,
    paymasterSigner: getAddress(parameters.paymasterSigner),
  };
}
