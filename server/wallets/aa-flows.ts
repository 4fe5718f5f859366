/**
 * The gateway's own flows, the only UserOperations its paymaster sponsors (contracts/GatewayPaymaster.sol checks
 * the same rules on chain, with the same reasons): an embedded wallet's top-up, `executeBatch` of
 * `approve(escrow, amount)` + `depositFor(wallet, amount)`, and a seller wallet's claim, `execute(escrow, 0,
 * claim() | claimTo(recipient))`, and an embedded wallet's withdrawal to an address, `executeBatch([escrow, usdc], [0, 0],
 * [withdrawWithVoucher(voucher, signature), transfer(to, amount)])`. The call builders, and the off-chain check the
 * gateway runs before signing.
 */
import { decodeFunctionData, encodeFunctionData, erc20Abi, getAbiItem, isAddressEqual, zeroAddress, type Address, type Hex } from "viem";
import { simpleAccountAbi, skillEscrowAbi } from "../chain/abi";

/** The only calls these flows decode, each on its own: anything else fails to decode and is refused. */
const APPROVE_ABI = [getAbiItem({ abi: erc20Abi, name: "approve" })] as const;
const DEPOSIT_FOR_ABI = [getAbiItem({ abi: skillEscrowAbi, name: "depositFor" })] as const;
const ACCOUNT_CALLS_ABI = [
  getAbiItem({ abi: simpleAccountAbi, name: "executeBatch" }),
  getAbiItem({ abi: simpleAccountAbi, name: "execute" }),
] as const;

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

/**
 * Why `callData` from `sender` is not one of the gateway's flows (the same rules, and the same reasons, as
 * GatewayPaymaster.checkGatewayFlow on chain), or undefined when it is. The gateway signs nothing this refuses.
 */
export function gatewayFlowViolation(parameters: {
  sender: Address;
  callData: Hex;
  factory?: Address | undefined;
  usdc: Address;
  escrow: Address;
  accountFactory: Address;
}): string | undefined {
  const { sender, callData, factory, usdc, escrow, accountFactory } = parameters;
  if (factory && !isAddressEqual(factory, accountFactory)) return "factory";
  let decoded;
  try {
    decoded = decodeFunctionData({ abi: ACCOUNT_CALLS_ABI, data: callData });
  } catch {
    return "selector";
  }
  if (decoded.functionName === "execute") return claimFlowViolation(callData, decoded.args, escrow);
  const [dest, value, func] = decoded.args;
  if (dest.length !== 2 || value.length !== 2 || func.length !== 2) return "not two calls";
  if (isAddressEqual(dest[0], escrow) && isAddressEqual(dest[1], usdc)) return withdrawFlowViolation(sender, callData, decoded.args);
  if (!isAddressEqual(dest[0], usdc) || !isAddressEqual(dest[1], escrow)) return "targets";
  if (value[0] !== 0n || value[1] !== 0n) return "value";
  try {
    const approve = decodeFunctionData({ abi: APPROVE_ABI, data: func[0] });
    const deposit = decodeFunctionData({ abi: DEPOSIT_FOR_ABI, data: func[1] });
    if (approve.functionName !== "approve" || func[0].length !== 2 + 2 * 68) return "approve";
    if (!isAddressEqual(approve.args[0], escrow)) return "approve";
    if (func[1].length !== 2 + 2 * 68 || !isAddressEqual(deposit.args[0], sender)) return "depositFor";
    if (approve.args[1] !== deposit.args[1] || deposit.args[1] === 0n) return "amount";
  } catch {
    return "approve";
  }
  return undefined;
}

/** `execute(escrow, 0, claim() | claimTo(recipient ≠ 0))` in the standard encoding, as the contract checks it. */
function claimFlowViolation(callData: Hex, args: readonly [Address, bigint, Hex], escrow: Address): string | undefined {
  const [dest, value, func] = args;
  if (!isAddressEqual(dest, escrow)) return "claim target";
  if (value !== 0n) return "claim value";
  const selector = func.slice(0, 10).toLowerCase();
  const claimSelector = encodeFunctionData({ abi: skillEscrowAbi, functionName: "claim" });
  const claimToSelector = encodeFunctionData({ abi: skillEscrowAbi, functionName: "claimTo", args: [zeroAddress] }).slice(0, 10);
  if (func.length === 2 + 2 * 36 && selector === claimToSelector) {
    const word = BigInt(`0x${func.slice(10)}`);
    if (word >> 160n !== 0n) return "claim call";
    if (word === 0n) return "claim recipient";
  } else if (func.length !== 2 + 2 * 4 || selector !== claimSelector) {
    return "claim call";
  }
  const canonical = encodeFunctionData({ abi: simpleAccountAbi, functionName: "execute", args: [dest, value, func] });
  if (canonical.toLowerCase() !== callData.toLowerCase()) return "claim encoding";
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
): string | undefined {
  const [dest, value, func] = args;
  if (value[0] !== 0n || value[1] !== 0n) return "withdraw value";
  const withdraw = func[0].toLowerCase();
  if (withdraw.length !== 2 + 2 * WITHDRAW_CALL_LENGTH) return "withdraw call";
  const word = (offset: number) => BigInt(`0x${withdraw.slice(2 + 2 * offset, 2 + 2 * (offset + 32))}`);
  const withdrawSelector = encodeFunctionData({
    abi: skillEscrowAbi,
    functionName: "withdrawWithVoucher",
    args: [{ account: zeroAddress, amount: 0n, nonce: 0n, deadline: 0n }, "0x"],
  }).slice(0, 10);
  const account = word(4);
  const voucherAmount = word(36);
  const lastWord = word(260);
  if (
    withdraw.slice(0, 10) !== withdrawSelector ||
    word(132) !== 0xa0n ||
    word(164) !== 65n ||
    (lastWord & ((1n << 248n) - 1n)) !== 0n ||
    account >> 160n !== 0n
  ) {
    return "withdraw call";
  }
  if (!isAddressEqual(`0x${account.toString(16).padStart(40, "0")}`, sender)) return "withdraw account";
  const transfer = func[1].toLowerCase();
  const transferSelector = encodeFunctionData({ abi: erc20Abi, functionName: "transfer", args: [zeroAddress, 0n] }).slice(0, 10);
  if (transfer.length !== 2 + 2 * 68 || transfer.slice(0, 10) !== transferSelector) return "transfer call";
  const toWord = BigInt(`0x${transfer.slice(10, 74)}`);
  if (toWord >> 160n !== 0n) return "transfer call";
  if (toWord === 0n) return "transfer recipient";
  const transferred = BigInt(`0x${transfer.slice(74)}`);
  if (transferred !== voucherAmount || voucherAmount === 0n) return "withdraw amount";
  const canonical = encodeFunctionData({ abi: simpleAccountAbi, functionName: "executeBatch", args: [dest, value, func] });
  if (canonical.toLowerCase() !== callData.toLowerCase()) return "withdraw encoding";
  return undefined;
}
