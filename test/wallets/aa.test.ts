import { expect } from "chai";
import { toSimpleSmartAccount } from "permissionless/accounts";
import {
  concat,
  decodeErrorResult,
  encodeAbiParameters,
  encodeFunctionData,
  http,
  parseAbi,
  toFunctionSelector,
  type Address,
  type Hex,
} from "viem";
import { createBundlerClient, type GetPaymasterDataParameters } from "viem/account-abstraction";
import { generatePrivateKey, privateKeyToAccount, type LocalAccount } from "viem/accounts";
import {
  ENTRY_POINT_V07,
  PAYMASTER_VERIFICATION_GAS,
  SIMPLE_ACCOUNT_FACTORY_V07,
  SponsorshipRefused,
  gatewayPaymaster,
  paymasterHash,
} from "../../server/wallets/aa";
import { escrowDepositCalls, gatewayFlowViolation, type Call, type GatewayFlowViolation } from "../../server/wallets/aa-flows";
import { gatewayPaymasterAbi } from "../../server/chain/abi";
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { startBundler } from "../../server/devstack/bundler";
import { freePort } from "../../server/devstack/local-node";
import { EXECUTOR_INDEX, UTILITY_INDEX, devPrivateKey, startAaStack, type AaStack } from "../helpers/aa-stack";

const USDC = 1_000_000n;
const ABI = parseAbi([
  "function balanceOf(address) view returns (uint256)",
  "function balances(address) view returns (uint256)",
  "function transfer(address to, uint256 amount) returns (bool)",
  "function approve(address spender, uint256 amount) returns (bool)",
  "function depositFor(address account, uint256 amount)",
  "function requestExit(uint256 amount)",
  "event Deposited(address indexed account, address indexed from, uint256 amount, uint256 balance)",
]);

describe("account abstraction on a local chain: EntryPoint v0.7, SimpleAccount, the gateway paymaster, Alto", function () {
  this.timeout(60_000);
  let stack: AaStack;

  before(async () => {
    stack = await startAaStack();
  });
  after(async () => {
    await stack?.stop();
  });

  const newAccount = async (owner: LocalAccount = privateKeyToAccount(generatePrivateKey())) =>
    toSimpleSmartAccount({ client: stack.node.publicClient, owner, entryPoint: { address: ENTRY_POINT_V07, version: "0.7" } });
  const read = (address: Address, functionName: "balanceOf" | "balances", who: Address) =>
    stack.node.publicClient.readContract({ address, abi: ABI, functionName, args: [who] });
  const bundlerFor = (account: Awaited<ReturnType<typeof newAccount>>, paymaster: ReturnType<typeof gatewayPaymaster>) =>
    createBundlerClient({ client: stack.node.publicClient, transport: http(stack.bundler.url, { retryCount: 0 }), account, paymaster });
  const gateway = () =>
    gatewayPaymaster({ deployment: stack.aa, usdc: stack.deployment.usdc, escrow: stack.deployment.escrow, signer: stack.paymasterSigner });

  /** Paymaster actions that sign whatever they are given with `signer`: what a leaked key, or a bug, would do. */
  const signAnything = (signer: LocalAccount): ReturnType<typeof gatewayPaymaster> => {
    const window = { validUntil: Math.floor(Date.now() / 1000) + 600, validAfter: 0 };
    const data = (signature: Hex) =>
      concat([encodeAbiParameters([{ type: "uint48" }, { type: "uint48" }], [window.validUntil, window.validAfter]), signature]);
    const fields = {
      paymaster: stack.aa.paymaster,
      paymasterVerificationGasLimit: PAYMASTER_VERIFICATION_GAS,
      paymasterPostOpGasLimit: 0n,
    };
    return {
      async getPaymasterStubData() {
        return { ...fields, paymasterData: data(`0x${"ff".repeat(15)}f0${"00".repeat(16)}7${"a".repeat(63)}1c`) };
      },
      async getPaymasterData(op: GetPaymasterDataParameters) {
        const userOperation = { ...op, ...fields } as Parameters<typeof paymasterHash>[0]["userOperation"];
        const hash = paymasterHash({ userOperation, paymaster: stack.aa.paymaster, chainId: op.chainId, ...window });
        return { ...fields, paymasterData: data(await signer.signMessage({ message: { raw: hash } })) };
      },
    };
  };

  it("puts EntryPoint v0.7 and SimpleAccountFactory at their canonical addresses, and a funded paymaster bound to the gateway", async () => {
    for (const address of [ENTRY_POINT_V07, SIMPLE_ACCOUNT_FACTORY_V07, stack.aa.paymaster]) {
      expect((await stack.node.publicClient.getCode({ address }))?.length, address).to.be.greaterThan(2);
    }
    const pm = (functionName: "token" | "escrow" | "accountFactory" | "verifyingSigner") =>
      stack.node.publicClient.readContract({ address: stack.aa.paymaster, abi: gatewayPaymasterAbi, functionName });
    expect(await pm("token")).to.equal(stack.deployment.usdc);
    expect(await pm("escrow")).to.equal(stack.deployment.escrow);
    expect(await pm("accountFactory")).to.equal(SIMPLE_ACCOUNT_FACTORY_V07);
    expect(await pm("verifyingSigner")).to.equal(stack.paymasterSigner.address);
    const deposit = await stack.node.publicClient.readContract({
      address: stack.aa.paymaster,
      abi: gatewayPaymasterAbi,
      functionName: "getDeposit",
    });
    expect(deposit).to.equal(10n ** 18n);
  });

  it("runs Alto with its keys out of the command line (no process listing shows them)", function () {
    if (process.platform !== "linux") this.skip();
    const commandLine = readFileSync(`/proc/${stack.bundler.pid}/cmdline`, "utf8");
    expect(commandLine).to.contain("--safe-mode");
    for (const index of [EXECUTOR_INDEX, UTILITY_INDEX]) expect(commandLine).to.not.contain(devPrivateKey(index).slice(2));
  });

  it("starts Alto on another port when the free one it found is taken first, never taking the taker for it", async () => {
    // The port's taker answers as another Alto would, with the same EntryPoint: only the guard's word that our Alto
    // listens counts.
    const taker = createServer((req, res) => {
      let body = "";
      req.on("data", (c: Buffer) => (body += c.toString()));
      req.on("end", () => {
        const { id } = JSON.parse(body) as { id: number };
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", id, result: [ENTRY_POINT_V07] }));
      });
    });
    await new Promise<void>((resolve) => taker.listen(0, "127.0.0.1", resolve));
    const taken = (taker.address() as AddressInfo).port;
    const offered: number[] = [];
    const bundler = await startBundler({
      rpcUrl: stack.node.rpcUrl,
      executorPrivateKeys: [devPrivateKey(EXECUTOR_INDEX)],
      utilityPrivateKey: devPrivateKey(UTILITY_INDEX),
      choosePort: async () => {
        offered.push(offered.length === 0 ? taken : await freePort());
        return offered[offered.length - 1];
      },
    }).finally(() => taker.close());
    try {
      expect(offered).to.have.length(2);
      expect(bundler.url).to.equal(`http://127.0.0.1:${offered[1]}/rpc`);
    } finally {
      await bundler.stop();
    }
  });

  it("a counterfactual account with no ETH moves its USDC into the escrow in one sponsored UserOperation (approve + depositFor)", async () => {
    const account = await newAccount();
    expect(await stack.node.publicClient.getCode({ address: account.address })).to.equal(undefined);
    await stack.mint(account.address, 5n * USDC);
    const depositBefore = await stack.node.publicClient.readContract({
      address: stack.aa.paymaster,
      abi: gatewayPaymasterAbi,
      functionName: "getDeposit",
    });

    const bundler = bundlerFor(account, gateway());
    const hash = await bundler.sendUserOperation({
      calls: escrowDepositCalls({
        usdc: stack.deployment.usdc,
        escrow: stack.deployment.escrow,
        wallet: account.address,
        amountMicros: 5n * USDC,
      }),
    });
    const receipt = await bundler.waitForUserOperationReceipt({ hash, pollingInterval: 100, timeout: 30_000 });

    expect(receipt.success).to.equal(true);
    expect(receipt.paymaster).to.equal(stack.aa.paymaster);
    expect(await read(stack.deployment.escrow, "balances", account.address)).to.equal(5n * USDC);
    expect(await read(stack.deployment.usdc, "balanceOf", account.address)).to.equal(0n);
    expect(await stack.node.publicClient.getBalance({ address: account.address })).to.equal(0n);
    const depositAfter = await stack.node.publicClient.readContract({
      address: stack.aa.paymaster,
      abi: gatewayPaymasterAbi,
      functionName: "getDeposit",
    });
    expect(depositAfter < depositBefore, "the paymaster paid the gas").to.equal(true);
    const deposits = receipt.logs.filter((log) => log.address.toLowerCase() === stack.deployment.escrow.toLowerCase());
    expect(deposits).to.have.length(1);
  });

  describe("refusing anything but the gateway's flows", () => {
    const usdcCall = (data: Hex): Call => ({ to: stack.deployment.usdc, value: 0n, data });
    const escrowCall = (data: Hex): Call => ({ to: stack.deployment.escrow, value: 0n, data });
    const stranger = privateKeyToAccount(generatePrivateKey()).address;
    const flows: [string, (wallet: Address) => Call[], GatewayFlowViolation["errorName"], (wallet: Address) => readonly unknown[]][] = [
      [
        "a plain USDC transfer out",
        () => [usdcCall(encodeFunctionData({ abi: ABI, functionName: "transfer", args: [stranger, USDC] }))],
        "PaymasterClaimTarget",
        () => [stack.deployment.usdc],
      ],
      [
        "an escrow call that is not a claim (requestExit)",
        () => [escrowCall(encodeFunctionData({ abi: ABI, functionName: "requestExit", args: [USDC] }))],
        "PaymasterClaimCall",
        () => [toFunctionSelector("requestExit(uint256)"), 36n],
      ],
      [
        "a deposit credited to someone else",
        () => [
          usdcCall(encodeFunctionData({ abi: ABI, functionName: "approve", args: [stack.deployment.escrow, USDC] })),
          escrowCall(encodeFunctionData({ abi: ABI, functionName: "depositFor", args: [stranger, USDC] })),
        ],
        "PaymasterDepositFor",
        () => [toFunctionSelector("depositFor(address,uint256)"), stranger],
      ],
      [
        "an allowance for another spender",
        (wallet) => [
          usdcCall(encodeFunctionData({ abi: ABI, functionName: "approve", args: [stranger, USDC] })),
          escrowCall(encodeFunctionData({ abi: ABI, functionName: "depositFor", args: [wallet, USDC] })),
        ],
        "PaymasterDepositApprove",
        () => [toFunctionSelector("approve(address,uint256)"), stranger],
      ],
      [
        "approve and deposit of different amounts",
        (wallet) => [
          usdcCall(encodeFunctionData({ abi: ABI, functionName: "approve", args: [stack.deployment.escrow, 2n * USDC] })),
          escrowCall(encodeFunctionData({ abi: ABI, functionName: "depositFor", args: [wallet, USDC] })),
        ],
        "PaymasterDepositAmount",
        () => [2n * USDC, USDC],
      ],
    ];

    for (const [what, calls, errorName, args] of flows) {
      it(`the gateway will not sign ${what}, and the paymaster contract refuses it even when signed`, async () => {
        const account = await newAccount();
        await stack.mint(account.address, 3n * USDC);
        const op = { sender: account.address, callData: await account.encodeCalls(calls(account.address)) };
        const violation = { errorName, args: args(account.address) } as GatewayFlowViolation;
        expect(
          gatewayFlowViolation({
            ...op,
            usdc: stack.deployment.usdc,
            escrow: stack.deployment.escrow,
            accountFactory: SIMPLE_ACCOUNT_FACTORY_V07,
          }),
        ).to.deep.equal(violation);

        // Off chain: the gateway's paymaster actions refuse before signing anything.
        let refused: unknown;
        try {
          await bundlerFor(account, gateway()).sendUserOperation({ calls: calls(account.address) });
        } catch (error) {
          refused = error;
        }
        expect(String(refused)).to.contain(new SponsorshipRefused(violation).message);

        // On chain: the same operation signed by the gateway's own key is rejected by the paymaster contract.
        let rejected: unknown;
        try {
          await bundlerFor(account, signAnything(stack.paymasterSigner)).sendUserOperation({ calls: calls(account.address) });
        } catch (error) {
          rejected = error;
        }
        expect(rejected, "the bundler must reject the operation").to.not.equal(undefined);
        const revert = /AA33 reverted (0x[0-9a-fA-F]+)/.exec(String((rejected as Error).message));
        expect(revert, String(rejected)).to.not.equal(null);
        const decoded = decodeErrorResult({ abi: gatewayPaymasterAbi, data: revert![1] as Hex });
        // The contract refuses it with the very error, and arguments, the gateway's mirror named.
        expect({ errorName: decoded.errorName, args: decoded.args ?? [] }).to.deep.equal(violation);
        expect(await read(stack.deployment.usdc, "balanceOf", account.address)).to.equal(3n * USDC);
        expect(await read(stack.deployment.escrow, "balances", stranger)).to.equal(0n);
      });
    }

    it("the paymaster contract refuses the gateway's flow signed by any other key", async () => {
      const account = await newAccount();
      await stack.mint(account.address, 2n * USDC);
      const calls = escrowDepositCalls({
        usdc: stack.deployment.usdc,
        escrow: stack.deployment.escrow,
        wallet: account.address,
        amountMicros: 2n * USDC,
      });
      let rejected: unknown;
      try {
        await bundlerFor(account, signAnything(privateKeyToAccount(generatePrivateKey()))).sendUserOperation({ calls });
      } catch (error) {
        rejected = error;
      }
      expect(rejected, "the bundler must reject the operation").to.not.equal(undefined);
      expect(String((rejected as Error).message)).to.contain("AA34 signature error");
      expect(await read(stack.deployment.escrow, "balances", account.address)).to.equal(0n);
    });
  });
});
