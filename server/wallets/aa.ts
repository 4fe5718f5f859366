/**
 * ERC-4337 (account abstraction, EntryPoint v0.7) for embedded wallets, at run time: the gateway's paymaster,
 * which pays gas only for the gateway's own flows (an embedded wallet moving its USDC into the escrow, or
 * claiming the seller earnings the escrow holds for it) and only when the gateway's signer approved the
 * operation, and the check that a configured chain has the contracts the gateway expects. Nothing here
 * deploys: putting the stack on a local chain is server/devstack/aa-local.ts's job, and a real chain has
 * EntryPoint v0.7 and the SimpleAccount factory at their canonical addresses already.
 */
import {
  concat,
  encodeAbiParameters,
  getAddress,
  keccak256,
  pad,
  toHex,
  type Address,
  type Hex,
  type LocalAccount,
  type PublicClient,
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

export type VerifyAccountAbstractionReturnType = { ok: true } | { ok: false; reason: string };

/**
 * Whether the chain behind `publicClient` has the account-abstraction contracts `aa` names, wired for this
 * gateway: code at the EntryPoint, the account factory and the paymaster, and a paymaster that sponsors
 * `usdc` into `escrow`, for wallets of that factory, on the word of `aa.paymasterSigner` (the address of
 * the key the gateway will sign with). A production gateway checks this before it offers embedded wallets.
 */
export async function verifyAccountAbstraction(
  publicClient: Pick<PublicClient, "getCode" | "readContract">,
  aa: AaDeployment,
  expected: { usdc: Address; escrow: Address },
): Promise<VerifyAccountAbstractionReturnType> {
  for (const [name, address] of [
    ["EntryPoint", aa.entryPoint],
    ["account factory", aa.accountFactory],
    ["paymaster", aa.paymaster],
  ] as const) {
    const code = await publicClient.getCode({ address });
    if (!code || code === "0x") return { ok: false, reason: `no contract at the ${name} ${address}` };
  }
  const read = (functionName: "token" | "escrow" | "accountFactory" | "verifyingSigner") =>
    publicClient.readContract({ address: aa.paymaster, abi: gatewayPaymasterAbi, functionName });
  const wiring = [
    ["token", expected.usdc],
    ["escrow", expected.escrow],
    ["accountFactory", aa.accountFactory],
    ["verifyingSigner", aa.paymasterSigner],
  ] as const;
  for (const [functionName, want] of wiring) {
    let answer: Address;
    try {
      answer = await read(functionName);
    } catch (error) {
      const message = ((error as { shortMessage?: string }).shortMessage ?? String(error)).split("\n")[0];
      return { ok: false, reason: `the paymaster ${aa.paymaster} does not answer ${functionName}() as a GatewayPaymaster (${message})` };
    }
    const got = getAddress(answer);
    if (got !== getAddress(want)) return { ok: false, reason: `the paymaster ${aa.paymaster}'s ${functionName} is ${got}, not ${want}` };
  }
  return { ok: true };
}

/**
 * Whether the ERC-4337 bundler at `bundlerUrl` serves `chainId` and accepts operations for `entryPoint`
 * (eth_chainId, eth_supportedEntryPoints). An unreachable bundler is a reason too.
 */
export async function verifyBundler(
  bundlerUrl: string,
  expected: { chainId: number; entryPoint: Address },
  timeoutMs = 10_000,
): Promise<VerifyAccountAbstractionReturnType> {
  const request = async (method: string): Promise<unknown> => {
    try {
      const response = await fetch(bundlerUrl, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params: [] }),
        signal: AbortSignal.timeout(timeoutMs),
      });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      const body = (await response.json()) as { result?: unknown; error?: { message?: string } };
      if (body.error) throw new Error(body.error.message ?? "a JSON-RPC error");
      return body.result;
    } catch (error) {
      throw new Error(`the bundler did not answer ${method} (${(error as Error).message})`);
    }
  };
  let chainId: unknown;
  let entryPoints: unknown;
  try {
    chainId = await request("eth_chainId");
    entryPoints = await request("eth_supportedEntryPoints");
  } catch (error) {
    return { ok: false, reason: (error as Error).message };
  }
  if (typeof chainId !== "string" || Number(chainId) !== expected.chainId) {
    return { ok: false, reason: `the bundler serves chain ${String(chainId)}, not ${expected.chainId}` };
  }
  const supported = Array.isArray(entryPoints) ? entryPoints.filter((e): e is string => typeof e === "string") : [];
  if (!supported.some((e) => e.toLowerCase() === expected.entryPoint.toLowerCase())) {
    return { ok: false, reason: `the bundler does not support the EntryPoint ${expected.entryPoint}` };
  }
  return { ok: true };
}

// ---------------------------------------------------------------------------------------------------------
// Sponsorship of the gateway's flows (./aa-flows.ts)
// ---------------------------------------------------------------------------------------------------------

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
