/**
 * The gateway's own flows, the only UserOperations its paymaster sponsors (contracts/GatewayPaymaster.sol checks
 * the same rules on chain, refusing with the same errors): an embedded wallet's top-up, `executeBatch` of
 * `approve(escrow, amount)` + `depositFor(wallet, amount)`, and a seller wallet's claim, `execute(escrow, 0,
 * claim() | claimTo(recipient))`, and an embedded wallet's withdrawal to an address, `executeBatch([escrow, usdc], [0, 0],
 * [withdrawWithVoucher(voucher, signature), transfer(to, amount)])`. The call builders, and the off-chain check the
 * gateway runs before signing.
 */
import {
  decodeFunctionData,
  encodeFunctionData,
  erc20Abi,
  getAbiItem,
  getAddress,
  isAddressEqual,
  toFunctionSelector,
  zeroAddress,
  type Address,
  type ContractErrorArgs,
  type ContractErrorName,
  type Hex,
} from "viem";
import { type gatewayPaymasterAbi, simpleAccountAbi, skillEscrowAbi } from "../chain/abi";

/** The account calls the paymaster knows; anything else is refused by selector before decoding. */
const ACCOUNT_CALLS_ABI = [
  getAbiItem({ abi: simpleAccountAbi, name: "executeBatch" }),
  getAbiItem({ abi: simpleAccountAbi, name: "execute" }),
] as const;

/** The selectors the paymaster compares (lowercase, as viem gives them). */
const SELECTOR = {
  execute: toFunctionSelector(getAbiItem({ abi: simpleAccountAbi, name: "execute" })),
  executeBatch: toFunctionSelector(getAbiItem({ abi: simpleAccountAbi, name: "executeBatch" })),
  approve: toFunctionSelector(getAbiItem({ abi: erc20Abi, name: "approve" })),
  transfer: toFunctionSelector(getAbiItem({ abi: erc20Abi, name: "transfer" })),
  depositFor: toFunctionSelector(getAbiItem({ abi: skillEscrowAbi, name: "depositFor" })),
  claim: toFunctionSelector(getAbiItem({ abi: skillEscrowAbi, name: "claim" })),
  claimTo: toFunctionSelector(getAbiItem({ abi: skillEscrowAbi, name: "claimTo" })),
  withdrawWithVoucher: toFunctionSelector(getAbiItem({ abi: skillEscrowAbi, name: "withdrawWithVoucher" })),
  /** What the contract names when the data is shorter than a selector. */
  none: "0x00000000",
} as const;

export type Call = { to: Address; value?: bigint; data: Hex };

/** The two calls of a top-up: `approve(escrow, amount)` on the token, `depositFor(wallet, amount)` on the escrow. */
export function escrowDepositCalls(parameters: { usdc: Address; escrow: Address; wallet: Address; amountMicros: bigint }): [Call, Call] {
  const { usdc, escrow, wallet, amountMicros } = parameters;
  return [
    { to: usdc, value: 0n, data: encodeFunctionData({ abi: erc20Abi, functionName: "approve", args: [escrow, amountMicros] }) },
    {
      to: escrow,
      value: 0n,
      data: encodeFunctionData({ abi: skillEscrowAbi, functionName: "depositFor", args: [wallet, amountMicros] }),
    },
  ];
}

/**
 * The one call of a seller's claim from its wallet: `claim()` on the escrow (paid to the wallet itself), or
 * `claimTo(to)` when `to` is given. One call, so the SimpleAccount runs it as `execute(escrow, 0, …)`, the shape
 * GatewayPaymaster sponsors.
 */
export function escrowClaimCall(parameters: { escrow: Address; to?: Address | undefined }): Call {
  const { escrow, to } = parameters;
  const data = to
    ? encodeFunctionData({ abi: skillEscrowAbi, functionName: "claimTo", args: [to] })
    : encodeFunctionData({ abi: skillEscrowAbi, functionName: "claim" });
  return { to: escrow, value: 0n, data };
}

/**
 * The two calls of a withdrawal to an address: `withdrawWithVoucher(voucher, signature)` on the escrow (which pays
 * voucher.account, the wallet), then `transfer(to, voucher.amount)` on the token, in one operation, so the USDC
 * never rests in the wallet where the sweep would deposit it again.
 */
export function escrowWithdrawCalls(parameters: {
  usdc: Address;
  escrow: Address;
  voucher: { account: Address; amount: bigint; nonce: bigint; deadline: bigint };
  signature: Hex;
  to: Address;
}): [Call, Call] {
  const { usdc, escrow, voucher, signature, to } = parameters;
  return [
    {
      to: escrow,
      value: 0n,
      data: encodeFunctionData({ abi: skillEscrowAbi, functionName: "withdrawWithVoucher", args: [voucher, signature] }),
    },
    { to: usdc, value: 0n, data: encodeFunctionData({ abi: erc20Abi, functionName: "transfer", args: [to, voucher.amount] }) },
  ];
}

/** GatewayPaymaster's refusals, by name: its `Paymaster*` custom errors. */
export type GatewayFlowErrorName = Extract<ContractErrorName<typeof gatewayPaymasterAbi>, `Paymaster${string}`>;

/**
 * Why an operation is not one of the gateway's flows: the custom error GatewayPaymaster reverts with for it,
 * with the same arguments (typed from the contract's ABI, so a change of the contract's errors fails the build).
 */
export type GatewayFlowViolation = {
  [N in GatewayFlowErrorName]: { errorName: N; args: ContractErrorArgs<typeof gatewayPaymasterAbi, N> };
}[GatewayFlowErrorName];

function refuse<N extends GatewayFlowErrorName>(
  errorName: N,
  args: ContractErrorArgs<typeof gatewayPaymasterAbi, N>,
): GatewayFlowViolation {
  return { errorName, args } as GatewayFlowViolation;
}

/** `Name(arg, ...)`, as a log line or an error message shows a refusal. */
export function describeGatewayFlowViolation(violation: GatewayFlowViolation): string {
  return `${violation.errorName}(${(violation.args as readonly unknown[]).map(String).join(", ")})`;
}

/** The first four bytes of `data`, lowercase, or zero when it is shorter (GatewayPaymaster._selectorOf). */
function selectorOf(data: Hex): Hex {
  return data.length < 10 ? SELECTOR.none : (data.slice(0, 10).toLowerCase() as Hex);
}

const byteLength = (data: Hex) => BigInt((data.length - 2) / 2);
const wordAt = (data: Hex, offset: number) => BigInt(`0x${data.slice(2 + 2 * offset, 2 + 2 * (offset + 32))}`);
const addressOf = (word: bigint) => getAddress(`0x${word.toString(16).padStart(40, "0")}`);

/**
 * `selector(address, uint256)` split as GatewayPaymaster._twoWordCall splits it: anything but a selector and two
 * words, the first a clean address, yields a zero selector, the zero address and 0.
 */
function twoWordCall(data: Hex): { selector: Hex; first: Address; second: bigint } {
  const none = { selector: SELECTOR.none as Hex, first: zeroAddress, second: 0n };
  if (data.length !== 2 + 2 * 68) return none;
  const word = wordAt(data, 4);
  if (word >> 160n !== 0n) return none;
  return { selector: selectorOf(data), first: addressOf(word), second: wordAt(data, 36) };
}

/**
 * Why `callData` from `sender` is not one of the gateway's flows: the same rules as
 * GatewayPaymaster.checkGatewayFlow on chain, refused with the same error and arguments; undefined when it is one.
 * The gateway signs nothing this refuses. Calldata that does not decode as its selector's arguments, which the
 * contract refuses by reverting without data, is refused here as PaymasterUnknownSelector.
 */
export function gatewayFlowViolation(parameters: {
  sender: Address;
  callData: Hex;
  factory?: Address | undefined;
  usdc: Address;
  escrow: Address;
  accountFactory: Address;
}): GatewayFlowViolation | undefined {
  const { sender, callData, factory, usdc, escrow, accountFactory } = parameters;
  if (factory && !isAddressEqual(factory, accountFactory)) return refuse("PaymasterUnknownFactory", [getAddress(factory)]);
  const selector = selectorOf(callData);
  if (selector !== SELECTOR.execute && selector !== SELECTOR.executeBatch) return refuse("PaymasterUnknownSelector", [selector]);
  let decoded;
  try {
    decoded = decodeFunctionData({ abi: ACCOUNT_CALLS_ABI, data: callData });
  } catch {
    return refuse("PaymasterUnknownSelector", [selector]);
  }
  if (decoded.functionName === "execute") return claimFlowViolation(callData, decoded.args, escrow);
  const [dest, value, func] = decoded.args;
  if (dest.length !== 2 || value.length !== 2 || func.length !== 2) {
    return refuse("PaymasterNotTwoCalls", [BigInt(dest.length), BigInt(value.length), BigInt(func.length)]);
  }
  if (isAddressEqual(dest[0], escrow) && isAddressEqual(dest[1], usdc)) return withdrawFlowViolation(sender, callData, decoded.args);
  if (!isAddressEqual(dest[0], usdc) || !isAddressEqual(dest[1], escrow)) {
    return refuse("PaymasterDepositTargets", [getAddress(dest[0]), getAddress(dest[1])]);
  }
  if (value[0] !== 0n || value[1] !== 0n) return refuse("PaymasterDepositValue", [value[0], value[1]]);
  const approve = twoWordCall(func[0]);
  const deposit = twoWordCall(func[1]);
  if (approve.selector !== SELECTOR.approve || !isAddressEqual(approve.first, escrow)) {
    return refuse("PaymasterDepositApprove", [approve.selector, approve.first]);
  }
  if (deposit.selector !== SELECTOR.depositFor || !isAddressEqual(deposit.first, sender)) {
    return refuse("PaymasterDepositFor", [deposit.selector, deposit.first]);
  }
  if (approve.second !== deposit.second || deposit.second === 0n) return refuse("PaymasterDepositAmount", [approve.second, deposit.second]);
  return undefined;
}

/** `execute(escrow, 0, claim() | claimTo(recipient ≠ 0))` in the standard encoding, as the contract checks it. */
function claimFlowViolation(callData: Hex, args: readonly [Address, bigint, Hex], escrow: Address): GatewayFlowViolation | undefined {
  const [dest, value, func] = args;
  if (!isAddressEqual(dest, escrow)) return refuse("PaymasterClaimTarget", [getAddress(dest)]);
  if (value !== 0n) return refuse("PaymasterClaimValue", [value]);
  const selector = selectorOf(func);
  const length = byteLength(func);
  if (length === 36n && selector === SELECTOR.claimTo) {
    const word = wordAt(func, 4);
    if (word >> 160n !== 0n) return refuse("PaymasterClaimCall", [selector, length]);
    if (word === 0n) return refuse("PaymasterClaimToZero", []);
  } else if (length !== 4n || selector !== SELECTOR.claim) {
    return refuse("PaymasterClaimCall", [selector, length]);
  }
  const canonical = encodeFunctionData({ abi: simpleAccountAbi, functionName: "execute", args: [dest, value, func] });
  if (canonical.toLowerCase() !== callData.toLowerCase()) return refuse("PaymasterClaimEncoding", []);
  return undefined;
}

const WITHDRAW_CALL_LENGTH = 4 + 32 * 4 + 32 + 32 + 96;

/**
 * `executeBatch([escrow, usdc], [0, 0], [withdrawWithVoucher(voucher of sender), transfer(to ≠ 0, voucher.amount ≠ 0)])`
 * in the standard encoding with a 65-byte signature, as the contract checks it, word by word.
 */
function withdrawFlowViolation(
  sender: Address,
  callData: Hex,
  args: readonly [readonly Address[], readonly bigint[], readonly Hex[]],
): GatewayFlowViolation | undefined {
  const [dest, value, func] = args;
  if (value[0] !== 0n || value[1] !== 0n) return refuse("PaymasterWithdrawValue", [value[0], value[1]]);
  const withdraw = func[0].toLowerCase() as Hex;
  const withdrawCall = refuse("PaymasterWithdrawCall", [selectorOf(withdraw), byteLength(withdraw)]);
  if (withdraw.length !== 2 + 2 * WITHDRAW_CALL_LENGTH) return withdrawCall;
  const account = wordAt(withdraw, 4);
  const voucherAmount = wordAt(withdraw, 36);
  const lastWord = wordAt(withdraw, 260);
  if (
    selectorOf(withdraw) !== SELECTOR.withdrawWithVoucher ||
    wordAt(withdraw, 132) !== 0xa0n ||
    wordAt(withdraw, 164) !== 65n ||
    (lastWord & ((1n << 248n) - 1n)) !== 0n ||
    account >> 160n !== 0n
  ) {
    return withdrawCall;
  }
  if (!isAddressEqual(addressOf(account), sender)) return refuse("PaymasterWithdrawAccount", [addressOf(account), getAddress(sender)]);
  const transfer = twoWordCall(func[1]);
  if (transfer.selector !== SELECTOR.transfer) return refuse("PaymasterTransferCall", [selectorOf(func[1]), byteLength(func[1])]);
  if (transfer.first === zeroAddress) return refuse("PaymasterTransferToZero", []);
  if (transfer.second !== voucherAmount || voucherAmount === 0n) return refuse("PaymasterWithdrawAmount", [voucherAmount, transfer.second]);
  const canonical = encodeFunctionData({ abi: simpleAccountAbi, functionName: "executeBatch", args: [dest, value, func] });
  if (canonical.toLowerCase() !== callData.toLowerCase()) return refuse("PaymasterWithdrawEncoding", []);
  return undefined;
}
