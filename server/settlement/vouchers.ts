import { randomBytes } from "node:crypto";
import { getAddress } from "viem";
import type { Account, Address, Chain, Hex, Transport, WalletClient } from "viem";
import { normalizeAddress } from "./addresses";
import type { AddressesStore } from "./addresses-store";
import type { IndexerStore } from "./indexer-store";
import type { Ledger } from "../ledger/ledger";
import { settlementStores } from "./store";
import type { VoucherStore } from "./vouchers-store";
import { type SweepReturnType, type VoucherSweepClient, VoucherSweeper } from "./voucher-sweep";
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
 * back to the ledger once the chain's time has passed the deadline and no redemption of it was
 * seen on-chain (./voucher-sweep.ts); the voucher's move from issued to returned is one conditional
 * UPDATE in the transaction that gives the money back, so of two sweeps (two replicas) only one returns it.
 *
 * Every voucher costs the gateway a row, a signature and a place in the sweep, so each is bounded
 * (VoucherLimits): none under a minimum amount, a few open per account at once, a few issued per
 * account per hour. The counts are read from the vouchers' own table under the account's balance
 * lock, in the transaction that would add the next one: they hold across replicas and restarts, and
 * two requests of one account cannot both take the last place.
 *
 * A refused issue writes nothing. The checks run in this order, the first that fails answering:
 * the escrow address (no_address, several_addresses, address_not_yours), an amount asked below the
 * minimum (amount_below_minimum), the open vouchers (too_many_open), the vouchers issued in the last
 * hour (too_many_issued), then the balance (nothing_to_withdraw, insufficient_balance, and
 * amount_below_minimum when everything available is less than the minimum).
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
  | { ok: false; reason: "no_address" | "several_addresses" | "address_not_yours" }
  | { ok: false; reason: "nothing_to_withdraw" | "insufficient_balance"; availableMicros: bigint }
  /** `availableMicros` when it was everything available (no amount asked) that fell short. */
  | { ok: false; reason: "amount_below_minimum"; minimumMicros: bigint; availableMicros?: bigint }
  /** `max` vouchers of the account are open; the first to expire stops counting in `retryAfterMs`. */
  | { ok: false; reason: "too_many_open"; max: number; retryAfterMs: number }
  /** `max` vouchers were issued to the account in the last hour; the first leaves the window in `retryAfterMs`. */
  | { ok: false; reason: "too_many_issued"; max: number; retryAfterMs: number };

/** How far one account may go with vouchers (VOUCHER_MIN_USD, VOUCHERS_OPEN_PER_ACCOUNT_MAX, VOUCHER_RATE_LIMIT_PER_HOUR). */
export interface VoucherLimits {
  /** The least a voucher may be for, in base units. */
  minimumMicros: bigint;
  /** Vouchers of one account that may be open (still issued, not past their deadline) at once. */
  openPerAccountMax: number;
  /** Vouchers one account may be issued in any hour. */
  issuedPerHourMax: number;
}

const HOUR_MS = 3_600_000;

export interface VoucherIssuerParameters {
  ledger: Ledger;
  /** The vouchers' table, the linked addresses and the sweep's progress; by default settlement's stores on `ledger.db`. */
  stores?: { vouchers: VoucherStore; addresses: AddressesStore; indexer: IndexerStore };
  /** Holds VOUCHER_SIGNER_ROLE on the escrow. */
  signer: WalletClient<Transport, Chain | undefined, Account>;
  escrowAddress: Address;
  chainId: number;
  /** How long a voucher stays valid. */
  ttlSec?: number;
  limits: VoucherLimits;
  /** The escrow's deploy block, where the sweep first reads redemptions from (default 0). */
  deployBlock?: bigint;
  /** Blocks the sweep keeps between the head and what it reads (default 0: up to the head). */
  confirmations?: number;
  /** Most blocks per eth_getLogs request of the sweep (default 10,000). */
  logChunkBlocks?: bigint;
  log?: (message: string, error?: unknown) => void;
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
  /** Settles issued vouchers from the chain: `sweep` runs it once, `sweeper.start` in a loop. */
  readonly sweeper: VoucherSweeper;
  private readonly ttlSec: number;
  private readonly store: VoucherStore;
  private readonly addresses: AddressesStore;

  constructor(private readonly p: VoucherIssuerParameters) {
    this.ttlSec = p.ttlSec ?? 3_600;
    const stores = p.stores ?? settlementStores(p.ledger.db);
    this.store = stores.vouchers;
    this.addresses = stores.addresses;
    this.sweeper = new VoucherSweeper({
      ledger: p.ledger,
      stores,
      escrowAddress: p.escrowAddress,
      deployBlock: p.deployBlock ?? 0n,
      confirmations: p.confirmations ?? 0,
      logChunkBlocks: p.logChunkBlocks,
      log: p.log,
    });
  }

  /**
   * Issues a voucher for `amountMicros` of the account's available balance (all of it when
   * omitted), payable to the account's escrow address (`address`, when it has several), or says
   * why not (the order is in the file comment). `nowMs` is when it is issued, for the hourly count;
   * `nowSec` the time its deadline counts from (by default `nowMs`'s).
   */
  async issue(
    accountId: string,
    options: { amountMicros?: bigint; address?: string; nowSec?: number; nowMs?: number } = {},
  ): Promise<IssueVoucherResult> {
    const { ledger, limits } = this.p;
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
    if (options.amountMicros !== undefined && options.amountMicros < limits.minimumMicros) {
      return { ok: false, reason: "amount_below_minimum", minimumMicros: limits.minimumMicros };
    }
    const nowMs = options.nowMs ?? Date.now();
    const nowSec = BigInt(options.nowSec ?? Math.floor(nowMs / 1000));
    const deadline = nowSec + BigInt(this.ttlSec);

    // The debit and the voucher's row in one transaction, on disk before any signature exists.
    const taken = await ledger.db.transaction(
      async (tx) => {
        // The account's balance lock first, as every operation on its money takes it first: another issue for the
        // same account, on this replica or another, waits here until this one commits, and then counts its voucher.
        // Every read below is therefore final until the commit, the balance included.
        await ledger.lockAvailable(accountId, tx);
        // A pending exit's freeze comes first: what it is owed is not available to withdraw.
        await ledger.topUpExitFreezes(accountId, tx);
        const open = await this.store.openOf(accountId, nowSec, tx);
        if (open.count >= limits.openPerAccountMax) {
          const freesAtSec = (open.firstDeadlineSec ?? nowSec) + 1n;
          return {
            ok: false as const,
            reason: "too_many_open" as const,
            max: limits.openPerAccountMax,
            retryAfterMs: Number(freesAtSec - nowSec) * 1000,
          };
        }
        const recent = await this.store.issuedSince(accountId, nowMs - HOUR_MS, tx);
        if (recent.count >= limits.issuedPerHourMax) {
          const retryAfterMs = Math.max(1, (recent.firstAtMs ?? nowMs) + HOUR_MS - nowMs);
          return { ok: false as const, reason: "too_many_issued" as const, max: limits.issuedPerHourMax, retryAfterMs };
        }
        const available = await ledger.balanceOf(accountId, "available", tx);
        const amount = options.amountMicros ?? available;
        if (amount <= 0n) return { ok: false as const, reason: "nothing_to_withdraw" as const, availableMicros: available };
        if (amount > available) return { ok: false as const, reason: "insufficient_balance" as const, availableMicros: available };
        if (amount < limits.minimumMicros) {
          return {
            ok: false as const,
            reason: "amount_below_minimum" as const,
            minimumMicros: limits.minimumMicros,
            availableMicros: available,
          };
        }
        const nonce = randomNonce();
        const entryId = await ledger.withdrawByVoucher(accountId, amount, { address: address!, nonce }, `voucher ${address}:${nonce}`, tx);
        await this.store.insertIssued(
          { address: address!, nonce, accountId, amountMicros: amount, deadlineSec: deadline, entryId, createdAtMs: nowMs },
          tx,
        );
        return { ok: true as const, voucher: { account: getAddress(address!), amount, nonce, deadline } };
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
   * Settles the fate of issued vouchers from the chain, after the sweep in progress (if any): a redemption marks its
   * voucher redeemed; a voucher whose deadline the chain's clock has passed unredeemed can never be redeemed any
   * more, so its amount is given back to the account's available balance (./voucher-sweep.ts).
   */
  sweep(publicClient: VoucherSweepClient): Promise<SweepReturnType> {
    return this.sweeper.sweep(publicClient);
  }
}

/**
 * A refused issue as a member of the code table, told to the account that asked for a voucher to its own
 * escrow address: invalid_request (no address, several, not its own, nothing to withdraw), amount_below_minimum,
 * rate_limited (too many open, or issued this hour; `details.retry_after_sec` says when one more may be issued)
 * or insufficient_balance.
 */
export function issueRefusal(
  refused: Exclude<IssueVoucherResult, { ok: true }>,
): Refusal<"invalid_request" | "amount_below_minimum" | "rate_limited" | "insufficient_balance"> {
  switch (refused.reason) {
    case "insufficient_balance":
      return refusal(
        "insufficient_balance",
        `Only ${usdDisplay(refused.availableMicros)} is available to withdraw (money held by calls in flight stays).`,
      );
    case "amount_below_minimum":
      return refusal(
        "amount_below_minimum",
        refused.availableMicros === undefined
          ? `A withdrawal voucher must be for at least ${usdDisplay(refused.minimumMicros)}.`
          : `Only ${usdDisplay(refused.availableMicros)} is available, and a withdrawal voucher must be for at least ${usdDisplay(refused.minimumMicros)} (the escrow's timed exit takes any amount).`,
      );
    case "too_many_open": {
      const retryAfterSec = Math.max(1, Math.ceil(refused.retryAfterMs / 1000));
      return refusal(
        "rate_limited",
        `This account already holds ${refused.max} open withdrawal vouchers, the most it may: redeem one, or wait ${retryAfterSec} s until the first expires.`,
        { details: { retry_after_sec: retryAfterSec } },
      );
    }
    case "too_many_issued": {
      const retryAfterSec = Math.max(1, Math.ceil(refused.retryAfterMs / 1000));
      return refusal(
        "rate_limited",
        `This account was issued ${refused.max} withdrawal vouchers in the last hour, the most it may: try again in ${retryAfterSec} s.`,
        { details: { retry_after_sec: retryAfterSec } },
      );
    }
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
