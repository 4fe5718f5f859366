/**
 * Which ledger account an on-chain address belongs to, and what happens to the deposits that reached the
 * escrow before the gateway knew. The escrow credits addresses; the ledger credits accounts; this module is
 * the join. An account may have several addresses, an address belongs to one account for good (a relink
 * would move money already credited, so it is refused).
 *
 * Addresses are stored lowercase (`normalizeAddress`): one spelling, so a lookup never misses because of a
 * checksum's letter case.
 */
import { getAddress, isAddress, type Address } from "viem";
import type { Ledger } from "../ledger/ledger";
import type { AddressesStore, ChainDeposit, StoredAddress } from "./addresses-store";
import type { ExitsStore } from "./exits-store";
import { settlementStores } from "./store";

/** Lowercases a 20-byte hex address (any letter case, checksum not enforced); undefined if it is not one. */
export function normalizeAddress(address: string): StoredAddress | undefined {
  if (!isAddress(address, { strict: false })) return undefined;
  return address.toLowerCase() as StoredAddress;
}

/** How a chain deposit is named in messages and in its entry's note: `<tx hash>:<log index>`. */
export function depositMemo(txHash: string, logIndex: number): string {
  return `${txHash.toLowerCase()}:${logIndex}`;
}

/** Account kinds whose `available` bucket a deposit may land in. */
const DEPOSITING_KINDS: ReadonlySet<string> = new Set(["user", "seller"]);

export type LinkAddressParameters = { accountId: string; address: string };

export type LinkAddressReturnType =
  | {
      ok: true;
      address: StoredAddress;
      /** False when this exact link already existed (linking is idempotent). */
      created: boolean;
      /** Deposits that had been waiting for this address and were credited by this link. */
      creditedDeposits: number;
      creditedMicros: bigint;
    }
  | { ok: false; reason: "invalid_address" | "unknown_account" | "account_cannot_deposit" }
  /**
   * The account already has an address. Settlement debits one address per account, so money at a
   * second one would make batches fail; until balances are kept per address, one is allowed.
   */
  | { ok: false; reason: "second_address" }
  /**
   * The address completed an exit while no account owned it: the escrow paid out of deposits the
   * ledger still holds as waiting, so linking would credit money that is gone. An operator must look.
   */
  | { ok: false; reason: "address_exited" }
  | { ok: false; reason: "address_taken"; accountId: string };

/** The tables a link writes beside the ledger's credits: the address's owner, its waiting deposits, its exits. */
export type LinkAddressStores = { addresses: AddressesStore; exits: ExitsStore };

/**
 * Links `address` to `accountId` and, in the same ledger operation, credits every recorded deposit that was
 * waiting for it; resolves once that is durable. Expected refusals are results, not throws.
 */
export async function linkAddress(
  ledger: Ledger,
  parameters: LinkAddressParameters,
  stores: LinkAddressStores = settlementStores(ledger.db),
): Promise<LinkAddressReturnType> {
  const result = linkAddressSync(ledger, parameters, stores);
  await ledger.commit.durable();
  return result;
}

/**
 * `linkAddress` without waiting for the disk, for a caller composing it into a larger ledger operation.
 * Whoever reports the result must await `ledger.commit.durable()` first.
 */
export function linkAddressSync(
  ledger: Ledger,
  parameters: LinkAddressParameters,
  { addresses, exits }: LinkAddressStores = settlementStores(ledger.db),
): LinkAddressReturnType {
  const address = normalizeAddress(parameters.address);
  if (!address) return { ok: false, reason: "invalid_address" };
  const { accountId } = parameters;
  return ledger.commit.run(() => {
    const account = ledger.getAccount(accountId);
    if (!account) return { ok: false as const, reason: "unknown_account" as const };
    if (!DEPOSITING_KINDS.has(account.kind)) return { ok: false as const, reason: "account_cannot_deposit" as const };
    const owner = addresses.accountFor(address);
    if (owner !== undefined && owner !== accountId) {
      return { ok: false as const, reason: "address_taken" as const, accountId: owner };
    }
    if (owner === undefined) {
      if (addresses.addressesOf(accountId).length > 0) return { ok: false as const, reason: "second_address" as const };
      if (exits.completedUnownedCount(address) > 0) return { ok: false as const, reason: "address_exited" as const };
      addresses.link(address, accountId, Date.now());
    }
    // Exits the address requested before anyone owned it become the account's: a pending one
    // is frozen like any other (its whole amount is owed to the freeze, taken from the
    // deposits credited just below), so none of that money can be spent before it is paid.
    const adopted = exits.adoptUnowned(address, accountId);
    const { count, totalMicros } = creditWaitingDeposits(ledger, addresses, address, accountId);
    if (adopted > 0) {
      ledger.noteExitShortfall();
      ledger.topUpExitFreezes(accountId);
    }
    return { ok: true as const, address, created: owner === undefined, creditedDeposits: count, creditedMicros: totalMicros };
  });
}

/** The account an address is linked to, if any (any letter case; undefined for a string that is not an address). */
export function accountForAddress(addresses: AddressesStore, address: string): string | undefined {
  const normalized = normalizeAddress(address);
  return normalized && addresses.accountFor(normalized);
}

/**
 * The escrow address a ledger account is settled at: its oldest linked address. Links are permanent and only
 * ever added, so the answer never changes once an account has one; a batch rebuilt after a restart therefore
 * names the same addresses it was recorded with.
 */
export function settlementAddress(addresses: AddressesStore, accountId: string): Address | undefined {
  const [first] = addresses.addressesOf(accountId);
  return first === undefined ? undefined : getAddress(first);
}

/**
 * Credits one chain deposit to `accountId` as a `deposit` entry linked to its log and returns the entry's id,
 * which the caller stores beside the deposit. Runs inside the caller's ledger operation: the indexer's (a
 * deposit to a known address) or the link's (a deposit that was waiting).
 */
export function creditChainDeposit(
  ledger: Ledger,
  deposit: Pick<ChainDeposit, "txHash" | "logIndex" | "amountMicros">,
  accountId: string,
): bigint {
  const log = { txHash: deposit.txHash.toLowerCase(), logIndex: deposit.logIndex };
  return ledger.creditChainDeposit(accountId, deposit.amountMicros, log, depositMemo(log.txHash, log.logIndex));
}

/** Credits the recorded deposits to `address` that no account had taken yet. */
function creditWaitingDeposits(
  ledger: Ledger,
  addresses: AddressesStore,
  address: StoredAddress,
  accountId: string,
): { count: number; totalMicros: bigint } {
  const waiting = addresses.waitingDeposits(address);
  let totalMicros = 0n;
  for (const deposit of waiting) {
    const entryId = creditChainDeposit(ledger, deposit, accountId);
    if (!addresses.claimDeposit(deposit.txHash, deposit.logIndex, accountId, entryId)) {
      throw new Error(`deposit ${depositMemo(deposit.txHash, deposit.logIndex)} was claimed twice`);
    }
    totalMicros += deposit.amountMicros;
  }
  return { count: waiting.length, totalMicros };
}
