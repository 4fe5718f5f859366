import { expect } from "chai";
import { concat, encodeFunctionData, pad, parseAbi, toFunctionSelector, zeroAddress, type Address, type Hex } from "viem";
import { escrowWithdrawCalls, gatewayFlowViolation, type GatewayFlowViolation } from "../../server/wallets/aa-flows";

const ACCOUNT_ABI = parseAbi(["function executeBatch(address[] dest, uint256[] value, bytes[] func)"]);
const usdc: Address = "0x1111111111111111111111111111111111111111";
const escrow: Address = "0x2222222222222222222222222222222222222222";
const accountFactory: Address = "0x3333333333333333333333333333333333333333";
const sender: Address = "0x4444444444444444444444444444444444444444";
const to: Address = "0x5555555555555555555555555555555555555555";
const signature: Hex = `0x${"ab".repeat(65)}`;

/** The withdrawal flow's calldata, built by the gateway's own builder, with calls optionally altered. */
function withdrawal(
  amount = 1_500_000n,
  alter: (func: Hex[]) => Hex[] = (f) => f,
  account: Address = sender,
  recipient: Address = to,
): Hex {
  const calls = escrowWithdrawCalls({
    usdc,
    escrow,
    voucher: { account, amount, nonce: 9n, deadline: 2_000_000_000n },
    signature,
    to: recipient,
  });
  return encodeFunctionData({
    abi: ACCOUNT_ABI,
    functionName: "executeBatch",
    args: [calls.map((c) => c.to), [0n, 0n], alter(calls.map((c) => c.data))],
  });
}
const transfer = (recipient: Address, amount: bigint) =>
  encodeFunctionData({
    abi: parseAbi(["function transfer(address to, uint256 amount) returns (bool)"]),
    functionName: "transfer",
    args: [recipient, amount],
  });
const violation = (callData: Hex) => gatewayFlowViolation({ sender, callData, usdc, escrow, accountFactory });

/** The off-chain mirror of GatewayPaymaster's withdrawal rules (the contract tests check it names the errors the contract reverts with). */
describe("gatewayFlowViolation: the withdrawal flow", () => {
  it("accepts the sender's voucher passed on whole to `to`", () => {
    expect(violation(withdrawal())).to.equal(undefined);
  });

  const cases: [string, Hex, GatewayFlowViolation][] = [
    ["another account's voucher", withdrawal(5n, undefined, to), { errorName: "PaymasterWithdrawAccount", args: [to, sender] }],
    ["a transfer to the zero address", withdrawal(5n, undefined, sender, zeroAddress), { errorName: "PaymasterTransferToZero", args: [] }],
    [
      "a transfer of another amount",
      withdrawal(5n, (f) => [f[0], transfer(to, 6n)]),
      { errorName: "PaymasterWithdrawAmount", args: [5n, 6n] },
    ],
    ["a voucher of zero", withdrawal(0n), { errorName: "PaymasterWithdrawAmount", args: [0n, 0n] }],
    [
      "dirty padding after the signature",
      withdrawal(5n, (f) => [`${f[0].slice(0, -2)}01` as Hex, f[1]]),
      {
        errorName: "PaymasterWithdrawCall",
        args: [toFunctionSelector("withdrawWithVoucher((address,uint256,uint256,uint256),bytes)"), 292n],
      },
    ],
    [
      "a transfer with a word appended",
      withdrawal(5n, (f) => [f[0], concat([f[1], pad("0x01", { size: 32 })])]),
      { errorName: "PaymasterTransferCall", args: [toFunctionSelector("transfer(address,uint256)"), 100n] },
    ],
    [
      "a word appended to the whole call",
      concat([withdrawal(), pad("0x01", { size: 32 })]),
      { errorName: "PaymasterWithdrawEncoding", args: [] },
    ],
  ];
  for (const [what, callData, refusal] of cases) {
    it(`refuses ${what} with ${refusal.errorName}`, () => {
      expect(violation(callData)).to.deep.equal(refusal);
    });
  }
});
