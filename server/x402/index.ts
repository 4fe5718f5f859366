import type { Address, Hex } from "viem";
import { parseAbiItem } from "viem";
import { skillEscrowAbi, testUsdcAbi } from "../chain/abi";
import type { ChainConnection } from "../settlement/money-path";
import { EscrowX402Settler } from "./escrow-settlement";
import { X402PaymentsStore } from "./payments-store";
import type { X402Asset } from "./protocol";
import { ExactPaymentVerifier } from "./verifier";
import { X402Service, type X402ServiceDeps } from "./x402-service";

export { X402Service } from "./x402-service";

const X402_SETTLED = parseAbiItem(
  "event X402Settled(bytes32 indexed callId, address indexed payer, address indexed seller, uint256 amount, uint256 platformFee, address treasury)",
);

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

/**
 * The x402 endpoint's parts on `chain`, or undefined when the chain connection has no x402 key: the escrow's
 * USDC and its EIP-712 domain (read from the chain), the protocol's verifier, and the settler that sends settleX402.
 */
export async function createX402(
  chain: ChainConnection,
  deps: Omit<X402ServiceDeps, "payments" | "verifier" | "settler" | "asset">,
): Promise<{ service: X402Service; recover(beforeMs: number): Promise<{ settled: number; closed: number; waiting: number }> } | undefined> {
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
  });
  return {
    service,
    recover: (beforeMs) =>
      service.recover(
        async (callId) => {
          const logs = await chain.publicClient.getLogs({
            address: chain.escrowAddress,
            event: X402_SETTLED,
            args: { callId },
            fromBlock: chain.deployBlock,
            toBlock: "latest",
          });
          return logs[0]?.transactionHash ? { txHash: logs[0].transactionHash } : undefined;
        },
        async (payer, nonce) =>
          (await chain.publicClient.readContract({
            address: usdc,
            abi: testUsdcAbi,
            functionName: "authorizationState",
            args: [payer, nonce],
          })) as boolean,
        beforeMs,
      ),
  };
}
