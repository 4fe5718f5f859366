import hre from "hardhat";
import {
  createPublicClient,
  custom,
  maxUint256,
  parseAbi,
  type Address,
  type Hash,
  type PublicClient,
  type TransactionReceipt,
} from "viem";
import { deployContracts, type Deployment } from "../../server/devstack/deploy";
import type { ChainConnection } from "../../server/settlement/money-path";

/** 1 USDC in base units. */
export const USDC = 1_000_000n;

const ESCROW_ABI = parseAbi([
  "function deposit(uint256 amount)",
  "function depositFor(address account, uint256 amount)",
  "function balances(address account) view returns (uint256)",
]);
const TOKEN_ABI = parseAbi([
  "function approve(address spender, uint256 amount) returns (bool)",
  "function balanceOf(address account) view returns (uint256)",
  "function mint(address to, uint256 amount)",
]);

type HardhatWallet = Awaited<ReturnType<typeof hre.viem.getWalletClients>>[number];

/** The names of the funded test users; each has 1,000 test USDC and an unlimited allowance for the escrow. */
export const USERS = ["alice", "bob", "carol"] as const;
/** The development account that settles x402 payments (SETTLER_ROLE): one no test uses for anything else. */
export const X402_SETTLER_INDEX = 19;
export type UserName = (typeof USERS)[number];

/**
 * Hardhat's in-process chain (chain id 8453) with SkillEscrow and TestUSDC deployed by the server's own
 * deployContracts, three funded users, and the controls a chain test needs: mining, automine, snapshots.
 */
export interface LocalChain {
  deployment: Deployment;
  /** A viem client over the in-process chain, with RPC faults that a test can switch on. */
  publicClient: PublicClient;
  /** Makes the next `count` RPC requests of `publicClient` fail as if the node were unreachable. */
  failNextRequests(count: number): void;
  /** How many requests were failed on purpose so far. */
  readonly failedRequests: number;
  address(user: UserName): Address;
  /** `user` deposits into its own escrow balance; resolves with the hash (mined at once under automine). */
  deposit(user: UserName, amountMicros: bigint): Promise<Hash>;
  /** `payer` deposits into `account`'s escrow balance. */
  depositFor(payer: UserName, account: Address, amountMicros: bigint): Promise<Hash>;
  receipt(hash: Hash): Promise<TransactionReceipt>;
  escrowBalance(account: Address): Promise<bigint>;
  /** The test USDC held by `account` (a payer's wallet, not its escrow balance). */
  usdcOf(account: Address): Promise<bigint>;
  /** Mints `amountMicros` of test USDC to `account`, from the deployer (the token's owner); resolves once mined. */
  mintUsdc(account: Address, amountMicros: bigint): Promise<void>;
  head(): Promise<bigint>;
  mine(blocks?: number): Promise<void>;
  setAutomine(on: boolean): Promise<void>;
  snapshot(): Promise<string>;
  revert(id: string): Promise<void>;
}

const provider = () => hre.network.provider;

let compiled: Promise<void> | undefined;

/**
 * Hardhat's compile task, once per process: the contracts do not change while the tests run (npm test compiles
 * them first), and each run of the task still reads every source and artifact to find that out, hundreds of
 * file reads. A failed compilation is not remembered, so the next caller tries again.
 */
export function compileContracts(): Promise<void> {
  compiled ??= hre.run("compile", { quiet: true }).then(
    () => undefined,
    (error: unknown) => {
      compiled = undefined;
      throw error;
    },
  );
  return compiled;
}

/** Compiles (once per process: compileContracts), deploys, funds and approves. */
export async function startLocalChain(): Promise<LocalChain> {
  await compileContracts();
  // A fresh chain for each caller (test files run one after another): the in-process network otherwise keeps
  // every block of every earlier file, and its clock, one second further per block mined, runs ahead of the
  // wall clock by the thousands of blocks a run mines; signatures dated by the wall clock (x402's EIP-3009
  // authorizations, vouchers) would then be expired on it before they are made.
  await provider().request({ method: "hardhat_reset", params: [] });
  const [deployer, settler, voucherSigner, ...rest] = await hre.viem.getWalletClients();
  const wallets = Object.fromEntries(USERS.map((name, i) => [name, rest[i]])) as Record<UserName, HardhatWallet>;
  const deployment = await deployContracts({
    network: "hardhat",
    publicClient: await hre.viem.getPublicClient(),
    walletClient: deployer,
    settler: settler.account.address,
    voucherSigner: voucherSigner.account.address,
    x402Settlers: [(await hre.viem.getWalletClients())[X402_SETTLER_INDEX].account.address],
    mint: USERS.map((name) => ({ to: wallets[name].account.address, amountMicros: 1_000n * USDC })),
  });

  let failuresLeft = 0;
  let failedRequests = 0;
  const publicClient = createPublicClient({
    transport: custom(
      {
        async request(args: { method: string; params?: unknown }) {
          if (failuresLeft > 0) {
            failuresLeft--;
            failedRequests++;
            throw new Error(`connect ECONNREFUSED 127.0.0.1:8545 (injected fault on ${args.method})`);
          }
          return provider().request(args as { method: string; params?: unknown[] });
        },
      },
      { retryCount: 0 },
    ),
  }) as PublicClient;

  const send = async (user: UserName, functionName: "deposit" | "depositFor", args: readonly unknown[]) =>
    wallets[user].writeContract({
      address: deployment.escrow,
      abi: ESCROW_ABI,
      functionName,
      args: args as never,
      account: wallets[user].account,
      chain: wallets[user].chain,
    });

  for (const name of USERS) {
    await wallets[name].writeContract({
      address: deployment.usdc,
      abi: TOKEN_ABI,
      functionName: "approve",
      args: [deployment.escrow, maxUint256],
      account: wallets[name].account,
      chain: wallets[name].chain,
    });
  }

  return {
    deployment,
    publicClient,
    failNextRequests: (count) => {
      failuresLeft = count;
    },
    get failedRequests() {
      return failedRequests;
    },
    address: (user) => wallets[user].account.address,
    deposit: (user, amountMicros) => send(user, "deposit", [amountMicros]),
    depositFor: (payer, account, amountMicros) => send(payer, "depositFor", [account, amountMicros]),
    receipt: (hash) => publicClient.getTransactionReceipt({ hash }),
    escrowBalance: (account) =>
      publicClient.readContract({ address: deployment.escrow, abi: ESCROW_ABI, functionName: "balances", args: [account] }),
    usdcOf: (account) =>
      publicClient.readContract({ address: deployment.usdc, abi: TOKEN_ABI, functionName: "balanceOf", args: [account] }),
    mintUsdc: async (account, amountMicros) => {
      const hash = await deployer.writeContract({
        address: deployment.usdc,
        abi: TOKEN_ABI,
        functionName: "mint",
        args: [account, amountMicros],
        account: deployer.account,
        chain: deployer.chain,
      });
      await publicClient.waitForTransactionReceipt({ hash });
    },
    head: () => publicClient.getBlockNumber({ cacheTime: 0 }),
    mine: async (blocks = 1) => {
      for (let i = 0; i < blocks; i++) await provider().request({ method: "evm_mine", params: [] });
    },
    setAutomine: async (on) => {
      await provider().request({ method: "evm_setAutomine", params: [on] });
    },
    snapshot: async () => (await provider().request({ method: "evm_snapshot", params: [] })) as string,
    revert: async (id) => {
      const ok = await provider().request({ method: "evm_revert", params: [id] });
      if (ok !== true) throw new Error(`evm_revert(${id}) failed`);
    },
  };
}

/** Resolves once `condition()` holds, checking every 5 ms; rejects after `timeoutMs`. */
export async function waitFor(condition: () => boolean, timeoutMs = 5_000, what = "the condition"): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/**
 * What a gateway needs to run its money path on this chain (GatewayOptions.chain): the
 * development accounts that deployContracts gave the settler and voucher-signer roles.
 */
export async function gatewayChain(chain: LocalChain): Promise<ChainConnection> {
  const wallets = await hre.viem.getWalletClients();
  const [, settler, voucherSigner] = wallets;
  return {
    publicClient: chain.publicClient,
    escrowAddress: chain.deployment.escrow,
    chainId: 8453,
    deployBlock: chain.deployment.deployBlock,
    settlerWallet: settler,
    voucherSigner,
    x402Wallet: wallets[X402_SETTLER_INDEX],
  };
}
