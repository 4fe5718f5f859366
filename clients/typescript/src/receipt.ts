/**
 * A paid call's settlement receipt, as GET /v1/calls/:callId/receipt answers it (its `data`): the batch the call was
 * settled in, the receipt the batch's Merkle root commits to, and the proof from the receipt to that root. A saved
 * copy (the whole answer, or its `data`) is what verifyReceipt (./verify-receipt.ts) checks against the chain.
 */
export interface SettledCallReceipt {
  /** The call's id (a UUID). */
  call_id: string;
  /** `pending`: in a batch not yet confirmed on-chain; `settled`: its batch is on-chain. */
  status: "pending" | "settled";
  batch_number: number;
  /** The batch's Merkle root, as the gateway built it. */
  receipts_root: string;
  /** The transaction that posted the batch, once sent. */
  tx_hash: string | null;
  /** The SkillEscrow the batch was posted to, and its chain (null from a gateway without a chain; absent from older gateways). */
  escrow?: string | null;
  chain_id?: number | null;
  /** The leaf the proof starts from: what the batch committed to for this call. Amounts in USDC base units (micro-USDC). */
  receipt: { call_id: string; account: string; seller: string; amount: string; platform_fee: string };
  /** keccak256(keccak256(abi.encode(receipt))) (absent from older gateways). */
  leaf?: string;
  proof: string[];
  verify_with?: string;
}

/** A call that has no receipt (yet): not charged (nothing to settle), or charged and waiting for its batch. */
export interface UnsettledCallReceipt {
  call_id: string;
  status: "not_charged" | "unsettled";
}

/** What GET /v1/calls/:callId/receipt answers for a call of the key's account. */
export type CallReceipt = SettledCallReceipt | UnsettledCallReceipt;
