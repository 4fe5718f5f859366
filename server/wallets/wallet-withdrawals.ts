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
 * Refusals, checked in this order: no_wallet, server_owned / siwe_owned (the other path must be used),
 * recipient_refused (the escrow or the wallet itself), in_progress (another operation of the wallet is running: the same per-wallet lock as sweeps and claims),
 * wallet_not_escrow_address, nothing_to_withdraw, insufficient_balance (all before any debit), then, after the
 * voucher was issued, rejected / bundler_unavailable / unconfirmed with the voucher.
 */
import { getAddress, isAddressEqual, parseEventLogs, type Address, type Hex } from "viem";
import type { UserOperationReceipt } from "viem/account-abstraction";
import { skillEscrowAbi } from "../chain/abi";
import { escrowWithdrawCalls } from "./aa";
import type { IssuedVoucher, VoucherIssuer } from "../settlement/vouchers";
import type { Ledger } from "../ledger/ledger";
import {
  type BundlerRefusal,
  type OwnerSignedOperations,
  type PreparedOperation,
  type SponsorParameters,
  bundlerRefusal,
  sendAsServer,
} from "./sponsored-operations";
import { type EmbeddedWallet, WalletError, getEmbeddedWallet, serverOwnerOf, withWalletLock } from "./wallets";

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
export type WithdrawRefusal =
  | { ok: false; reason: "no_wallet" }
  /** The gateway holds this wallet's key: use withdrawTo. */
  | { ok: false; reason: "server_owned" }
  /** A SIWE address owns this wallet: its owner must sign (prepareOwnerWithdrawal / submitOwnerWithdrawal). */
  | { ok: false; reason: "siwe_owned" }
  | { ok: false; reason: "in_progress" }
  /** `to` is the escrow (a plain transfer there credits nobody) or the wallet itself (the sweep would take it back). */
  | { ok: false; reason: "recipient_refused"; recipient: "escrow" | "wallet" }
  /** The escrow balance is not the wallet's (vouchers pay the escrow address they name). */
  | { ok: false; reason: "wallet_not_escrow_address"; wallet: Address }
  | { ok: false; reason: "nothing_to_withdraw" | "insufficient_balance"; availableMicros: bigint };

/**
 * The voucher was issued (and the ledger debited) but the operation did not complete. The voucher stays valid
 * until its deadline: it can be submitted another way, or it returns to the balance after that if unredeemed.
 */
export type WithdrawSendFailure = (BundlerRefusal | { ok: false; reason: "unconfirmed"; message: string }) & {
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
  | { ok: false; reason: "unknown" | "in_progress" | "bad_signature" }
  | BundlerRefusal
  | WithdrawSendFailure;

export class WalletWithdrawals {
  constructor(
    private readonly p: WalletWithdrawalsParameters,
    private readonly ownerSigned: OwnerSignedOperations,
  ) {}

  private refuseRecipient(wallet: EmbeddedWallet, to: Address): WithdrawRefusal | undefined {
    if (isAddressEqual(to, this.p.escrow)) return { ok: false, reason: "recipient_refused", recipient: "escrow" };
    if (isAddressEqual(to, wallet.address)) return { ok: false, reason: "recipient_refused", recipient: "wallet" };
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
    switch (issued.reason) {
      case "nothing_to_withdraw":
      case "insufficient_balance":
        return { ok: false, reason: issued.reason, availableMicros: issued.availableMicros ?? 0n };
      default:
        // address_not_yours (the wallet is not linked to this account for deposits) and the address-choice
        // reasons cannot arise with an explicit address of the account's own.
        return { ok: false, reason: "wallet_not_escrow_address", wallet: wallet.address };
    }
  }

  /**
   * Checks the mined operation redeemed exactly this voucher (its VoucherRedeemed event) and notes it redeemed.
   * A reverted operation paid nothing: the voucher is unused and stays issued.
   */
  private redeemed(receipt: UserOperationReceipt, voucher: IssuedVoucher): { ok: true } | { ok: false; message: string } {
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
    this.p.vouchers.markRedeemed(voucher.voucher.account, voucher.voucher.nonce);
    return { ok: true };
  }

  /**
   * Withdraws `amountMicros` (all available when absent) of the account's balance to `to`, from its server-owned
   * embedded wallet: issues the voucher, sends the sponsored operation and waits for it to be mined.
   */
  async withdrawTo(accountId: string, parameters: WithdrawToParameters): Promise<WithdrawResult> {
    const wallet = getEmbeddedWallet(this.p.ledger.db, accountId);
    if (!wallet) return { ok: false, reason: "no_wallet" };
    if (wallet.ownerKind !== "server") return { ok: false, reason: "siwe_owned" };
    const to = getAddress(parameters.to);
    const refused = this.refuseRecipient(wallet, to);
    if (refused) return refused;
    const locked = await withWalletLock(wallet.address, async (): Promise<WithdrawResult> => {
      const owner = serverOwnerOf(this.p.ledger.db, accountId, this.p.encryptionKey);
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
        const sent = await sendAsServer(this.p, wallet, owner, calls, parameters);
        if (!sent.ok) return { ...sent, voucher };
        const checked = this.redeemed(sent.receipt, voucher);
        if (!checked.ok) return { ok: false, reason: "rejected", message: checked.message, voucher, userOpHash: sent.userOpHash };
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
        return { ok: false, reason: "unconfirmed", message: "the operation's outcome is not known", voucher };
      }
    });
    return locked.ran ? locked.value : { ok: false, reason: "in_progress" };
  }

  /**
   * For a SIWE-owned wallet: issues the voucher and builds the sponsored operation redeeming it to `to`, kept for
   * the owner to sign. The debit happens here; an operation never submitted leaves a valid voucher that returns
   * to the balance after its deadline. A newer preparation replaces the account's older ones (their vouchers
   * likewise stay valid until their deadlines).
   */
  async prepareOwnerWithdrawal(accountId: string, parameters: Omit<WithdrawToParameters, "timeoutMs">): Promise<PrepareWithdrawalResult> {
    const wallet = getEmbeddedWallet(this.p.ledger.db, accountId);
    if (!wallet) return { ok: false, reason: "no_wallet" };
    if (wallet.ownerKind !== "siwe") return { ok: false, reason: "server_owned" };
    const to = getAddress(parameters.to);
    const refused = this.refuseRecipient(wallet, to);
    if (refused) return refused;
    const locked = await withWalletLock(wallet.address, async (): Promise<PrepareWithdrawalResult> => {
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
        return { ...bundlerRefusal(error), voucher };
      }
    });
    return locked.ran ? locked.value : { ok: false, reason: "in_progress" };
  }

  /** Sends the prepared withdrawal `userOpHash` of `accountId` with its owner's `signature` and waits for it to be mined. */
  async submitOwnerWithdrawal(
    accountId: string,
    userOpHash: Hex,
    signature: Hex,
    options: { timeoutMs?: number } = {},
  ): Promise<SubmitWithdrawalResult> {
    const wallet = getEmbeddedWallet(this.p.ledger.db, accountId);
    if (!wallet) return { ok: false, reason: "unknown" };
    const locked = await withWalletLock(wallet.address, async (): Promise<SubmitWithdrawalResult> => {
      const pending = this.ownerSigned.find<PreparedWithdrawal>(accountId, "withdrawal", userOpHash);
      let result;
      try {
        result = await this.ownerSigned.submit<PreparedWithdrawal>(accountId, "withdrawal", userOpHash, signature, options);
      } catch (error) {
        // The bundler took it (the preparation is spent) but its receipt did not come in time.
        this.p.log(`an owner's withdrawal ${userOpHash} was sent but not confirmed; its voucher stays valid`, error);
        if (!pending) throw error;
        return {
          ok: false,
          reason: "unconfirmed",
          message: "the operation's outcome is not known",
          voucher: pending.details.voucher,
          userOpHash,
        };
      }
      if (!result.ok) return result;
      const { voucher, to } = result.prepared.details;
      const checked = this.redeemed(result.receipt, voucher);
      if (!checked.ok) return { ok: false, reason: "rejected", message: checked.message, voucher, userOpHash: result.userOpHash };
      return {
        ok: true,
        amountMicros: voucher.voucher.amount,
        nonce: voucher.voucher.nonce,
        to,
        userOpHash: result.userOpHash,
        transactionHash: result.receipt.receipt.transactionHash,
      };
    });
    return locked.ran ? locked.value : { ok: false, reason: "in_progress" };
  }
}
