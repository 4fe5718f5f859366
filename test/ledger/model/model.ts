import { expect } from "chai";
import type { AsyncCommand } from "fast-check";
import type { StoredAddress } from "../../../server/settlement/addresses-store";
import type { ChainExitEvent } from "../../../server/settlement/exits";
import type { Database } from "../../../server/db/sql";
import { assertBalanced } from "../../../server/ledger/invariants";
import { DEV_CREDIT_SOURCE_ID, ESCROW_SOURCE_ID, PLATFORM_ACCOUNT_ID, X402_SOURCE_ID, type Ledger } from "../../../server/ledger/ledger";
import { allBalances } from "../../helpers/ledger";

/*
 * The model the ledger's property test (../ledger.property.test.ts) checks the real ledger against: balances,
 * holds, vouchers and exits, moved by hand-written arithmetic that never calls the code under test. Each
 * rule below is the rule as the ledger documents it (server/ledger/ledger.ts, server/settlement/exits.ts), written
 * out again on plain numbers.
 */

export const USERS = ["user:ann", "user:ben", "user:cat"] as const;
// Ann also sells a skill, so she can be charged for her own call and earn from it.
export const SELLERS = ["seller:acme", "seller:zeta", "user:ann"] as const;

const address = (n: number) => `0x${n.toString(16).padStart(40, "0")}` as StoredAddress;

/**
 * The escrow addresses exits are requested from. Ann has two (the HTTP link route allows one per account
 * today, but the ledger orders an account's exits across its addresses, oldest request first, and that
 * order is what her second address tests); the last address is linked to no account, so its exits freeze
 * nothing.
 */
export const ADDRESSES: readonly { address: StoredAddress; accountId: string | null }[] = [
  { address: address(0xa1), accountId: "user:ann" },
  { address: address(0xa2), accountId: "user:ann" },
  { address: address(0xb1), accountId: "user:ben" },
  { address: address(0xc1), accountId: "user:cat" },
  { address: address(0xd1), accountId: null },
];

export interface ModelHold {
  userId: string;
  sellerId: string;
  chargedMicros: bigint;
  sellerMicros: bigint;
  feeMicros: bigint;
  status: "open" | "captured" | "released";
  /** The price and fee terms the hold was taken at: a usage-priced capture splits what it takes on the same terms. */
  priceMicros: bigint;
  feeMode: "included" | "on_top";
  feeBps: bigint;
}

export interface ModelVoucher {
  accountId: string;
  address: StoredAddress;
  nonce: bigint;
  amountMicros: bigint;
  status: "issued" | "redeemed" | "returned";
}

/** A chain_exits row as the model expects it. */
export interface ModelExit {
  txHash: string;
  logIndex: number;
  blockNumber: bigint;
  address: StoredAddress;
  accountId: string | null;
  requestedMicros: bigint;
  status: "pending" | "replaced" | "cancelled" | "completed";
  frozenMicros: bigint;
  shortfallMicros: bigint;
  paidMicros: bigint | null;
  uncoveredMicros: bigint;
}

export interface Model {
  /** Every (account, bucket) balance, keyed "account/bucket", as allBalances() reads them. */
  balances: Map<string, bigint>;
  holds: ModelHold[];
  vouchers: ModelVoucher[];
  /** Every exit request, in the order of its log on the chain. */
  exits: ModelExit[];
  /** The exit logs the ledger applied (not those it refused as conflicts), for replaying. */
  appliedLogs: ChainExitEvent[];
  /** The next block an exit log is put in; each log gets a block of its own. */
  nextBlock: bigint;
  nextVoucherNonce: bigint;
  /** The x402 authorization nonces reserved so far (server/x402/): each pays for one call. */
  x402Nonces: Set<string>;
}

export interface Real {
  /** The database the ledger is on; replaced by a new handle on the same tables when a step restarts the process. */
  db: Database;
  /** Replaced by a fresh one on the new handle when a step restarts the ledger. */
  ledger: Ledger;
  /** The ledger's id for each of the model's holds, in the same order. */
  holdIds: string[];
  /** Commits what the database has not committed yet, and checks it did (SQLite's open batch; PostgreSQL commits each transaction). */
  flush(): Promise<void>;
  /** What a restarted process opens: a new handle on the same tables (the old one is done with). */
  reopen(): Promise<Database>;
}

export function initialModel(): Model {
  const balances = new Map<string, bigint>();
  for (const id of [...USERS, ...SELLERS]) for (const bucket of ["available", "held", "earned"]) balances.set(`${id}/${bucket}`, 0n);
  balances.set(`${PLATFORM_ACCOUNT_ID}/fees`, 0n);
  balances.set(`${DEV_CREDIT_SOURCE_ID}/source`, 0n);
  balances.set(`${ESCROW_SOURCE_ID}/source`, 0n);
  balances.set(`${X402_SOURCE_ID}/source`, 0n);
  return { balances, holds: [], vouchers: [], exits: [], appliedLogs: [], nextBlock: 1n, nextVoucherNonce: 1n, x402Nonces: new Set() };
}

export function balanceOf(model: Model, key: string): bigint {
  const value = model.balances.get(key);
  if (value === undefined) throw new Error(`model has no balance ${key}`);
  return value;
}

export function move(model: Model, key: string, deltaMicros: bigint): void {
  model.balances.set(key, balanceOf(model, key) + deltaMicros);
}

/** Moves `amountMicros` from a user's available balance to the escrow's side of the books (a withdrawal). */
export function takeOut(model: Model, accountId: string, amountMicros: bigint): void {
  move(model, `${accountId}/available`, -amountMicros);
  move(model, `${ESCROW_SOURCE_ID}/source`, amountMicros);
}

/** Moves `amountMicros` back from the escrow's side to a user's available balance. */
export function giveBack(model: Model, accountId: string, amountMicros: bigint): void {
  move(model, `${ESCROW_SOURCE_ID}/source`, -amountMicros);
  move(model, `${accountId}/available`, amountMicros);
}

/**
 * The exit rule: while an account's pending exits are short of their freeze, its available balance fills
 * them, oldest request (block, then log) first, each up to its shortfall.
 */
export function topUpFreezes(model: Model, accountId: string): void {
  const short = model.exits
    .filter((x) => x.accountId === accountId && x.status === "pending" && x.shortfallMicros > 0n)
    .sort((a, b) => (a.blockNumber === b.blockNumber ? a.logIndex - b.logIndex : a.blockNumber < b.blockNumber ? -1 : 1));
  for (const exit of short) {
    const available = balanceOf(model, `${accountId}/available`);
    if (available <= 0n) break;
    const amount = available < exit.shortfallMicros ? available : exit.shortfallMicros;
    takeOut(model, accountId, amount);
    exit.frozenMicros += amount;
    exit.shortfallMicros -= amount;
  }
}

/** Money reaching a user's available balance by any path: it fills the user's short freezes first. */
export function credit(model: Model, accountId: string, amountMicros: bigint, from: string): void {
  move(model, `${from}/source`, -amountMicros);
  move(model, `${accountId}/available`, amountMicros);
  topUpFreezes(model, accountId);
}

/** A release: the held charge goes back to available, and from there to any short freeze. */
export function releaseHold(model: Model, hold: ModelHold): void {
  move(model, `${hold.userId}/held`, -hold.chargedMicros);
  move(model, `${hold.userId}/available`, hold.chargedMicros);
  hold.status = "released";
  topUpFreezes(model, hold.userId);
}

/** A copy to return to when the real operation is expected to throw and roll back. */
export function snapshot(model: Model): Model {
  return structuredClone(model);
}

export function restore(model: Model, saved: Model): void {
  Object.assign(model, saved);
}

/** The check run after every step: balances, holds, vouchers, exits, then every invariant. */
export async function expectLedgerMatches(model: Model, real: Real): Promise<void> {
  const actual = await allBalances(real.db);
  const keys = [...new Set([...actual.keys(), ...model.balances.keys()])].sort();
  const mismatches = keys
    .filter((key) => actual.get(key) !== model.balances.get(key))
    .map((key) => `${key}: ledger ${actual.get(key)}, model ${model.balances.get(key)}`);
  expect(mismatches, "balances that differ from the model").to.deep.equal([]);

  const statuses = new Map(
    (await real.db.all<{ id: string; status: string }>("SELECT id, status FROM holds")).map((r) => [r.id, r.status]),
  );
  expect(statuses.size).to.equal(model.holds.length);
  model.holds.forEach((hold, i) => expect(statuses.get(real.holdIds[i]), `hold #${i}`).to.equal(hold.status));

  const vouchers = await real.db.all("SELECT account_id, address, nonce, amount, status FROM vouchers ORDER BY nonce");
  expect(vouchers, "vouchers").to.deep.equal(
    model.vouchers.map((v) => ({ account_id: v.accountId, address: v.address, nonce: v.nonce, amount: v.amountMicros, status: v.status })),
  );

  const exits = await real.db.all(
    `SELECT tx_hash, log_index, address, account_id, requested, status, frozen, shortfall, paid, uncovered
     FROM chain_exits ORDER BY block_number, log_index`,
  );
  expect(exits, "chain_exits").to.deep.equal(
    model.exits.map((x) => ({
      tx_hash: x.txHash,
      log_index: BigInt(x.logIndex),
      address: x.address,
      account_id: x.accountId,
      requested: x.requestedMicros,
      status: x.status,
      frozen: x.frozenMicros,
      shortfall: x.shortfallMicros,
      paid: x.paidMicros,
      uncovered: x.uncoveredMicros,
    })),
  );
  await assertBalanced(real.db);
}

/** One operation of the random walk: applied to the ledger and the model, then checked. */
export abstract class Step implements AsyncCommand<Model, Real> {
  check(): boolean {
    return true;
  }
  async run(model: Model, real: Real): Promise<void> {
    await this.apply(model, real);
    await expectLedgerMatches(model, real);
  }
  protected abstract apply(model: Model, real: Real): Promise<void>;
  abstract toString(): string;
}
