/**
 * A withdrawal to an address from an embedded wallet. The escrow pays a voucher to `voucher.account`, which for a
 * signed-up person is their embedded wallet; a server-owned wallet's USDC is swept straight back into the escrow,
 * so a plain voucher could never reach the person. Here the gateway sends, from the wallet, ONE sponsored
 * UserOperation: `executeBatch([escrow, usdc], [0, 0], [withdrawWithVoucher(voucher, signature), transfer(to,
 * amount)])`, so the USDC passes through the wallet and on to `to` in the same transaction.
 *
 * Order, for the money's sake: the voucher is issued first by the VoucherIssuer, which debits the ledger durably
 * before anything is signed; only then is the operation built and sent. If sending fails after that, the voucher
 * stays issued and valid (returned in the failure, to be submitted another way); the voucher sweeper gives its
 * amount back to the balance once its deadline passes unredeemed. Nothing is ever debited twice: a retry issues
 * a new voucher only for what is still available.
 *
 * Refusals (codes of server/errors.ts), checked in this order: no_wallet, wrong_withdrawal_flow (the other path
 * must be used), invalid_request (`to` is the escrow or the wallet itself), withdrawal_in_progress (another
 * operation of the wallet is running: the same per-wallet lock as sweeps and claims), no_deposit_address (the
 * wallet is not the escrow address), then the voucher's own (../settlement/vouchers.ts): amount_below_minimum,
 * rate_limited (the account's open vouchers, or those issued this hour), invalid_request (nothing to withdraw),
 * insufficient_balance (all before any debit), then, after the voucher was issued, chain_unavailable or
 * user_operation_rejected with the voucher.
 */
import { getAddress, isAddressEqual, parseEventLogs, type Address, type Hex } from "viem";
import type { UserOperationReceipt } from "viem/account-abstraction";
import { skillEscrowAbi } from "../chain/abi";
import { escrowWithdrawCalls } from "./aa-flows";
import { type IssuedVoucher, type VoucherIssuer, issueRefusal } from "../settlement/vouchers";
import type { Ledger } from "../ledger/ledger";
import { type Refusal, refusal } from "../errors";
import {
  type BundlerRefusal,
  type OwnerSignedOperations,
  type PreparedOperation,
  type SponsorParameters,
  type SubmitOperationResult,
  gatewaySendFailure,
  sendAsServer,
} from "./sponsored-operations";
import { WalletError } from "./wallet-error";
import { underWalletLock, walletFor } from "./wallet-operations";
import { type EmbeddedWallet, getEmbeddedWallet, serverOwnerOf } from "./wallets";

export interface WalletWithdrawalsParameters extends SponsorParameters {
  ledger: Ledger;
  /** WALLET_ENCRYPTION_KEY, for wallets whose owner key the server holds. */
  encryptionKey: string;
  /** Issues (and debits) the vouchers the operations redeem. */
  vouchers: VoucherIssuer;
  log: (message: string, error?: unknown) => void;
}

export type WithdrawToParameters = {
  /** Base units; all available when absent. */
  amountMicros?: bigint | undefined;
  /** Where the USDC goes. Never zero, the escrow or the wallet itself (checked by the caller). */
  to: Address;
  /** How long to wait for the UserOperation to be mined. */
  timeoutMs?: number;
};

/** Why nothing was debited and nothing sent. */
export type WithdrawRefusal = Refusal<
  | "no_wallet"
  | "wrong_withdrawal_flow"
  | "invalid_request"
  | "withdrawal_in_progress"
  | "no_deposit_address"
  | "amount_below_minimum"
  | "rate_limited"
  | "insufficient_balance"
>;

/**
 * The voucher was issued (and the ledger debited) but the operation did not complete: the bundler's refusal, or
 * an outcome not known in time (chain_unavailable). The voucher stays valid until its deadline: it can be
 * submitted another way, or it returns to the balance after that if unredeemed. The message says so.
 */
export type WithdrawSendFailure = (BundlerRefusal | Refusal<"chain_unavailable">) & {
  voucher: IssuedVoucher;
  userOpHash?: Hex;
};

export type WithdrawResult =
  | { ok: true; amountMicros: bigint; nonce: bigint; to: Address; userOpHash: Hex; transactionHash: Hex }
  | WithdrawRefusal
  | WithdrawSendFailure;

/** A SIWE wallet's withdrawal waiting for its owner's signature of `userOpHash`; its voucher is already issued. */
export type PreparedWithdrawal = PreparedOperation<"withdrawal", { voucher: IssuedVoucher; to: Address }>;

export type PrepareWithdrawalResult = { ok: true; prepared: PreparedWithdrawal } | WithdrawRefusal | WithdrawSendFailure;

export type SubmitWithdrawalResult =
  | { ok: true; amountMicros: bigint; nonce: bigint; to: Address; userOpHash: Hex; transactionHash: Hex }
  | Exclude<SubmitOperationResult<PreparedWithdrawal>, { ok: true }>
  | WithdrawSendFailure;

export class WalletWithdrawals {
  constructor(
    private readonly p: WalletWithdrawalsParameters,
    private readonly ownerSigned: OwnerSignedOperations,
  ) {}

  private refuseRecipient(wallet: EmbeddedWallet, to: Address): WithdrawRefusal | undefined {
    if (isAddressEqual(to, this.p.escrow))
      return refusal("invalid_request", "to must not be the escrow: USDC sent to it directly is credited to nobody.");
    if (isAddressEqual(to, wallet.address))
      return refusal("invalid_request", "to must not be your embedded wallet: its USDC is deposited back into your balance.");
    return undefined;
  }

  /** Issues the voucher for the wallet (the durable ledger debit happens inside, before the signature). */
  private async issue(
    accountId: string,
    wallet: EmbeddedWallet,
    amountMicros: bigint | undefined,
  ): Promise<{ ok: true; voucher: IssuedVoucher } | WithdrawRefusal> {
    const issued = await this.p.vouchers.issue(accountId, { amountMicros, address: wallet.address });
    if (issued.ok) return { ok: true, voucher: issued.issued };
    // address_not_yours (the wallet is not linked to this account for deposits) and the address-choice
    // reasons cannot arise with an explicit address of the account's own.
    if (issued.reason === "address_not_yours" || issued.reason === "no_address" || issued.reason === "several_addresses") {
      return refusal("no_deposit_address", "Your embedded wallet is not your escrow address yet, so it cannot withdraw your balance.");
    }
    // The amount and the account's voucher limits are refused as a plain withdrawal's are.
    return issueRefusal(issued);
  }

  /**
   * Checks the mined operation redeemed exactly this voucher (its VoucherRedeemed event) and notes it redeemed.
   * A reverted operation paid nothing: the voucher is unused and stays issued.
   */
  private async redeemed(receipt: UserOperationReceipt, voucher: IssuedVoucher): Promise<{ ok: true } | { ok: false; message: string }> {
    if (!receipt.success) return { ok: false, message: `the withdrawal reverted on chain: ${receipt.reason ?? "no reason"}` };
    const events = parseEventLogs({ abi: skillEscrowAbi, eventName: "VoucherRedeemed", logs: receipt.logs, strict: true }).filter(
      (log) =>
        isAddressEqual(log.address, this.p.escrow) &&
        isAddressEqual(log.args.account, voucher.voucher.account) &&
        log.args.nonce === voucher.voucher.nonce,
    );
    if (events.length !== 1 || events[0].args.amount !== voucher.voucher.amount) {
      throw new WalletError(
        `UserOperation ${receipt.userOpHash} succeeded without redeeming voucher ${voucher.voucher.nonce} of ${voucher.voucher.account}`,
      );
    }
    await this.p.vouchers.markRedeemed(voucher.voucher.account, voucher.voucher.nonce);
    return { ok: true };
  }

  /**
   * The failure of an operation whose voucher was issued: logged (the money is in a voucher now), and told to the
   * client with the voucher, which stays valid until its deadline.
   */
  private sendFailure(
    refused: BundlerRefusal | Refusal<"chain_unavailable">,
    voucher: IssuedVoucher,
    userOpHash?: Hex,
  ): WithdrawSendFailure {
    this.p.log(`a withdrawal to an address did not complete (voucher ${voucher.voucher.nonce}): ${refused.code}`, refused.cause);
    const expires = new Date(Number(voucher.voucher.deadline) * 1000).toISOString();
    const message = `${refused.message} Its voucher was issued and stays valid until ${expires}: it can be submitted to the escrow another way, and if it is not redeemed by then the amount returns to your balance.`;
    return { ...refused, message, voucher, ...(userOpHash ? { userOpHash } : {}) };
  }

  /**
   * Withdraws `amountMicros` (all available when absent) of the account's balance to `to`, from its server-owned
   * embedded wallet: issues the voucher, sends the sponsored operation and waits for it to be mined.
   */
  async withdrawTo(accountId: string, parameters: WithdrawToParameters): Promise<WithdrawResult> {
    const found = await walletFor(this.p.ledger.db, accountId, "withdrawal", "server");
    if (!found.ok) return found;
    const { wallet } = found;
    const to = getAddress(parameters.to);
    const refused = this.refuseRecipient(wallet, to);
    if (refused) return refused;
    return underWalletLock(wallet, "withdrawal", async (): Promise<WithdrawResult> => {
      const owner = await serverOwnerOf(this.p.ledger.db, accountId, this.p.encryptionKey);
      const issued = await this.issue(accountId, wallet, parameters.amountMicros);
      if (!issued.ok) return issued;
      const { voucher } = issued;
      // From here on the ledger is debited: every failure carries the voucher, which stays valid.
      try {
        const calls = escrowWithdrawCalls({
          usdc: this.p.usdc,
          escrow: this.p.escrow,
          voucher: voucher.voucher,
          signature: voucher.signature,
          to,
        });
        const sent = await sendAsServer(this.p, wallet, owner, calls, { ...parameters, what: "withdrawal" });
        if (!sent.ok) return this.sendFailure(sent, voucher);
        const checked = await this.redeemed(sent.receipt, voucher);
        if (!checked.ok) return this.sendFailure(gatewaySendFailure("withdrawal", checked.message), voucher, sent.userOpHash);
        return {
          ok: true,
          amountMicros: voucher.voucher.amount,
          nonce: voucher.voucher.nonce,
          to,
          userOpHash: sent.userOpHash,
          transactionHash: sent.receipt.receipt.transactionHash,
        };
      } catch (error) {
        this.p.log(
          `the withdrawal of voucher ${voucher.voucher.nonce} from ${wallet.address} did not complete; the voucher stays valid`,
          error,
        );
        return this.sendFailure(unconfirmed(error), voucher);
      }
    });
  }

  /**
   * For a SIWE-owned wallet: issues the voucher and builds the sponsored operation redeeming it to `to`, kept for
   * the owner to sign. The debit happens here; an operation never submitted leaves a valid voucher that returns
   * to the balance after its deadline. A newer preparation replaces the account's older ones (their vouchers
   * likewise stay valid until their deadlines).
   */
  async prepareOwnerWithdrawal(accountId: string, parameters: Omit<WithdrawToParameters, "timeoutMs">): Promise<PrepareWithdrawalResult> {
    const found = await walletFor(this.p.ledger.db, accountId, "withdrawal", "siwe");
    if (!found.ok) return found;
    const { wallet } = found;
    const to = getAddress(parameters.to);
    const refused = this.refuseRecipient(wallet, to);
    if (refused) return refused;
    return underWalletLock(wallet, "withdrawal", async (): Promise<PrepareWithdrawalResult> => {
      const issued = await this.issue(accountId, wallet, parameters.amountMicros);
      if (!issued.ok) return issued;
      const { voucher } = issued;
      try {
        const calls = escrowWithdrawCalls({
          usdc: this.p.usdc,
          escrow: this.p.escrow,
          voucher: voucher.voucher,
          signature: voucher.signature,
          to,
        });
        const prepared = await this.ownerSigned.prepare(wallet, "withdrawal", calls, { voucher, to });
        return { ok: true, prepared };
      } catch (error) {
        // The gateway built this operation itself: a refusal now is its problem, not the owner's.
        return this.sendFailure(gatewaySendFailure("withdrawal", error), voucher);
      }
    });
  }

  /** Sends the prepared withdrawal `userOpHash` of `accountId` with its owner's `signature` and waits for it to be mined. */
  async submitOwnerWithdrawal(
    accountId: string,
    userOpHash: Hex,
    signature: Hex,
    options: { timeoutMs?: number } = {},
  ): Promise<SubmitWithdrawalResult> {
    const wallet = await getEmbeddedWallet(this.p.ledger.db, accountId);
    if (!wallet) return refusal("not_found", "No prepared withdrawal with this hash on this account (it may have expired): prepare again.");
    return underWalletLock(wallet, "withdrawal", async (): Promise<SubmitWithdrawalResult> => {
      const pending = this.ownerSigned.find<PreparedWithdrawal>(accountId, "withdrawal", userOpHash);
      let result;
      try {
        result = await this.ownerSigned.submit<PreparedWithdrawal>(accountId, "withdrawal", userOpHash, signature, options);
      } catch (error) {
        // The bundler took it (the preparation is spent) but its receipt did not come in time.
        this.p.log(`an owner's withdrawal ${userOpHash} was sent but not confirmed; its voucher stays valid`, error);
        if (!pending) throw error;
        return this.sendFailure(unconfirmed(error), pending.details.voucher, userOpHash);
      }
      // Refused before the bundler took it: the preparation stays usable until it expires, so it may be signed again.
      if (!result.ok) return result;
      const { voucher, to } = result.prepared.details;
      const checked = await this.redeemed(result.receipt, voucher);
      if (!checked.ok) {
        // The owner signed what reverted: told as a refusal of their operation, as the bundler's would be.
        const reverted = refusal("user_operation_rejected", `The operation was mined but ${checked.message}.`);
        return this.sendFailure(reverted, voucher, result.userOpHash);
      }
      return {
        ok: true,
        amountMicros: voucher.voucher.amount,
        nonce: voucher.voucher.nonce,
        to,
        userOpHash: result.userOpHash,
        transactionHash: result.receipt.receipt.transactionHash,
      };
    });
  }
}

/** A sent operation whose receipt did not come in time: it may still complete. */
function unconfirmed(cause: unknown): Refusal<"chain_unavailable"> {
  return refusal("chain_unavailable", "The withdrawal was sent but not confirmed in time; it may still complete.", { cause });
}
