/**
 * A seller's claim of its settled earnings from its embedded wallet. The escrow pays `msg.sender`'s earnings, so
 * the claim must come from the address settlement credits (the account's payout address); when that is the
 * embedded wallet, the gateway sends `execute(escrow, 0, claim() | claimTo(to))` from it as a UserOperation its
 * paymaster sponsors: at once for a wallet whose owner key it holds (claimForServerWallet), or prepared for the
 * SIWE owner to sign (prepareOwnerClaim, then submitOwnerClaim), the same two steps as an owner's sweep.
 *
 * USDC claimed into a server-owned wallet (no `to`) is then swept back into the escrow as the account's deposit by
 * the wallet sweep loop: earnings become spendable balance. With `to`, they leave to that address.
 *
 * Refusals (codes of server/errors.ts), checked in this order: no_wallet, payout_address_not_wallet,
 * wrong_claim_flow (the other path must be used), claim_in_progress (another operation of the wallet is running),
 * nothing_to_claim (read from the escrow first, so no gas is spent on a claim that would revert), then the
 * bundler's: chain_unavailable, or on the owner's path user_operation_rejected.
 */
import { getAddress, isAddressEqual, parseEventLogs, type Address, type Hex } from "viem";
import type { UserOperationReceipt } from "viem/account-abstraction";
import { readContract } from "viem/actions";
import { skillEscrowAbi } from "../chain/abi";
import { escrowClaimCall } from "./aa-flows";
import { settlementAddress } from "../settlement/addresses";
import { settlementStores } from "../settlement/store";
import type { Ledger } from "../ledger/ledger";
import { type Refusal, refusal } from "../errors";
import {
  type BundlerRefusal,
  type OwnerSignedOperations,
  type PreparedOperation,
  type SponsorParameters,
  type SubmitOperationResult,
  bundlerRefusal,
  sendAsServer,
} from "./sponsored-operations";
import { WalletError } from "./wallet-error";
import { type OwnerKind, underWalletLock, walletFor } from "./wallet-operations";
import { serverOwnerOf } from "./wallets";

export interface WalletClaimsParameters extends SponsorParameters {
  ledger: Ledger;
  /** WALLET_ENCRYPTION_KEY, for wallets whose owner key the server holds. */
  encryptionKey: string;
}

export type ClaimOptions = {
  /** Where the escrow pays; the wallet itself when absent. Never the zero address (checked by the caller). */
  to?: Address | undefined;
  /** How long to wait for the UserOperation to be mined. */
  timeoutMs?: number;
};

/**
 * Why a claim was not sent: no_wallet; payout_address_not_wallet (settlement credits another address, or none:
 * the claim must come from it); wrong_claim_flow (the gateway holds the key, or a SIWE address owns the wallet:
 * the other path); claim_in_progress; nothing_to_claim; or the bundler's refusal.
 */
export type ClaimRefusal =
  Refusal<"no_wallet" | "payout_address_not_wallet" | "wrong_claim_flow" | "claim_in_progress" | "nothing_to_claim"> | BundlerRefusal;

export type ClaimResult = { ok: true; amountMicros: bigint; userOpHash: Hex; transactionHash: Hex; to: Address } | ClaimRefusal;

/** A SIWE wallet's claim waiting for its owner's signature of `userOpHash`. */
export type PreparedClaim = PreparedOperation<"claim", { claimableMicros: bigint; to: Address }>;

export type PrepareClaimResult = { ok: true; prepared: PreparedClaim } | ClaimRefusal;

export type SubmitClaimResult =
  | { ok: true; amountMicros: bigint; userOpHash: Hex; transactionHash: Hex; to: Address }
  | Exclude<SubmitOperationResult<PreparedClaim>, { ok: true }>;

const NOTHING_TO_CLAIM = "There are no settled earnings to claim yet.";

export class WalletClaims {
  constructor(
    private readonly p: WalletClaimsParameters,
    private readonly ownerSigned: OwnerSignedOperations,
  ) {}

  /**
   * The account's wallet for a claim in `flow`, if it is where the escrow credits the account's earnings; else the
   * refusal: no_wallet, payout_address_not_wallet, wrong_claim_flow.
   */
  private claimingWallet(accountId: string, flow: OwnerKind) {
    return walletFor(this.p.ledger.db, accountId, "claim", flow, async (wallet) => {
      const payoutAddress = await settlementAddress(settlementStores(this.p.ledger.db).addresses, accountId);
      if (payoutAddress && isAddressEqual(payoutAddress, wallet.address)) return undefined;
      return refusal(
        "payout_address_not_wallet",
        payoutAddress
          ? `Your earnings are paid to ${payoutAddress}, not to your embedded wallet: send claim() to the escrow from that address.`
          : "This account has no payout address, so it has no earnings to claim.",
      );
    });
  }

  private claimable(wallet: Address): Promise<bigint> {
    return readContract(this.p.chain.client, { address: this.p.escrow, abi: skillEscrowAbi, functionName: "earnings", args: [wallet] });
  }

  /**
   * What the escrow paid, from its Claimed event in the operation's receipt (the truth, whatever was claimable
   * when the claim was built). Throws when the operation reverted: the escrow paid nothing and the gas is spent.
   */
  private paid(receipt: UserOperationReceipt, wallet: Address): bigint {
    if (!receipt.success) {
      throw new WalletError(
        `the claim of ${wallet} reverted on chain (UserOperation ${receipt.userOpHash}): ${receipt.reason ?? "no reason"}`,
      );
    }
    const claimed = parseEventLogs({ abi: skillEscrowAbi, eventName: "Claimed", logs: receipt.logs, strict: true }).filter(
      (log) => isAddressEqual(log.address, this.p.escrow) && isAddressEqual(log.args.seller, wallet),
    );
    if (claimed.length !== 1)
      throw new WalletError(`the claim of ${wallet} (UserOperation ${receipt.userOpHash}) has ${claimed.length} Claimed events`);
    return claimed[0].args.amount;
  }

  /**
   * Claims the account's settled earnings from its server-owned embedded wallet: one sponsored UserOperation
   * (`claim()`, or `claimTo(to)`), mined before this returns. The amount is the escrow's Claimed event's.
   */
  async claimForServerWallet(accountId: string, options: ClaimOptions = {}): Promise<ClaimResult> {
    const found = await this.claimingWallet(accountId, "server");
    if (!found.ok) return found;
    const { wallet } = found;
    const to = options.to ? getAddress(options.to) : wallet.address;
    return underWalletLock(wallet, "claim", async (): Promise<ClaimResult> => {
      if ((await this.claimable(wallet.address)) === 0n) return refusal("nothing_to_claim", NOTHING_TO_CLAIM);
      const owner = await serverOwnerOf(this.p.ledger.db, accountId, this.p.encryptionKey);
      const sent = await sendAsServer(this.p, wallet, owner, [escrowClaimCall({ escrow: this.p.escrow, to: options.to })], {
        ...options,
        what: "claim",
      });
      if (!sent.ok) return sent;
      return {
        ok: true,
        amountMicros: this.paid(sent.receipt, wallet.address),
        userOpHash: sent.userOpHash,
        transactionHash: sent.receipt.receipt.transactionHash,
        to,
      };
    });
  }

  /**
   * Builds, for an account whose wallet its SIWE address owns, the sponsored claim (`claim()`, or `claimTo(to)`)
   * and keeps it for the owner to sign; `claimableMicros` is what the escrow owes now. A newer preparation
   * replaces the account's older claims.
   */
  async prepareOwnerClaim(accountId: string, options: Pick<ClaimOptions, "to"> = {}): Promise<PrepareClaimResult> {
    const found = await this.claimingWallet(accountId, "siwe");
    if (!found.ok) return found;
    const { wallet } = found;
    const claimableMicros = await this.claimable(wallet.address);
    if (claimableMicros === 0n) return refusal("nothing_to_claim", NOTHING_TO_CLAIM);
    const to = options.to ? getAddress(options.to) : wallet.address;
    try {
      const prepared = await this.ownerSigned.prepare(wallet, "claim", [escrowClaimCall({ escrow: this.p.escrow, to: options.to })], {
        claimableMicros,
        to,
      });
      return { ok: true, prepared };
    } catch (error) {
      if (error instanceof WalletError) throw error;
      return bundlerRefusal(error, "claim");
    }
  }

  /**
   * Sends the prepared claim `userOpHash` of `accountId` with its owner's `signature`, waits for it to be mined,
   * and returns what the escrow paid (its Claimed event). Same refusals as an owner's sweep submission.
   */
  async submitOwnerClaim(
    accountId: string,
    userOpHash: Hex,
    signature: Hex,
    options: { timeoutMs?: number } = {},
  ): Promise<SubmitClaimResult> {
    const result = await this.ownerSigned.submit<PreparedClaim>(accountId, "claim", userOpHash, signature, options);
    if (!result.ok) return result;
    const { wallet, details } = result.prepared;
    return {
      ok: true,
      amountMicros: this.paid(result.receipt, wallet),
      userOpHash: result.userOpHash,
      transactionHash: result.receipt.receipt.transactionHash,
      to: details.to,
    };
  }
}
