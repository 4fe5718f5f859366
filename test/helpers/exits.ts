import hre from "hardhat";
import { getAddress, parseAbi, type Hash } from "viem";
import type { LocalChain, UserName } from "./chain";

const EXIT_ABI = parseAbi([
  "function requestExit(uint256 amount)",
  "function cancelExit()",
  "function completeExit() returns (uint256)",
  "function exitDelay() view returns (uint256)",
  "function pendingExit(address account) view returns (uint256 amount, uint256 readyAt)",
]);
const TOKEN_ABI = parseAbi(["function balanceOf(address account) view returns (uint256)"]);

/** A user's unilateral exit on the real escrow: each call is a mined, successful transaction. */
export interface ExitActions {
  request(user: UserName, amountMicros: bigint): Promise<Hash>;
  cancel(user: UserName): Promise<Hash>;
  complete(user: UserName): Promise<Hash>;
  /** Moves the chain's clock past the exit delay and mines a block. */
  passExitDelay(): Promise<void>;
  /** The user's USDC outside the escrow. */
  walletUsdc(user: UserName): Promise<bigint>;
}

export async function exitActions(chain: LocalChain): Promise<ExitActions> {
  const wallets = await hre.viem.getWalletClients();
  const publicClient = await hre.viem.getPublicClient();
  const { escrow, usdc } = chain.deployment;
  const walletOf = (user: UserName) => {
    const wallet = wallets.find((w) => getAddress(w.account.address) === getAddress(chain.address(user)));
    if (!wallet) throw new Error(`no wallet for ${user}`);
    return wallet;
  };
  const send = async (user: UserName, functionName: "requestExit" | "cancelExit" | "completeExit", args: readonly unknown[]) => {
    const wallet = walletOf(user);
    const hash = await wallet.writeContract({
      address: escrow,
      abi: EXIT_ABI,
      functionName,
      args: args as never,
      account: wallet.account,
      chain: wallet.chain,
    });
    const receipt = await publicClient.waitForTransactionReceipt({ hash });
    if (receipt.status !== "success") throw new Error(`${functionName} by ${user} reverted`);
    return hash;
  };
  return {
    request: (user, amountMicros) => send(user, "requestExit", [amountMicros]),
    cancel: (user) => send(user, "cancelExit", []),
    complete: (user) => send(user, "completeExit", []),
    passExitDelay: async () => {
      const delay = await publicClient.readContract({ address: escrow, abi: EXIT_ABI, functionName: "exitDelay" });
      await hre.network.provider.request({ method: "evm_increaseTime", params: [Number(delay) + 1] });
      await hre.network.provider.request({ method: "evm_mine", params: [] });
    },
    walletUsdc: (user) =>
      publicClient.readContract({ address: usdc, abi: TOKEN_ABI, functionName: "balanceOf", args: [chain.address(user)] }),
  };
}
