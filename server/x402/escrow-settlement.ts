import type { Abi, Account, Address, Chain, Hex, PublicClient, Transport, WalletClient } from "viem";
import {
  BaseError,
  ContractFunctionRevertedError,
  EstimateGasExecutionError,
  ExecutionRevertedError,
  isErc6492Signature,
  parseErc6492Signature,
  parseEventLogs,
} from "viem";
import { skillEscrowAbi, testUsdcAbi } from "../chain/abi";
import { type DecodedRevert, decodeRevert } from "../settlement/reverts";

/** An x402 `exact` EIP-3009 authorization, as the payer signed it (TransferWithAuthorization, `to` = the escrow). */
export interface Eip3009Authorization {
  from: Address;
  to: Address;
  value: bigint;
  validAfter: bigint;
  validBefore: bigint;
  nonce: Hex;
  signature: Hex;
}

/** A payment collected into the escrow and pending there, as the escrow's X402Pending struct and X402Collected event carry it. */
export interface PendingX402 {
  payer: Address;
  seller: Address;
  value: bigint;
  platformFee: bigint;
  reclaimableAt: bigint;
}

/** What sending one of the escrow's x402 transactions came to. */
export type EscrowOutcome<T = object> =
  /** Mined, and its event found in the receipt. */
  | ({ kind: "mined"; txHash: Hex; gasUsed: bigint } & T)
  /** Refused before or by the chain (a revert: the authorization used or cancelled, funds gone): nothing moved. */
  | { kind: "refused"; reason: string; txHash?: Hex }
  /** Sent, but whether it was mined is not known (the node stopped answering): recovery decides later. */
  | { kind: "unknown"; txHash?: Hex; error: unknown };

export interface EscrowX402SettlerParameters {
  publicClient: Pick<PublicClient, "waitForTransactionReceipt" | "simulateContract">;
  /** Holds SETTLER_ROLE; used by this replica for x402 payments only, so its nonces are this process's alone. */
  walletClient: WalletClient<Transport, Chain | undefined, Account>;
  escrowAddress: Address;
  /** How long to wait for a transaction's receipt before calling its fate unknown. */
  receiptTimeoutMs?: number;
}

type X402Function = "collectX402" | "completeX402" | "refundX402";
type X402Event = "X402Collected" | "X402Settled" | "X402Refunded";

/**
 * Sends the escrow's x402 transactions for one paid call: collectX402 before the call is forwarded (the payer's
 * authorization used, the value held pending in the escrow), then completeX402 (the seller and the treasury
 * credited) when it succeeded or refundX402 (the value back to the payer) when it failed.
 *
 * Transactions are sent one at a time (each takes the key's next nonce; a second process must use another key),
 * and their receipts are awaited side by side. A revert at simulation or gas estimation sends nothing and is a
 * refusal.
 */
export class EscrowX402Settler {
  private sending: Promise<unknown> = Promise.resolve();

  constructor(private readonly params: EscrowX402SettlerParameters) {}

  get address(): Address {
    return this.params.walletClient.account.address;
  }

  /** Collects the payment of call `callId`: mined means the value is in the escrow, pending, as `pending` says. */
  async collect(
    authorization: Eip3009Authorization,
    seller: Address,
    feeMicros: bigint,
    callId: Hex,
  ): Promise<EscrowOutcome<{ pending: PendingX402 }>> {
    const payment = {
      from: authorization.from,
      value: authorization.value,
      validAfter: authorization.validAfter,
      validBefore: authorization.validBefore,
      nonce: authorization.nonce,
      seller,
      platformFee: feeMicros,
      callId,
    };
    const sent = await this.send("collectX402", [payment, tokenSignature(authorization.signature)], "X402Collected", callId);
    if (sent.kind !== "mined") return sent;
    const args = sent.args as { payer: Address; seller: Address; amount: bigint; platformFee: bigint; reclaimableAt: bigint };
    const pending = {
      payer: args.payer,
      seller: args.seller,
      value: args.amount,
      platformFee: args.platformFee,
      reclaimableAt: args.reclaimableAt,
    };
    return { kind: "mined", txHash: sent.txHash, gasUsed: sent.gasUsed, pending };
  }

  /** Completes the pending payment of call `callId`: the seller and the treasury are credited. */
  complete(callId: Hex, pending: PendingX402): Promise<EscrowOutcome> {
    return this.send("completeX402", [callId, pending], "X402Settled", callId);
  }

  /** Refunds the pending payment of call `callId` to its payer. */
  refund(callId: Hex, pending: PendingX402): Promise<EscrowOutcome> {
    return this.send("refundX402", [callId, pending], "X402Refunded", callId);
  }

  private async send(
    functionName: X402Function,
    args: readonly unknown[],
    eventName: X402Event,
    callId: Hex,
  ): Promise<EscrowOutcome<{ args: Record<string, unknown> }>> {
    const { walletClient, escrowAddress, publicClient } = this.params;
    const request = {
      address: escrowAddress,
      abi: skillEscrowAbi,
      functionName,
      args,
      account: walletClient.account,
      chain: walletClient.chain,
    } as unknown as Parameters<typeof walletClient.writeContract>[0];
    // Simulated first: a transaction the escrow or the token would refuse (funds spent, nonce used or cancelled) is
    // refused here, whatever error class the node reports a revert with; so is one the node could not simulate at
    // all. Either way nothing was sent, so nothing can land later.
    try {
      await publicClient.simulateContract(request as Parameters<typeof publicClient.simulateContract>[0]);
    } catch (error) {
      const revert = decodeRevert(error, SETTLEMENT_ERRORS);
      return { kind: "refused", reason: revert ? revertReason(revert) : shortMessage(error) };
    }
    const send = this.sending.then(() => walletClient.writeContract(request));
    this.sending = send.catch(() => undefined);
    let txHash: Hex;
    try {
      txHash = await send;
    } catch (error) {
      // A revert at estimation sent nothing. Any other failure (the node unreachable mid-send) may have sent it.
      const revert = decodeRevert(error, SETTLEMENT_ERRORS);
      if (revert) return { kind: "refused", reason: revertReason(revert) };
      if (isRevert(error)) return { kind: "refused", reason: shortMessage(error) };
      return { kind: "unknown", error };
    }
    try {
      const receipt = await publicClient.waitForTransactionReceipt({ hash: txHash, timeout: this.params.receiptTimeoutMs ?? 60_000 });
      if (receipt.status !== "success") return { kind: "refused", reason: `the ${functionName} transaction reverted`, txHash };
      const event = parseEventLogs({ abi: skillEscrowAbi, eventName, logs: receipt.logs }).find(
        (log) => log.address.toLowerCase() === escrowAddress.toLowerCase() && (log.args as { callId: Hex }).callId === callId,
      );
      if (!event) return { kind: "refused", reason: `the ${functionName} transaction emitted no ${eventName}`, txHash };
      return { kind: "mined", txHash, gasUsed: receipt.gasUsed, args: event.args as Record<string, unknown> };
    } catch (error) {
      return { kind: "unknown", txHash, error };
    }
  }
}

/**
 * The signature the token checks. An ERC-6492 wrapper (a smart wallet's signature with its deployment data) is
 * verified by the protocol's verifier on its inner signature, which is what a deployed wallet's ERC-1271 check
 * takes; the wrapper itself would fail there. (A wallet not yet deployed is refused at verification.)
 */
function tokenSignature(signature: Hex): Hex {
  return isErc6492Signature(signature) ? parseErc6492Signature(signature).signature : signature;
}

/** The errors a settlement can revert with: the escrow's own, and the token's it calls (funds, authorization, signature). */
const SETTLEMENT_ERRORS = [...skillEscrowAbi, ...testUsdcAbi.filter((item) => item.type === "error")] as Abi;

/** A decoded revert as a reason: the custom error's name, or a require's string (Circle's USDC reverts with those). */
function revertReason(revert: DecodedRevert): string {
  return revert.errorName === "Error" && typeof revert.args[0] === "string" ? revert.args[0] : revert.errorName;
}

function isRevert(error: unknown): boolean {
  if (error instanceof BaseError) {
    return (
      error.walk(
        (cause) =>
          cause instanceof ExecutionRevertedError ||
          cause instanceof ContractFunctionRevertedError ||
          cause instanceof EstimateGasExecutionError,
      ) !== null
    );
  }
  return /revert/i.test(String((error as Error)?.message ?? ""));
}

function shortMessage(error: unknown): string {
  const message = (error as { shortMessage?: unknown }).shortMessage ?? (error as Error)?.message ?? String(error);
  return String(message).split("\n")[0].slice(0, 200);
}
