import type { Address, PublicClient } from "viem";
import { skillEscrowAbi } from "../chain/abi";
import { settlementAddress } from "./addresses";
import type { AddressesStore } from "./addresses-store";
import type { ReconcileStore } from "./reconcile-store";

export interface Earnings {
  /** Paid calls whose seller share is not yet on-chain (not batched, or in a batch not yet settled). */
  pendingMicros: bigint;
  /** Seller shares in settled batches and settled x402 payments: credited to the seller's earnings on-chain. */
  settledMicros: bigint;
  /** Of the settled, what is still in the escrow for the seller to claim (read from the chain). */
  claimableMicros: bigint | null;
  /** Of the settled, what the seller has claimed (settled - claimable). */
  claimedMicros: bigint | null;
  /** The address the escrow credits, where `claim()` must be sent from. */
  address: Address | undefined;
}

/**
 * A seller's earnings across their journey: pending in the ledger, settled on-chain, and
 * claimed. Pending and settled come from the ledger's batches; claimable is the escrow's
 * `earnings(address)`, so claimed = settled - claimable (batches and x402 settlements are the only credits).
 */
export async function earningsOf(
  stores: { reconcile: ReconcileStore; addresses: AddressesStore },
  accountId: string,
  publicClient: Pick<PublicClient, "readContract"> | undefined,
  escrowAddress: Address | undefined,
): Promise<Earnings> {
  const row = await stores.reconcile.sellerShares(accountId);
  const address = await settlementAddress(stores.addresses, accountId);
  let claimable: bigint | null = null;
  if (address && publicClient && escrowAddress) {
    claimable = (await publicClient.readContract({
      address: escrowAddress,
      abi: skillEscrowAbi,
      functionName: "earnings",
      args: [address],
    })) as bigint;
  }
  return {
    pendingMicros: row.pending,
    settledMicros: row.settled,
    claimableMicros: claimable,
    // A batch sent but not yet marked settled is in claimable before it is in settled.
    claimedMicros: claimable === null ? null : row.settled > claimable ? row.settled - claimable : 0n,
    address,
  };
}
