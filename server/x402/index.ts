import type { Address, Hex } from "viem";
import { getAbiItem, parseAbiItem } from "viem";
import { skillEscrowAbi, testUsdcAbi } from "../chain/abi";
import type { HousekeepingTask } from "../housekeeping";
import type { ChainConnection } from "../settlement/money-path";
import { EscrowX402Settler } from "./escrow-settlement";
import { X402PaymentsStore } from "./payments-store";
import type { X402Asset } from "./protocol";
import { ExactPaymentVerifier } from "./verifier";
import { type X402Recovered, type X402RecoveryChain, X402Service, type X402ServiceDeps } from "./x402-service";

export { X402Service } from "./x402-service";

/** How often the settlement leader looks for orphaned x402 payments. */
export const X402_RECOVERY_INTERVAL_MS = 60_000;

/**
 * How long an x402 payment may stay open before it counts as orphaned (its replica stopped, or its node went quiet):
 * longer than any call can last.
 */
export const X402_ORPHAN_AGE_MS = 15 * 60_000;

/** Most blocks per eth_getLogs request, as the reconciliation asks. */
const LOG_CHUNK_BLOCKS = 10_000n;

/** The escrow's x402 events, each keyed by its call id: a payment collected, then completed (settled) or refunded. */
const X402_EVENTS = [
  getAbiItem({ abi: skillEscrowAbi, name: "X402Collected" }),
  getAbiItem({ abi: skillEscrowAbi, name: "X402Settled" }),
  getAbiItem({ abi: skillEscrowAbi, name: "X402Refunded" }),
] as const;

/**
 * The token's EIP-712 domain, which x402 clients sign over: ERC-5267's eip712Domain() where the token has it (the
 * local TestUSDC), else name() and version() (Circle's USDC).
 */
async function tokenDomain(chain: ChainConnection, usdc: Address): Promise<{ name: string; version: string }> {
  try {
    const domain = (await chain.publicClient.readContract({ address: usdc, abi: testUsdcAbi, functionName: "eip712Domain" })) as readonly [
      Hex,
      string,
      string,
      ...unknown[],
    ];
    return { name: domain[1], version: domain[2] };
  } catch {
    const versionAbi = [parseAbiItem("function version() view returns (string)")] as const;
    const [name, version] = await Promise.all([
      chain.publicClient.readContract({ address: usdc, abi: testUsdcAbi, functionName: "name" }) as Promise<string>,
      chain.publicClient.readContract({ address: usdc, abi: versionAbi, functionName: "version" }),
    ]);
    return { name, version };
  }
}

/** The x402 module: the endpoint's service, and the recovery of payments a crash or a stopped replica left open. */
export interface X402 {
  service: X402Service;
  /** Completes, refunds or closes, from the escrow's events, the payments opened before `beforeMs` and still open. */
  recover(beforeMs: number): Promise<X402Recovered>;
  /** What the settlement leader runs: the orphaned payments' recovery. */
  leaderHousekeeping: HousekeepingTask[];
}

/**
 * The x402 endpoint's parts on `chain`, or undefined when the chain connection has no x402 key: the escrow's
 * USDC and its EIP-712 domain (read from the chain), the protocol's verifier, and the settler that sends the escrow's
 * collectX402, completeX402 and refundX402.
 */
export async function createX402(
  chain: ChainConnection,
  deps: Omit<X402ServiceDeps, "payments" | "verifier" | "settler" | "asset" | "chainHead">,
): Promise<X402 | undefined> {
  const wallet = chain.x402Wallet;
  if (!wallet) return undefined;
  const usdc = (await chain.publicClient.readContract({
    address: chain.escrowAddress,
    abi: skillEscrowAbi,
    functionName: "usdc",
  })) as Address;
  const domain = await tokenDomain(chain, usdc);
  const asset: X402Asset = {
    chainId: chain.chainId,
    usdc,
    escrow: chain.escrowAddress,
    tokenName: domain.name,
    tokenVersion: domain.version,
  };
  const settler = new EscrowX402Settler({ publicClient: chain.publicClient, walletClient: wallet, escrowAddress: chain.escrowAddress });
  const service = new X402Service({
    ...deps,
    payments: new X402PaymentsStore(deps.ledger.db),
    verifier: new ExactPaymentVerifier(chain.publicClient, usdc, wallet.account.address),
    settler,
    asset,
    chainHead: () => chain.publicClient.getBlockNumber({ cacheTime: 0 }),
  });
  const recover = (beforeMs: number) =>
    service.recover(
      {
        // From the block the collection was sent at, in pieces an RPC provider accepts.
        async events(callId: Hex, fromBlock: bigint) {
          const found: Awaited<ReturnType<X402RecoveryChain["events"]>> = {};
          const head = await chain.publicClient.getBlockNumber({ cacheTime: 0 });
          for (let start = fromBlock; start <= head; start += LOG_CHUNK_BLOCKS) {
            const end = start + LOG_CHUNK_BLOCKS - 1n < head ? start + LOG_CHUNK_BLOCKS - 1n : head;
            const logs = await chain.publicClient.getLogs({
              address: chain.escrowAddress,
              events: X402_EVENTS,
              fromBlock: start,
              toBlock: end,
            });
            for (const log of logs) {
              if (log.removed || !log.transactionHash || log.args.callId !== callId) continue;
              const txHash = log.transactionHash;
              if (log.eventName === "X402Collected") {
                const { payer, seller, amount, platformFee, reclaimableAt } = log.args;
                found.collected ??= {
                  txHash,
                  pending: { payer: payer!, seller: seller!, value: amount!, platformFee: platformFee!, reclaimableAt: reclaimableAt! },
                };
              } else if (log.eventName === "X402Settled") found.settled ??= { txHash };
              else found.refunded ??= { txHash };
            }
          }
          return found;
        },
        async authorizationUsed(payer: Address, nonce: Hex) {
          return (await chain.publicClient.readContract({
            address: usdc,
            abi: testUsdcAbi,
            functionName: "authorizationState",
            args: [payer, nonce],
          })) as boolean;
        },
        async timeS() {
          return (await chain.publicClient.getBlock({ blockTag: "latest" })).timestamp;
        },
      },
      beforeMs,
    );
  return {
    service,
    recover,
    leaderHousekeeping: [
      {
        name: "resolving orphaned x402 payments",
        everyMs: X402_RECOVERY_INTERVAL_MS,
        run: () => recover(Date.now() - X402_ORPHAN_AGE_MS),
      },
    ],
  };
}
