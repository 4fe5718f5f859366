/**
 * The gateway's own flows, the only UserOperations its paymaster sponsors (contracts/GatewayPaymaster.sol checks
 * the same rules on chain, with the same reasons): an embedded wallet's top-up, `executeBatch` of
 * `approve(escrow, amount)` + `depositFor(wallet, amount)`, and a seller wallet's claim, `execute(escrow, 0,
 * claim() | claimTo(recipient))`. The call builders, and the off-chain check the gateway runs before signing.
 */
import { decodeFunctionData, encodeFunctionData, isAddressEqual, parseAbi, zeroAddress, type Address, type Hex } from "viem";

export const ERC20_APPROVE_ABI = parseAbi([
  "function approve(address spender, uint256 amount) returns (bool)",
  "function balanceOf(address account) view returns (uint256)",
]);
export const ESCROW_DEPOSIT_FOR_ABI = parseAbi(["function depositFor(address account, uint256 amount)"]);
/** What a seller's wallet calls on the escrow to take its earnings, and what the escrow says it paid. */
export const ESCROW_CLAIM_ABI = parseAbi([
  "function claim() returns (uint256)",
  "function claimTo(address recipient) returns (uint256)",
  "function earnings(address seller) view returns (uint256)",
  "event Claimed(address indexed seller, address indexed recipient, uint256 amount)",
]);
const SIMPLE_ACCOUNT_ABI = parseAbi([
  "function executeBatch(address[] dest, uint256[] value, bytes[] func)",
  "function execute(address dest, uint256 value, bytes func)",
]);

export type Call = { to: Address; value?: bigint; data: Hex };

/** The two calls of a top-up: `approve(escrow, amount)` on the token, `depositFor(wallet, amount)` on the escrow. */
export function escrowDepositCalls(parameters: { usdc: Address; escrow: Address; wallet: Address; amountMicros: bigint }): [Call, Call] {
  const { usdc, escrow, wallet, amountMicros } = parameters;
  return [
    { to: usdc, value: 0n, data: encodeFunctionData({ abi: ERC20_APPROVE_ABI, functionName: "approve", args: [escrow, amountMicros] }) },
    { to: escrow, value: 0n, data: encodeFunctionData({ abi: ESCROW_DEPOSIT_FOR_ABI, functionName: "depositFor", args: [wallet, amountMicros] }) },
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
    ? encodeFunctionData({ abi: ESCROW_CLAIM_ABI, functionName: "claimTo", args: [to] })
    : encodeFunctionData({ abi: ESCROW_CLAIM_ABI, functionName: "claim" });
  return { to: escrow, value: 0n, data };
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
    decoded = decodeFunctionData({ abi: SIMPLE_ACCOUNT_ABI, data: callData });
  } catch {
    return "selector";
  }
  if (decoded.functionName === "execute") return claimFlowViolation(callData, decoded.args, escrow);
  const [dest, value, func] = decoded.args;
  if (dest.length !== 2 || value.length !== 2 || func.length !== 2) return "not two calls";
  if (!isAddressEqual(dest[0], usdc) || !isAddressEqual(dest[1], escrow)) return "targets";
  if (value[0] !== 0n || value[1] !== 0n) return "value";
  try {
    const approve = decodeFunctionData({ abi: ERC20_APPROVE_ABI, data: func[0] });
    const deposit = decodeFunctionData({ abi: ESCROW_DEPOSIT_FOR_ABI, data: func[1] });
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
  const claimSelector = encodeFunctionData({ abi: ESCROW_CLAIM_ABI, functionName: "claim" });
  const claimToSelector = encodeFunctionData({ abi: ESCROW_CLAIM_ABI, functionName: "claimTo", args: [zeroAddress] }).slice(0, 10);
  if (func.length === 2 + 2 * 36 && selector === claimToSelector) {
    const word = BigInt(`0x${func.slice(10)}`);
    if (word >> 160n !== 0n) return "claim call";
    if (word === 0n) return "claim recipient";
  } else if (func.length !== 2 + 2 * 4 || selector !== claimSelector) {
    return "claim call";
  }
  const canonical = encodeFunctionData({ abi: SIMPLE_ACCOUNT_ABI, functionName: "execute", args: [dest, value, func] });
  if (canonical.toLowerCase() !== callData.toLowerCase()) return "claim encoding";
  return undefined;
}
