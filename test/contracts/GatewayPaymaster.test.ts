import { loadFixture } from "@nomicfoundation/hardhat-network-helpers";
import { expect } from "chai";
import hre from "hardhat";
import {
  concat,
  createPublicClient,
  custom,
  encodeAbiParameters,
  encodeFunctionData,
  getAddress,
  pad,
  parseAbi,
  slice,
  toFunctionSelector,
  toHex,
  zeroAddress,
  type Abi,
  type Address,
  type Hex,
} from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import entryPointArtifact from "@account-abstraction/contracts/artifacts/EntryPoint.json";
import { expectRevert } from "./helpers/errors";
import { gatewayFlowViolation } from "../../server/wallets/aa-flows";

const ACCOUNT_ABI = parseAbi([
  "function execute(address dest, uint256 value, bytes func)",
  "function executeBatch(address[] dest, uint256[] value, bytes[] func)",
]);
const CALLS_ABI = parseAbi([
  "function claim() returns (uint256)",
  "function claimTo(address recipient) returns (uint256)",
  "function approve(address spender, uint256 amount) returns (bool)",
  "function transfer(address to, uint256 amount) returns (bool)",
  "function depositFor(address account, uint256 amount)",
  "function requestExit(uint256 amount)",
  "function withdrawWithVoucher((address account, uint256 amount, uint256 nonce, uint256 deadline) voucher, bytes signature)",
]);

const PAYMASTER_VERIFICATION_GAS = 120_000n;
const SIG_FAILED = 1n;

type PackedUserOperation = {
  sender: Address;
  nonce: bigint;
  initCode: Hex;
  callData: Hex;
  accountGasLimits: Hex;
  preVerificationGas: bigint;
  gasFees: Hex;
  paymasterAndData: Hex;
  signature: Hex;
};

/**
 * A GatewayPaymaster over a real EntryPoint v0.7 (its published artifact) on Hardhat's network. The token,
 * escrow and factory are plain addresses: the paymaster only compares them with the operation's calldata.
 */
async function paymasterFixture() {
  const [deployer] = await hre.viem.getWalletClients();
  // Reverts are what these tests are about: no retries (Hardhat's client retries them, seconds each).
  const publicClient = createPublicClient({ transport: custom(hre.network.provider, { retryCount: 0 }) });
  const deployed = await deployer.deployContract({
    abi: entryPointArtifact.abi as Abi,
    bytecode: entryPointArtifact.bytecode as Hex,
    account: deployer.account,
  });
  const entryPoint = getAddress((await publicClient.waitForTransactionReceipt({ hash: deployed })).contractAddress!);
  const signer = privateKeyToAccount(generatePrivateKey());
  const token = privateKeyToAccount(generatePrivateKey()).address;
  const escrow = privateKeyToAccount(generatePrivateKey()).address;
  const factory = privateKeyToAccount(generatePrivateKey()).address;
  const paymaster = await hre.viem.deployContract("GatewayPaymaster", [entryPoint, token, escrow, factory, signer.address]);
  const sender = privateKeyToAccount(generatePrivateKey()).address;
  const recipient = privateKeyToAccount(generatePrivateKey()).address;
  const checkGatewayFlow = (op: PackedUserOperation) =>
    publicClient.readContract({ address: paymaster.address, abi: paymaster.abi, functionName: "checkGatewayFlow", args: [op] });
  return { publicClient, entryPoint, paymaster, checkGatewayFlow, signer, token, escrow, factory, sender, recipient };
}

type Fixture = Awaited<ReturnType<typeof paymasterFixture>>;

const execute = (dest: Address, value: bigint, func: Hex) =>
  encodeFunctionData({ abi: ACCOUNT_ABI, functionName: "execute", args: [dest, value, func] });
const claim = () => encodeFunctionData({ abi: CALLS_ABI, functionName: "claim" });
const claimTo = (recipient: Address) => encodeFunctionData({ abi: CALLS_ABI, functionName: "claimTo", args: [recipient] });

const batch = (dest: Address[], value: bigint[], func: Hex[]) =>
  encodeFunctionData({ abi: ACCOUNT_ABI, functionName: "executeBatch", args: [dest, value, func] });
const VOUCHER_SIGNATURE: Hex = `0x${"ab".repeat(65)}`;
const withdrawWithVoucher = (account: Address, amount: bigint, signature: Hex = VOUCHER_SIGNATURE) =>
  encodeFunctionData({
    abi: CALLS_ABI,
    functionName: "withdrawWithVoucher",
    args: [{ account, amount, nonce: 7n, deadline: 2_000_000_000n }, signature],
  });
const transfer = (to: Address, amount: bigint) => encodeFunctionData({ abi: CALLS_ABI, functionName: "transfer", args: [to, amount] });
/** The withdrawal flow of `f.sender` for `amount` to `to`, with `parts` replaced. */
const withdrawal = (f: Fixture, amount: bigint, to: Address, parts: { dest?: Address[]; value?: bigint[]; func?: Hex[] } = {}) =>
  batch(
    parts.dest ?? [f.escrow, f.token],
    parts.value ?? [0n, 0n],
    parts.func ?? [withdrawWithVoucher(f.sender, amount), transfer(to, amount)],
  );
/** Replaces the 32-byte word at byte `offset` (after the selector counts) of `data`. */
const withWord = (data: Hex, offset: number, word: Hex) =>
  (data.slice(0, 2 + 2 * offset) + pad(word, { size: 32 }).slice(2) + data.slice(2 + 2 * (offset + 32))) as Hex;

/** An operation of `sender` with `callData`, paymasterAndData carrying the window and `signature`. */
function userOp(f: Fixture, callData: Hex, overrides: Partial<PackedUserOperation> = {}): PackedUserOperation {
  return {
    sender: f.sender,
    nonce: 0n,
    initCode: "0x",
    callData,
    accountGasLimits: concat([pad(toHex(100_000n), { size: 16 }), pad(toHex(200_000n), { size: 16 })]),
    preVerificationGas: 50_000n,
    gasFees: concat([pad(toHex(1_000_000n), { size: 16 }), pad(toHex(2_000_000_000n), { size: 16 })]),
    paymasterAndData: "0x",
    signature: "0x",
    ...overrides,
  };
}

/** Fills paymasterAndData, signed by `signer` over the paymaster's own getHash. */
async function sponsored(f: Fixture, op: PackedUserOperation, signer = f.signer, validity = { validUntil: 2_000_000_000, validAfter: 0 }) {
  const head = concat([f.paymaster.address, pad(toHex(PAYMASTER_VERIFICATION_GAS), { size: 16 }), pad(toHex(0n), { size: 16 })]);
  const window = encodeAbiParameters([{ type: "uint48" }, { type: "uint48" }], [validity.validUntil, validity.validAfter]);
  const unsigned = { ...op, paymasterAndData: concat([head, window, `0x${"00".repeat(65)}`]) };
  const hash = (await f.paymaster.read.getHash([unsigned, validity.validUntil, validity.validAfter])) as Hex;
  return { ...op, paymasterAndData: concat([head, window, await signer.signMessage({ message: { raw: hash } })]) };
}

/** The selectors the refusals name. */
const SELECTOR = {
  claim: toFunctionSelector("claim()"),
  claimTo: toFunctionSelector("claimTo(address)"),
  approve: toFunctionSelector("approve(address,uint256)"),
  transfer: toFunctionSelector("transfer(address,uint256)"),
  depositFor: toFunctionSelector("depositFor(address,uint256)"),
  requestExit: toFunctionSelector("requestExit(uint256)"),
  withdrawWithVoucher: toFunctionSelector("withdrawWithVoucher((address,uint256,uint256,uint256),bytes)"),
  none: "0x00000000",
} as const;

/** A refusal: the custom error's name and its arguments. */
type Refusal = [errorName: string, args: readonly unknown[]];

/**
 * Checks `op` is refused with exactly `refusal`: by checkGatewayFlow, by the paymaster's validation even when the
 * gateway's own key signed it (the EntryPoint never gets a validation), and by the gateway's off-chain mirror
 * (server/wallets/aa-flows.ts), which must name the same error with the same arguments.
 */
async function expectRefused(f: Fixture, op: PackedUserOperation, [errorName, args]: Refusal): Promise<void> {
  await expectRevert(f.checkGatewayFlow(op), errorName, args);
  await expectRevert(validate(f, await sponsored(f, op)), errorName, args, [f.paymaster.abi as Abi]);
  // Off chain an operation names its factory, not its initCode: an initCode too short to name one has no mirror.
  if (op.initCode !== "0x" && (op.initCode.length - 2) / 2 < 20) return;
  const factory = op.initCode === "0x" ? undefined : slice(op.initCode, 0, 20);
  const offChain = gatewayFlowViolation({
    sender: op.sender,
    callData: op.callData,
    factory,
    usdc: f.token,
    escrow: f.escrow,
    accountFactory: f.factory,
  });
  expect(offChain, "the off-chain mirror").to.deep.equal({ errorName, args });
}

/** What the EntryPoint would get back from the paymaster's validation (called as the EntryPoint). */
async function validate(f: Fixture, op: PackedUserOperation): Promise<{ sigFailed: bigint; validUntil: bigint; validAfter: bigint }> {
  const { result } = await f.publicClient.simulateContract({
    account: f.entryPoint,
    address: f.paymaster.address,
    abi: f.paymaster.abi,
    functionName: "validatePaymasterUserOp",
    args: [op, `0x${"11".repeat(32)}`, 10n ** 15n],
  });
  const validationData = (result as readonly [Hex, bigint])[1];
  return {
    sigFailed: validationData & ((1n << 160n) - 1n),
    validUntil: (validationData >> 160n) & ((1n << 48n) - 1n),
    validAfter: validationData >> 208n,
  };
}

describe("GatewayPaymaster", () => {
  describe("the claim flow: execute(escrow, 0, claim() | claimTo(recipient))", () => {
    it("accepts claim() and claimTo(recipient) to the escrow, with or without deploying the account through the factory", async () => {
      const f = await loadFixture(paymasterFixture);
      const initCode = concat([f.factory, "0x5fbfb9cf"]);
      for (const callData of [execute(f.escrow, 0n, claim()), execute(f.escrow, 0n, claimTo(f.recipient))]) {
        await f.checkGatewayFlow(userOp(f, callData));
        await f.checkGatewayFlow(userOp(f, callData, { initCode }));
      }
    });

    it("still accepts the deposit flow (approve + depositFor of the sender)", async () => {
      const f = await loadFixture(paymasterFixture);
      const callData = encodeFunctionData({
        abi: ACCOUNT_ABI,
        functionName: "executeBatch",
        args: [
          [f.token, f.escrow],
          [0n, 0n],
          [
            encodeFunctionData({ abi: CALLS_ABI, functionName: "approve", args: [f.escrow, 5n] }),
            encodeFunctionData({ abi: CALLS_ABI, functionName: "depositFor", args: [f.sender, 5n] }),
          ],
        ],
      });
      await f.checkGatewayFlow(userOp(f, callData));
    });

    const refusals: [string, (f: Fixture) => Partial<PackedUserOperation>, string, (f: Fixture) => readonly unknown[]][] = [
      [
        "a claim sent to another target (the token)",
        (f) => ({ callData: execute(f.token, 0n, claim()) }),
        "PaymasterClaimTarget",
        (f) => [f.token],
      ],
      [
        "a claim sent to an address that is not the escrow",
        (f) => ({ callData: execute(f.recipient, 0n, claim()) }),
        "PaymasterClaimTarget",
        (f) => [f.recipient],
      ],
      ["a claim that also sends ETH (value 1)", (f) => ({ callData: execute(f.escrow, 1n, claim()) }), "PaymasterClaimValue", () => [1n]],
      [
        "another escrow function (requestExit)",
        (f) => ({ callData: execute(f.escrow, 0n, encodeFunctionData({ abi: CALLS_ABI, functionName: "requestExit", args: [1n] })) }),
        "PaymasterClaimCall",
        () => [SELECTOR.requestExit, 36n],
      ],
      [
        "a single depositFor to the escrow",
        (f) => ({
          callData: execute(f.escrow, 0n, encodeFunctionData({ abi: CALLS_ABI, functionName: "depositFor", args: [f.sender, 1n] })),
        }),
        "PaymasterClaimCall",
        () => [SELECTOR.depositFor, 68n],
      ],
      [
        "a token transfer out",
        (f) => ({
          callData: execute(f.token, 0n, encodeFunctionData({ abi: CALLS_ABI, functionName: "transfer", args: [f.recipient, 1n] })),
        }),
        "PaymasterClaimTarget",
        (f) => [f.token],
      ],
      ["an empty call to the escrow", (f) => ({ callData: execute(f.escrow, 0n, "0x") }), "PaymasterClaimCall", () => [SELECTOR.none, 0n]],
      [
        "claim() with bytes after it",
        (f) => ({ callData: execute(f.escrow, 0n, concat([claim(), "0x00"])) }),
        "PaymasterClaimCall",
        () => [SELECTOR.claim, 5n],
      ],
      [
        "claimTo with a word too many",
        (f) => ({ callData: execute(f.escrow, 0n, concat([claimTo(f.recipient), pad("0x01", { size: 32 })])) }),
        "PaymasterClaimCall",
        () => [SELECTOR.claimTo, 68n],
      ],
      [
        "claimTo with dirty upper bits in the address word",
        (f) => ({
          callData: execute(
            f.escrow,
            0n,
            concat([`0x${claimTo(f.recipient).slice(2, 10)}` as Hex, "0x01", `0x${"00".repeat(11)}${f.recipient.slice(2)}` as Hex]),
          ),
        }),
        "PaymasterClaimCall",
        () => [SELECTOR.claimTo, 36n],
      ],
      [
        "claimTo(0), which the escrow would refuse anyway",
        (f) => ({ callData: execute(f.escrow, 0n, claimTo(zeroAddress)) }),
        "PaymasterClaimToZero",
        () => [],
      ],
      [
        "a claim with a word appended after the standard encoding",
        (f) => ({ callData: concat([execute(f.escrow, 0n, claim()), pad("0x01", { size: 32 })]) }),
        "PaymasterClaimEncoding",
        () => [],
      ],
      [
        "a claim whose bytes sit at an unusual offset",
        (f) => ({
          // execute(escrow, 0, claim()) with the bytes argument one word further on and a junk word between.
          callData: concat([
            execute(f.escrow, 0n, claim()).slice(0, 2 + 8 + 128) as Hex,
            pad("0x80", { size: 32 }),
            pad("0x00", { size: 32 }),
            pad("0x04", { size: 32 }),
            pad(claim(), { size: 32, dir: "right" }),
          ]),
        }),
        "PaymasterClaimEncoding",
        () => [],
      ],
      [
        "a call that is neither execute nor executeBatch",
        () => ({ callData: encodeFunctionData({ abi: CALLS_ABI, functionName: "claim" }) }),
        "PaymasterUnknownSelector",
        () => [SELECTOR.claim],
      ],
      ["calldata shorter than a selector", () => ({ callData: "0xb61d27" }), "PaymasterUnknownSelector", () => [SELECTOR.none]],
      [
        "an account deployed by another factory",
        (f) => ({ callData: execute(f.escrow, 0n, claim()), initCode: concat([f.recipient, "0x5fbfb9cf"]) }),
        "PaymasterUnknownFactory",
        (f) => [f.recipient],
      ],
      [
        "an initCode too short to name a factory",
        (f) => ({ callData: execute(f.escrow, 0n, claim()), initCode: slice(f.factory, 0, 19) }),
        "PaymasterUnknownFactory",
        () => [zeroAddress],
      ],
    ];

    for (const [what, overrides, errorName, args] of refusals) {
      it(`refuses ${what} with ${errorName}`, async () => {
        const f = await loadFixture(paymasterFixture);
        await expectRefused(f, userOp(f, "0x", overrides(f)), [errorName, args(f)]);
      });
    }
  });

  describe("the deposit flow: executeBatch([usdc, escrow], [0, 0], [approve(escrow, amount), depositFor(sender, amount)])", () => {
    const approve = (spender: Address, amount: bigint) =>
      encodeFunctionData({ abi: CALLS_ABI, functionName: "approve", args: [spender, amount] });
    const depositFor = (account: Address, amount: bigint) =>
      encodeFunctionData({ abi: CALLS_ABI, functionName: "depositFor", args: [account, amount] });
    /** The deposit flow of `f.sender` for 5, with `parts` replaced. */
    const deposit = (f: Fixture, parts: { dest?: Address[]; value?: bigint[]; func?: Hex[] } = {}) =>
      batch(parts.dest ?? [f.token, f.escrow], parts.value ?? [0n, 0n], parts.func ?? [approve(f.escrow, 5n), depositFor(f.sender, 5n)]);

    const refusals: [string, (f: Fixture) => Hex, string, (f: Fixture) => readonly unknown[]][] = [
      [
        "calls to other targets",
        (f) => deposit(f, { dest: [f.token, f.recipient] }),
        "PaymasterDepositTargets",
        (f) => [f.token, f.recipient],
      ],
      ["ETH sent with the approve", (f) => deposit(f, { value: [2n, 0n] }), "PaymasterDepositValue", () => [2n, 0n]],
      [
        "an allowance for another spender",
        (f) => deposit(f, { func: [approve(f.recipient, 5n), depositFor(f.sender, 5n)] }),
        "PaymasterDepositApprove",
        (f) => [SELECTOR.approve, f.recipient],
      ],
      [
        "an approve with a word appended",
        (f) => deposit(f, { func: [concat([approve(f.escrow, 5n), pad("0x01", { size: 32 })]), depositFor(f.sender, 5n)] }),
        "PaymasterDepositApprove",
        () => [SELECTOR.none, zeroAddress],
      ],
      [
        "a deposit credited to someone else",
        (f) => deposit(f, { func: [approve(f.escrow, 5n), depositFor(f.recipient, 5n)] }),
        "PaymasterDepositFor",
        (f) => [SELECTOR.depositFor, f.recipient],
      ],
      [
        "approve and deposit of different amounts",
        (f) => deposit(f, { func: [approve(f.escrow, 6n), depositFor(f.sender, 5n)] }),
        "PaymasterDepositAmount",
        () => [6n, 5n],
      ],
      [
        "a deposit of zero",
        (f) => deposit(f, { func: [approve(f.escrow, 0n), depositFor(f.sender, 0n)] }),
        "PaymasterDepositAmount",
        () => [0n, 0n],
      ],
    ];

    for (const [what, callData, errorName, args] of refusals) {
      it(`refuses ${what} with ${errorName}`, async () => {
        const f = await loadFixture(paymasterFixture);
        await expectRefused(f, userOp(f, callData(f)), [errorName, args(f)]);
      });
    }
  });

  describe("the withdrawal flow: executeBatch([escrow, usdc], [0, 0], [withdrawWithVoucher(voucher, signature), transfer(to, amount)])", () => {
    it("accepts the sender's own voucher passed on whole to `to`, with or without deploying the account", async () => {
      const f = await loadFixture(paymasterFixture);
      const callData = withdrawal(f, 1_500_000n, f.recipient);
      await f.checkGatewayFlow(userOp(f, callData));
      await f.checkGatewayFlow(userOp(f, callData, { initCode: concat([f.factory, "0x5fbfb9cf"]) }));
    });

    it("validates a withdrawal the gateway signed, and fails it when the recipient is changed after signing", async () => {
      const f = await loadFixture(paymasterFixture);
      const signed = await sponsored(f, userOp(f, withdrawal(f, 5n, f.recipient)));
      expect((await validate(f, signed)).sigFailed).to.equal(0n);
      const altered = { ...signed, callData: withdrawal(f, 5n, privateKeyToAccount(generatePrivateKey()).address) };
      expect((await validate(f, altered)).sigFailed).to.equal(SIG_FAILED);
    });

    const stranger = "0x000000000000000000000000000000000000dEaD" as Address;
    const refusals: [string, (f: Fixture) => Hex, string, (f: Fixture) => readonly unknown[]][] = [
      [
        "one call only (the voucher without the transfer)",
        (f) => batch([f.escrow], [0n], [withdrawWithVoucher(f.sender, 5n)]),
        "PaymasterNotTwoCalls",
        () => [1n, 1n, 1n],
      ],
      [
        "three calls (a second transfer)",
        (f) =>
          batch(
            [f.escrow, f.token, f.token],
            [0n, 0n, 0n],
            [withdrawWithVoucher(f.sender, 5n), transfer(f.recipient, 5n), transfer(f.recipient, 5n)],
          ),
        "PaymasterNotTwoCalls",
        () => [3n, 3n, 3n],
      ],
      [
        "the calls in the other order (token first), taken for a deposit",
        (f) => batch([f.token, f.escrow], [0n, 0n], [transfer(f.recipient, 5n), withdrawWithVoucher(f.sender, 5n)]),
        "PaymasterDepositApprove",
        (f) => [SELECTOR.transfer, f.recipient],
      ],
      ["ETH sent with the voucher", (f) => withdrawal(f, 5n, f.recipient, { value: [1n, 0n] }), "PaymasterWithdrawValue", () => [1n, 0n]],
      ["ETH sent with the transfer", (f) => withdrawal(f, 5n, f.recipient, { value: [0n, 1n] }), "PaymasterWithdrawValue", () => [0n, 1n]],
      [
        "another escrow call (requestExit) in the voucher's place",
        (f) =>
          withdrawal(f, 5n, f.recipient, {
            func: [encodeFunctionData({ abi: CALLS_ABI, functionName: "requestExit", args: [5n] }), transfer(f.recipient, 5n)],
          }),
        "PaymasterWithdrawCall",
        () => [SELECTOR.requestExit, 36n],
      ],
      [
        "a voucher signature of 64 bytes",
        (f) =>
          withdrawal(f, 5n, f.recipient, { func: [withdrawWithVoucher(f.sender, 5n, `0x${"ab".repeat(64)}`), transfer(f.recipient, 5n)] }),
        "PaymasterWithdrawCall",
        () => [SELECTOR.withdrawWithVoucher, 260n],
      ],
      [
        "a voucher signature of 66 bytes",
        (f) =>
          withdrawal(f, 5n, f.recipient, { func: [withdrawWithVoucher(f.sender, 5n, `0x${"ab".repeat(66)}`), transfer(f.recipient, 5n)] }),
        "PaymasterWithdrawCall",
        () => [SELECTOR.withdrawWithVoucher, 292n],
      ],
      [
        "a voucher signature at an unusual offset",
        (f) =>
          withdrawal(f, 5n, f.recipient, {
            func: [withWord(withdrawWithVoucher(f.sender, 5n), 4 + 128, "0xc0"), transfer(f.recipient, 5n)],
          }),
        "PaymasterWithdrawCall",
        () => [SELECTOR.withdrawWithVoucher, 292n],
      ],
      [
        "a signature length word that lies",
        (f) =>
          withdrawal(f, 5n, f.recipient, {
            func: [withWord(withdrawWithVoucher(f.sender, 5n), 4 + 160, "0x40"), transfer(f.recipient, 5n)],
          }),
        "PaymasterWithdrawCall",
        () => [SELECTOR.withdrawWithVoucher, 292n],
      ],
      [
        "dirty padding after the voucher signature",
        (f) =>
          withdrawal(f, 5n, f.recipient, {
            func: [withWord(withdrawWithVoucher(f.sender, 5n), 4 + 256, `0x${"ab".repeat(31)}01`), transfer(f.recipient, 5n)],
          }),
        "PaymasterWithdrawCall",
        () => [SELECTOR.withdrawWithVoucher, 292n],
      ],
      [
        "a voucher account word with dirty upper bits",
        (f) =>
          withdrawal(f, 5n, f.recipient, {
            func: [withWord(withdrawWithVoucher(f.sender, 5n), 4, `0x01${"00".repeat(11)}${f.sender.slice(2)}`), transfer(f.recipient, 5n)],
          }),
        "PaymasterWithdrawCall",
        () => [SELECTOR.withdrawWithVoucher, 292n],
      ],
      [
        "another account's voucher",
        (f) => withdrawal(f, 5n, f.recipient, { func: [withdrawWithVoucher(stranger, 5n), transfer(f.recipient, 5n)] }),
        "PaymasterWithdrawAccount",
        (f) => [stranger, f.sender],
      ],
      [
        "an approve in the transfer's place",
        (f) =>
          withdrawal(f, 5n, f.recipient, {
            func: [
              withdrawWithVoucher(f.sender, 5n),
              encodeFunctionData({ abi: CALLS_ABI, functionName: "approve", args: [f.recipient, 5n] }),
            ],
          }),
        "PaymasterTransferCall",
        () => [SELECTOR.approve, 68n],
      ],
      [
        "a transfer with a word appended",
        (f) =>
          withdrawal(f, 5n, f.recipient, {
            func: [withdrawWithVoucher(f.sender, 5n), concat([transfer(f.recipient, 5n), pad("0x01", { size: 32 })])],
          }),
        "PaymasterTransferCall",
        () => [SELECTOR.transfer, 100n],
      ],
      ["a transfer to the zero address", (f) => withdrawal(f, 5n, zeroAddress), "PaymasterTransferToZero", () => []],
      [
        "a transfer of less than the voucher",
        (f) => withdrawal(f, 5n, f.recipient, { func: [withdrawWithVoucher(f.sender, 5n), transfer(f.recipient, 4n)] }),
        "PaymasterWithdrawAmount",
        () => [5n, 4n],
      ],
      [
        "a transfer of more than the voucher",
        (f) => withdrawal(f, 5n, f.recipient, { func: [withdrawWithVoucher(f.sender, 5n), transfer(f.recipient, 6n)] }),
        "PaymasterWithdrawAmount",
        () => [5n, 6n],
      ],
      ["a voucher of zero", (f) => withdrawal(f, 0n, f.recipient), "PaymasterWithdrawAmount", () => [0n, 0n]],
      [
        "a word appended after the standard encoding",
        (f) => concat([withdrawal(f, 5n, f.recipient), pad("0x01", { size: 32 })]),
        "PaymasterWithdrawEncoding",
        () => [],
      ],
    ];

    for (const [what, callData, errorName, args] of refusals) {
      it(`refuses ${what} with ${errorName}`, async () => {
        const f = await loadFixture(paymasterFixture);
        await expectRefused(f, userOp(f, callData(f)), [errorName, args(f)]);
      });
    }
  });

  describe("the gateway signer's approval of that very operation", () => {
    it("validates a claim the gateway signed, within the window it signed", async () => {
      const f = await loadFixture(paymasterFixture);
      const op = await sponsored(f, userOp(f, execute(f.escrow, 0n, claimTo(f.recipient))), f.signer, {
        validUntil: 1_900_000_000,
        validAfter: 1_000,
      });
      expect(await validate(f, op)).to.deep.equal({ sigFailed: 0n, validUntil: 1_900_000_000n, validAfter: 1_000n });
    });

    it("fails the validation of a claim signed by any other key", async () => {
      const f = await loadFixture(paymasterFixture);
      const op = await sponsored(f, userOp(f, execute(f.escrow, 0n, claim())), privateKeyToAccount(generatePrivateKey()));
      expect((await validate(f, op)).sigFailed).to.equal(SIG_FAILED);
    });

    it("fails the validation when the signed claim() is turned into a claimTo(someone else)", async () => {
      const f = await loadFixture(paymasterFixture);
      const signed = await sponsored(f, userOp(f, execute(f.escrow, 0n, claim())));
      const altered = { ...signed, callData: execute(f.escrow, 0n, claimTo(f.recipient)) };
      expect((await validate(f, signed)).sigFailed).to.equal(0n);
      expect((await validate(f, altered)).sigFailed).to.equal(SIG_FAILED);
    });

    it("fails the validation when another sender reuses the signature", async () => {
      const f = await loadFixture(paymasterFixture);
      const signed = await sponsored(f, userOp(f, execute(f.escrow, 0n, claim())));
      expect((await validate(f, { ...signed, sender: f.recipient })).sigFailed).to.equal(SIG_FAILED);
    });
  });
});
