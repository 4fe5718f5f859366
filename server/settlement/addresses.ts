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
import { isUniqueViolation, type Sql } from "../db/sql";
import type { Ledger } from "../ledger/ledger";
import type { AddressesStore, ChainDeposit, StoredAddress } from "./addresses-store";
import type { ExitsStore } from "./exits-store";
import type { IndexerStore } from "./indexer-store";
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

/**
 * The tables a link writes beside the ledger's credits: the address's owner, its waiting deposits, its exits;
 * and the indexer's progress rows, which order links against the indexer's chunks (see linkAddress).
 */
export type LinkAddressStores = { addresses: AddressesStore; exits: ExitsStore; indexer: IndexerStore };

/** A link refused by a unique constraint lost a race with another link of the same address: tried again this many times. */
const LINK_ATTEMPTS = 2;

/**
 * Links `address` to `accountId` and, in the same transaction, credits every recorded deposit that was
 * waiting for it. Expected refusals are results, not throws.
 *
 * Given `tx`, it joins the caller's transaction, and whoever reports the result waits for durability
 * (`db.durable()` or a durable transaction); without, it runs in a durable transaction of its own.
 *
 * On PostgreSQL links and the indexer's chunks run at once, on one replica or several. A link first locks
 * the indexers' progress rows (IndexerStore.lockAll), which every chunk also locks before it reads who owns
 * an address: so a chunk never records a deposit as waiting for an address a concurrent link is giving an
 * account (the link would not see it, and it would wait for good), nor an exit as unowned; and two links
 * of one account take turns, so it cannot end up with two addresses. Before the indexer has finished its
 * first chunk there is no row to lock; a link of an address that another link takes at the same time is
 * then refused by the address's key, and the link is tried again (it then finds the owner).
 */
export async function linkAddress(
  ledger: Ledger,
  parameters: LinkAddressParameters,
  stores: LinkAddressStores = settlementStores(ledger.db),
  tx?: Sql,
): Promise<LinkAddressReturnType> {
  const address = normalizeAddress(parameters.address);
  if (!address) return { ok: false, reason: "invalid_address" };
  if (tx) return linkWithin(ledger, parameters.accountId, address, stores, tx);
  for (let attempt = 1; ; attempt++) {
    try {
      return await ledger.db.transaction((tx) => linkWithin(ledger, parameters.accountId, address, stores, tx), { durable: true });
    } catch (error) {
      if (attempt < LINK_ATTEMPTS && isUniqueViolation(error)) continue;
      throw error;
    }
  }
}

async function linkWithin(
  ledger: Ledger,
  accountId: string,
  address: StoredAddress,
  { addresses, exits, indexer }: LinkAddressStores,
  tx: Sql,
): Promise<LinkAddressReturnType> {
  await indexer.lockAll(tx);
  const account = await ledger.getAccount(accountId, tx);
  if (!account) return { ok: false, reason: "unknown_account" };
  if (!DEPOSITING_KINDS.has(account.kind)) return { ok: false, reason: "account_cannot_deposit" };
  const owner = await addresses.accountFor(address, tx);
  if (owner !== undefined && owner !== accountId) return { ok: false, reason: "address_taken", accountId: owner };
  if (owner === undefined) {
    if ((await addresses.addressesOf(accountId, tx)).length > 0) return { ok: false, reason: "second_address" };
    if ((await exits.completedUnownedCount(address, tx)) > 0) return { ok: false, reason: "address_exited" };
    await addresses.link(address, accountId, Date.now(), tx);
  }
  // Exits the address requested before anyone owned it become the account's: a pending one
  // is frozen like any other (its whole amount is owed to the freeze, taken from the
  // deposits credited just below), so none of that money can be spent before it is paid.
  const adopted = await exits.adoptUnowned(address, accountId, tx);
  const { count, totalMicros } = await creditWaitingDeposits(ledger, addresses, address, accountId, tx);
  if (adopted > 0) {
    ledger.noteExitShortfall();
    await ledger.topUpExitFreezes(accountId, tx);
  }
  return { ok: true, address, created: owner === undefined, creditedDeposits: count, creditedMicros: totalMicros };
}

/** The account an address is linked to, if any (any letter case; undefined for a string that is not an address). */
export async function accountForAddress(addresses: AddressesStore, address: string, sql?: Sql): Promise<string | undefined> {
  const normalized = normalizeAddress(address);
  return normalized && addresses.accountFor(normalized, sql);
}

/**
 * The escrow address a ledger account is settled at: its oldest linked address. Links are permanent and only
 * ever added, so the answer never changes once an account has one; a batch rebuilt after a restart therefore
 * names the same addresses it was recorded with.
 */
export async function settlementAddress(addresses: AddressesStore, accountId: string, sql?: Sql): Promise<Address | undefined> {
  const [first] = await addresses.addressesOf(accountId, sql);
  return first === undefined ? undefined : getAddress(first);
}

/**
 * Credits one chain deposit to `accountId` as a `deposit` entry linked to its log and returns the entry's id,
 * which the caller stores beside the deposit. Runs inside the caller's transaction: the indexer's (a deposit
 * to a known address) or the link's (a deposit that was waiting). The database refuses a second credit of
 * the same log (a unique violation), which undoes the caller's whole transaction.
 */
export function creditChainDeposit(
  ledger: Ledger,
  deposit: Pick<ChainDeposit, "txHash" | "logIndex" | "amountMicros">,
  accountId: string,
  tx: Sql,
): Promise<bigint> {
  const log = { txHash: deposit.txHash.toLowerCase(), logIndex: deposit.logIndex };
  return ledger.creditChainDeposit(accountId, deposit.amountMicros, log, depositMemo(log.txHash, log.logIndex), tx);
}

/** Credits the recorded deposits to `address` that no account had taken yet. */
async function creditWaitingDeposits(
  ledger: Ledger,
  addresses: AddressesStore,
  address: StoredAddress,
  accountId: string,
  tx: Sql,
): Promise<{ count: number; totalMicros: bigint }> {
  // Locked as read (PostgreSQL): a concurrent credit of the same deposits waits, then finds them taken.
  const waiting = await addresses.waitingDeposits(address, tx);
  let totalMicros = 0n;
  for (const deposit of waiting) {
    const entryId = await creditChainDeposit(ledger, deposit, accountId, tx);
    if (!(await addresses.claimDeposit(deposit.txHash, deposit.logIndex, accountId, entryId, tx))) {
      throw new Error(`deposit ${depositMemo(deposit.txHash, deposit.logIndex)} was claimed twice`);
    }
    totalMicros += deposit.amountMicros;
  }
  return { count: waiting.length, totalMicros };
}
