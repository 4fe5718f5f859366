import { keccak256, toHex, type Address } from "viem";
import type { ContractBatch } from "../../../server/settlement/batches";
import { buildMerkleTree, receiptLeaf, type CallReceipt } from "../../../server/chain/receipts";

/** The Solidity `SkillEscrow.Batch` struct as viem encodes it (the settler's type). Amounts in USDC base units. */
export type Batch = ContractBatch;

/** Platform fee in basis points (10%), as docs/design.md §5 fixes it. */
export const FEE_BPS = 1000n;

/** The platform's share of a price: rounded down, so seller + fee always equals the price. */
export function feeOf(priceMicros: bigint): bigint {
  return (priceMicros * FEE_BPS) / 10_000n;
}

/** A batch with explicit entries; the receipts root defaults to a non-zero placeholder tied to the number. */
export function buildBatch(overrides: Partial<Batch> & Pick<Batch, "number">): Batch {
  return {
    receiptsRoot: keccak256(toHex(`receipts of batch ${overrides.number}`)),
    callCount: BigInt(overrides.debits?.length ?? 1),
    debits: [],
    credits: [],
    platformFee: 0n,
    ...overrides,
  };
}

/**
 * Aggregates call receipts into one batch the way the gateway's settler does: one debit per account, one
 * credit per seller, the summed fee, and the Merkle root of the receipts. Entries keep first-seen order.
 */
export function batchFromReceipts(number: bigint, receipts: readonly CallReceipt[]) {
  const debits = new Map<Address, bigint>();
  const credits = new Map<Address, bigint>();
  let platformFee = 0n;
  for (const receipt of receipts) {
    debits.set(receipt.account, (debits.get(receipt.account) ?? 0n) + receipt.amount);
    credits.set(receipt.seller, (credits.get(receipt.seller) ?? 0n) + receipt.amount - receipt.platformFee);
    platformFee += receipt.platformFee;
  }
  const tree = buildMerkleTree(receipts.map(receiptLeaf));
  const batch: Batch = {
    number,
    receiptsRoot: tree.root,
    callCount: BigInt(receipts.length),
    debits: [...debits].map(([account, amount]) => ({ account, amount })),
    credits: [...credits].filter(([, amount]) => amount > 0n).map(([seller, amount]) => ({ seller, amount })),
    platformFee,
  };
  return { batch, tree };
}

/** A receipt for a call of `priceMicros` with the standard 10% fee. */
export function buildReceipt(index: number, account: Address, seller: Address, priceMicros: bigint): CallReceipt {
  return {
    callId: keccak256(toHex(`call-${index}`)),
    account,
    seller,
    amount: priceMicros,
    platformFee: feeOf(priceMicros),
  };
}
