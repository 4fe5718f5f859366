import { randomBytes } from "node:crypto";
import { getAddress } from "viem";
import type { Account, Address, Chain, Hex, PublicClient, Transport, WalletClient } from "viem";
import { skillEscrowAbi } from "../chain/abi";
import { normalizeAddress } from "./addresses";
import type { AddressesStore } from "./addresses-store";
import type { Ledger } from "../ledger/ledger";
import { settlementStores } from "./store";
import type { VoucherStore } from "./vouchers-store";
import { usdDisplay } from "../ledger/money";
import { type Refusal, refusal } from "../errors";

/**
 * Cooperative instant withdrawals: the gateway signs an EIP-712 voucher that lets a user
 * take unspent money out of the escrow at once (SkillEscrow.withdrawWithVoucher).
 *
 * The ledger debits the voucher's amount when it is issued, in the same durable transaction as
 * the voucher's row, before the signature leaves: from then on no call can spend it, so a
 * settlement batch can never find the money gone. Only available money can be withdrawn: held
 * (in-flight calls) and spent money stay. A voucher nobody redeems before its deadline is given
 * back to the ledger once the chain's time has passed the deadline and the nonce is still unused
 * on-chain (`sweep`); the voucher's move from issued to returned is one conditional UPDATE in the
 * transaction that gives the money back, so of two sweeps (two replicas) only one returns it.
 */

/** The EIP-712 type the escrow verifies (SkillEscrow.VOUCHER_TYPEHASH). */
export const VOUCHER_TYPES = {
  Voucher: [
    { name: "account", type: "address" },
    { name: "amount", type: "uint256" },
    { name: "nonce", type: "uint256" },
    { name: "deadline", type: "uint256" },
  ],
} as const;

export interface Voucher {
  account: Address;
  amount: bigint;
  nonce: bigint;
  deadline: bigint;
}

export interface IssuedVoucher {
  voucher: Voucher;
  signature: Hex;
  escrow: Address;
  chainId: number;
}

export type IssueVoucherResult =
  | { ok: true; issued: IssuedVoucher }
  | {
      ok: false;
      reason: "no_address" | "several_addresses" | "address_not_yours" | "nothing_to_withdraw" | "insufficient_balance";
      availableMicros?: bigint;
    };

export interface VoucherIssuerParameters {
  ledger: Ledger;
  /** The vouchers' table and the linked addresses; by default settlement's stores on `ledger.db`. */
  stores?: { vouchers: VoucherStore; addresses: AddressesStore };
  /** Holds VOUCHER_SIGNER_ROLE on the escrow. */
  signer: WalletClient<Transport, Chain | undefined, Account>;
  escrowAddress: Address;
  chainId: number;
  /** How long a voucher stays valid. */
  ttlSec?: number;
}

/**
 * A random 62-bit nonce. Random rather than counted, so a nonce cannot collide with one the
 * escrow has already seen even if this ledger was rebuilt or another signer issues vouchers;
 * it fits an SQLite INTEGER, and a collision would only make the later voucher unusable.
 */
function randomNonce(): bigint {
  return (randomBytes(8).readBigUInt64BE() >> 2n) + 1n;
}

export class VoucherIssuer {
  private readonly ttlSec: number;
  private readonly store: VoucherStore;
  private readonly addresses: AddressesStore;

  constructor(private readonly p: VoucherIssuerParameters) {
    this.ttlSec = p.ttlSec ?? 3_600;
    const stores = p.stores ?? settlementStores(p.ledger.db);
    this.store = stores.vouchers;
    this.addresses = stores.addresses;
  }

  /**
   * Issues a voucher for `amountMicros` of the account's available balance (all of it when
   * omitted), payable to the account's escrow address (`address`, when it has several).
   */
  async issue(accountId: string, options: { amountMicros?: bigint; address?: string; nowSec?: number } = {}): Promise<IssueVoucherResult> {
    const { ledger } = this.p;
    const addresses = await this.addresses.addressesOf(accountId);
    let address: string | undefined;
    if (options.address !== undefined) {
      const normalized = normalizeAddress(options.address);
      if (!normalized || (await this.addresses.accountFor(normalized)) !== accountId) return { ok: false, reason: "address_not_yours" };
      address = normalized;
    } else if (addresses.length === 0) {
      return { ok: false, reason: "no_address" };
    } else if (addresses.length > 1) {
      return { ok: false, reason: "several_addresses" };
    } else {
      address = addresses[0];
    }
    const deadline = BigInt((options.nowSec ?? Math.floor(Date.now() / 1000)) + this.ttlSec);

    // The debit and the voucher's row in one transaction, on disk before any signature exists.
    const taken = await ledger.db.transaction(
      async (tx) => {
        // A pending exit's freeze comes first: what it is owed is not available to withdraw.
        await ledger.topUpExitFreezes(accountId, tx);
        for (let attempt = 1; ; attempt++) {
          const available = await ledger.balanceOf(accountId, "available", tx);
          const amount = options.amountMicros ?? available;
          if (amount <= 0n) return { ok: false as const, reason: "nothing_to_withdraw" as const, availableMicros: available };
          if (amount > available) return { ok: false as const, reason: "insufficient_balance" as const, availableMicros: available };
          const nonce = randomNonce();
          let entryId: bigint;
          try {
            entryId = await ledger.withdrawByVoucher(accountId, amount, { address: address!, nonce }, `voucher ${address}:${nonce}`, tx);
          } catch (error) {
            // The balance read above is not locked: another replica may have spent it since. The ledger
            // checked again under the balance's lock and refused; that lock is this transaction's now, so
            // reading again gives the balance no one else can change before the commit.
            if (error instanceof RangeError && attempt === 1) continue;
            throw error;
          }
          await this.store.insertIssued({ address: address!, nonce, accountId, amountMicros: amount, deadlineSec: deadline, entryId }, tx);
          return { ok: true as const, voucher: { account: getAddress(address!), amount, nonce, deadline } };
        }
      },
      { durable: true },
    );
    if (!taken.ok) return taken;

    const signature = await this.p.signer.signTypedData({
      account: this.p.signer.account,
      domain: { name: "SkillEscrow", version: "1", chainId: this.p.chainId, verifyingContract: this.p.escrowAddress },
      types: VOUCHER_TYPES,
      primaryType: "Voucher",
      message: taken.voucher,
    });
    await this.store.setSignature(address!, taken.voucher.nonce, signature);
    return { ok: true, issued: { voucher: taken.voucher, signature, escrow: this.p.escrowAddress, chainId: this.p.chainId } };
  }

  /**
   * Notes a voucher redeemed once the caller has seen its VoucherRedeemed event in a mined receipt (the gateway
   * sent the redemption itself); `sweep` would find the same from the chain later.
   */
  async markRedeemed(account: Address, nonce: bigint): Promise<void> {
    const address = normalizeAddress(account);
    if (!address) return;
    await this.store.settle(address, nonce, "redeemed");
  }

  /**
   * Settles the fate of issued vouchers from the chain: a used nonce is marked redeemed; a
   * voucher whose deadline the chain's clock has passed with its nonce unused can never be
   * redeemed any more, so its amount is given back to the account's available balance.
   */
  async sweep(publicClient: Pick<PublicClient, "readContract" | "getBlock">): Promise<{ redeemed: number; returned: number }> {
    const { ledger } = this.p;
    const open = await this.store.issued();
    if (open.length === 0) return { redeemed: 0, returned: 0 };
    const chainTimeSec = (await publicClient.getBlock({ blockTag: "latest" })).timestamp;
    let redeemed = 0;
    let returned = 0;
    for (const v of open) {
      const used = await publicClient.readContract({
        address: this.p.escrowAddress,
        abi: skillEscrowAbi,
        functionName: "voucherNonceUsed",
        args: [v.address as Address, v.nonce],
      });
      if (used) {
        if (await this.store.settle(v.address, v.nonce, "redeemed")) redeemed++;
      } else if (chainTimeSec > v.deadlineSec) {
        const gaveBack = await ledger.db.transaction(async (tx) => {
          // Only the sweep that moves the voucher out of 'issued' gives its amount back.
          if (!(await this.store.settle(v.address, v.nonce, "returned", tx))) return false;
          await ledger.returnVoucher(
            v.accountId,
            v.amountMicros,
            { address: v.address, nonce: v.nonce },
            `voucher ${v.address}:${v.nonce} expired unredeemed: returned`,
            tx,
          );
          return true;
        });
        if (gaveBack) returned++;
      }
    }
    await ledger.db.durable();
    return { redeemed, returned };
  }
}

/**
 * A refused issue as a member of the code table, told to the account that asked for a voucher to its own
 * escrow address: invalid_request (no address, several, not its own, nothing to withdraw) or insufficient_balance.
 */
export function issueRefusal(refused: Exclude<IssueVoucherResult, { ok: true }>): Refusal<"invalid_request" | "insufficient_balance"> {
  switch (refused.reason) {
    case "insufficient_balance":
      return refusal(
        "insufficient_balance",
        `Only ${usdDisplay(refused.availableMicros ?? 0n)} is available to withdraw (money held by calls in flight stays).`,
      );
    case "no_address":
      return refusal("invalid_request", "This account has no escrow address to withdraw to.");
    case "several_addresses":
      return refusal("invalid_request", "This account has several escrow addresses: name one in `address`.");
    case "address_not_yours":
      return refusal("invalid_request", "That address does not belong to this account.");
    case "nothing_to_withdraw":
      return refusal("invalid_request", "Nothing to withdraw: the available balance is 0.");
  }
}
