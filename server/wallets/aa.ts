/**
 * ERC-4337 (account abstraction, EntryPoint v0.7) for embedded wallets: putting the infrastructure on a local
 * chain, and the gateway's paymaster, which pays gas only for the gateway's own flows (an embedded wallet
 * moving its USDC into the escrow, or claiming the seller earnings the escrow holds for it) and only when the
 * gateway's signer approved the operation.
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
  keccak256,
  pad,
  toHex,
  type Abi,
  type Account,
  type Address,
  type Chain,
  type Hex,
  type LocalAccount,
  type PublicClient,
  type Transport,
  type WalletClient,
} from "viem";
import {
  entryPoint07Address,
  type GetPaymasterDataParameters,
  type GetPaymasterDataReturnType,
  type GetPaymasterStubDataParameters,
  type GetPaymasterStubDataReturnType,
  type UserOperation,
} from "viem/account-abstraction";
import { gatewayPaymasterAbi } from "../chain/abi";
import { describeGatewayFlowViolation, gatewayFlowViolation, type GatewayFlowViolation } from "./aa-flows";

/** EntryPoint v0.7's canonical address. */
export const ENTRY_POINT_V07: Address = entryPoint07Address;
/** Arachnid's deterministic deployment proxy (CREATE2 factory), present on Base and most chains. */
export const DETERMINISTIC_DEPLOYER: Address = "0x4e59b44847b379578588920cA78FbF26c0B4956C";
/** Its runtime code, put on a local chain with `hardhat_setCode` (its deployment transaction is pre-EIP-155). */
export const DETERMINISTIC_DEPLOYER_CODE: Hex =
  "0x7fffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffe03601600081602082378035828234f58015156039578182fd5b8082525050506014600cf3";
/** The salt the EntryPoint v0.7 was deployed with everywhere. */
export const ENTRY_POINT_SALT: Hex = "0x90d8084deab30c2a37c45e8d47f49f2f7965183cb6990a98943ef94940681de3";
/** SimpleAccountFactory v0.7 (salt 0, the EntryPoint as argument): the factory `toSimpleSmartAccount` uses by default. */
export const SIMPLE_ACCOUNT_FACTORY_V07: Address = "0x91E60e0613810449d098b0b5Ec8b51A0FE8c8985";

/** Gas the paymaster's validation may use: decoding the batch and one ecrecover (about 40k), with room. */
export const PAYMASTER_VERIFICATION_GAS = 120_000n;
/** How long a paymaster approval stays good. */
export const SPONSORSHIP_TTL_SECONDS = 600;

export class AccountAbstractionError extends Error {
  override name = "AccountAbstractionError";
}

/** Where the account-abstraction contracts of one chain are. */
export interface AaDeployment {
  entryPoint: Address;
  accountFactory: Address;
  paymaster: Address;
  /** The key the paymaster trusts (its address; the key itself stays with the gateway). */
  paymasterSigner: Address;
}

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

// ---------------------------------------------------------------------------------------------------------
// The gateway's flows (./aa-flows.ts) and their sponsorship
// ---------------------------------------------------------------------------------------------------------

export * from "./aa-flows";

/** The operation fields the paymaster's signature covers. */
export type SponsoredUserOperation = Pick<
  UserOperation<"0.7">,
  | "sender"
  | "nonce"
  | "factory"
  | "factoryData"
  | "callData"
  | "callGasLimit"
  | "verificationGasLimit"
  | "preVerificationGas"
  | "maxFeePerGas"
  | "maxPriorityFeePerGas"
  | "paymasterVerificationGasLimit"
  | "paymasterPostOpGasLimit"
>;

/** GatewayPaymaster.getHash, computed off chain. */
export function paymasterHash(parameters: {
  userOperation: SponsoredUserOperation;
  paymaster: Address;
  chainId: number;
  validUntil: number;
  validAfter: number;
}): Hex {
  const { userOperation: op, paymaster, chainId, validUntil, validAfter } = parameters;
  const initCode = op.factory ? concat([op.factory, op.factoryData ?? "0x"]) : "0x";
  const u128 = (value: bigint | undefined) => pad(toHex(value ?? 0n), { size: 16 });
  return keccak256(
    encodeAbiParameters(
      [
        { type: "address" },
        { type: "uint256" },
        { type: "bytes32" },
        { type: "bytes32" },
        { type: "bytes32" },
        { type: "uint256" },
        { type: "uint256" },
        { type: "bytes32" },
        { type: "uint256" },
        { type: "address" },
        { type: "uint48" },
        { type: "uint48" },
      ],
      [
        op.sender,
        op.nonce,
        keccak256(initCode),
        keccak256(op.callData),
        concat([u128(op.verificationGasLimit), u128(op.callGasLimit)]),
        ((op.paymasterVerificationGasLimit ?? 0n) << 128n) | (op.paymasterPostOpGasLimit ?? 0n),
        op.preVerificationGas,
        concat([u128(op.maxPriorityFeePerGas), u128(op.maxFeePerGas)]),
        BigInt(chainId),
        paymaster,
        validUntil,
        validAfter,
      ],
    ),
  );
}

/** A well-formed signature no key made: lets a bundler estimate gas through a full ecrecover. */
const PLACEHOLDER_SIGNATURE: Hex =
  "0xfffffffffffffffffffffffffffffff0000000000000000000000000000000007aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1c";

/** The gateway will not sign an operation: `violation` is the error GatewayPaymaster would refuse it with. */
export class SponsorshipRefused extends AccountAbstractionError {
  override name = "SponsorshipRefused";
  constructor(readonly violation: GatewayFlowViolation) {
    super(
      `the gateway paymaster sponsors only an embedded wallet's escrow deposits and earnings claims (refused: ${describeGatewayFlowViolation(violation)})`,
    );
  }
}

export type GatewayPaymasterParameters = {
  deployment: Pick<AaDeployment, "paymaster" | "accountFactory">;
  usdc: Address;
  escrow: Address;
  /** The paymaster's verifying key. Never logged. */
  signer: LocalAccount;
  now?: () => number;
};

/**
 * The paymaster actions viem's `prepareUserOperation`/`sendUserOperation` take (`paymaster: …`): placeholder
 * data for gas estimation, then the gateway's signature over the final operation. Both refuse (throw
 * SponsorshipRefused) an operation that is not one of the gateway's flows, so the gateway never signs one.
 */
export function gatewayPaymaster(parameters: GatewayPaymasterParameters) {
  const { deployment, usdc, escrow, signer } = parameters;
  const now = parameters.now ?? Date.now;
  const check = (op: { sender: Address; callData: Hex; factory?: Address | undefined }) => {
    const violation = gatewayFlowViolation({ ...op, usdc, escrow, accountFactory: deployment.accountFactory });
    if (violation) throw new SponsorshipRefused(violation);
  };
  const window = () => {
    const validAfter = Math.floor(now() / 1000) - 60;
    return { validAfter, validUntil: validAfter + 60 + SPONSORSHIP_TTL_SECONDS };
  };
  const timestamps = (validUntil: number, validAfter: number) =>
    encodeAbiParameters([{ type: "uint48" }, { type: "uint48" }], [validUntil, validAfter]);
  return {
    async getPaymasterStubData(op: GetPaymasterStubDataParameters): Promise<GetPaymasterStubDataReturnType> {
      check(op);
      const { validUntil, validAfter } = window();
      return {
        paymaster: deployment.paymaster,
        paymasterData: concat([timestamps(validUntil, validAfter), PLACEHOLDER_SIGNATURE]),
        paymasterVerificationGasLimit: PAYMASTER_VERIFICATION_GAS,
        paymasterPostOpGasLimit: 0n,
      };
    },
    async getPaymasterData(op: GetPaymasterDataParameters): Promise<GetPaymasterDataReturnType> {
      check(op);
      const { callGasLimit, verificationGasLimit, preVerificationGas, maxFeePerGas, maxPriorityFeePerGas } = op;
      if (
        callGasLimit === undefined ||
        verificationGasLimit === undefined ||
        preVerificationGas === undefined ||
        maxFeePerGas === undefined ||
        maxPriorityFeePerGas === undefined
      ) {
        throw new AccountAbstractionError("the paymaster signs only a UserOperation whose gas and fees are all set");
      }
      const { validUntil, validAfter } = window();
      const userOperation: SponsoredUserOperation = {
        sender: op.sender,
        nonce: op.nonce,
        factory: op.factory,
        factoryData: op.factoryData,
        callData: op.callData,
        callGasLimit,
        verificationGasLimit,
        preVerificationGas,
        maxFeePerGas,
        maxPriorityFeePerGas,
        paymasterVerificationGasLimit: PAYMASTER_VERIFICATION_GAS,
        paymasterPostOpGasLimit: 0n,
      };
      const hash = paymasterHash({ userOperation, paymaster: deployment.paymaster, chainId: op.chainId, validUntil, validAfter });
      const signature = await signer.signMessage({ message: { raw: hash } });
      return {
        paymaster: deployment.paymaster,
        paymasterData: concat([timestamps(validUntil, validAfter), signature]),
        paymasterVerificationGasLimit: PAYMASTER_VERIFICATION_GAS,
        paymasterPostOpGasLimit: 0n,
      };
    },
  };
}
