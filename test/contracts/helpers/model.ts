import { time } from "@nomicfoundation/hardhat-network-helpers";
import { expect } from "chai";
import { zeroHash, type Address, type Hex } from "viem";
import type { Contract, EscrowFixture } from "./fixtures";
import { hashX402Pending, type X402Pending } from "./x402";

/**
 * A model of SkillEscrow for the seeded property test: what every balance, earning, exit and wallet must be
 * after each step. Commands predict either the exact new state or the exact custom error (name and
 * arguments), run against the contract, and then the whole state is compared and the money invariants checked.
 */
export class EscrowModel {
  nowSec: bigint;
  nextBatch = 1n;
  callCounter = 0;
  readonly balances = new Map<Address, bigint>();
  readonly earnings = new Map<Address, bigint>();
  readonly exits = new Map<Address, { amount: bigint; readyAtSec: bigint }>();
  readonly wallets = new Map<Address, bigint>();
  readonly usedNonces = new Set<string>();
  /** The EIP-3009 authorizations collected through collectX402, so replays can be generated and predicted. */
  readonly x402Authorizations: { from: Address; nonce: Hex }[] = [];
  /** The x402 payments collected and not yet completed, refunded or reclaimed, by call id (in collection order). */
  readonly x402Pending = new Map<Hex, X402Pending>();
  /** The x402 payments that were completed, refunded or reclaimed, to try ending them again. */
  readonly x402Ended: { callId: Hex; pending: X402Pending }[] = [];
  /** Per user: what went in, what was spent on calls, what came back out. */
  readonly deposited = new Map<Address, bigint>();
  readonly spent = new Map<Address, bigint>();
  readonly withdrawn = new Map<Address, bigint>();

  constructor(nowSec: bigint, real: Real, walletBalances: Map<Address, bigint>, escrowed: Map<Address, bigint>) {
    this.nowSec = nowSec;
    for (const account of real.users) {
      this.balances.set(account, escrowed.get(account)!);
      this.deposited.set(account, escrowed.get(account)!);
      this.spent.set(account, 0n);
      this.withdrawn.set(account, 0n);
    }
    for (const account of real.earners) this.earnings.set(account, 0n);
    for (const [account, amount] of walletBalances) this.wallets.set(account, amount);
  }

  add(map: Map<Address, bigint>, account: Address, delta: bigint): void {
    map.set(account, (map.get(account) ?? 0n) + delta);
  }

  /** What x402PendingTotal must read: the sum of the pending payments' values. */
  x402PendingTotal(): bigint {
    let total = 0n;
    for (const pending of this.x402Pending.values()) total += pending.value;
    return total;
  }
}

/** The chain side: contracts bound to each actor. */
export type Real = {
  fx: EscrowFixture;
  users: Address[];
  /** Sellers and the treasury: everyone who can hold earnings. */
  earners: Address[];
  /** Where claimTo sends earnings. */
  coldWallet: Address;
  escrowAs: Map<Address, Contract>;
};

/**
 * After every step: the chain equals the model, the escrow holds exactly what it owes (balances plus
 * earnings plus the pending x402 payments), every pending payment's commitment is the one collected and every
 * ended one is cleared, and no user has taken out more than deposited minus spent.
 */
export async function checkInvariants(model: EscrowModel, real: Real): Promise<void> {
  const { escrow, usdc } = real.fx;
  const read = async (fn: string, args: readonly unknown[]) => (await escrow.read[fn](args)) as bigint;
  const [escrowHoldings, pendingTotal, commitments, endedCommitments, balances, earnings, exits, wallets] = await Promise.all([
    usdc.read.balanceOf([escrow.address]) as Promise<bigint>,
    escrow.read.x402PendingTotal() as Promise<bigint>,
    Promise.all([...model.x402Pending.keys()].map(async (callId) => (await escrow.read.x402Pending([callId])) as Hex)),
    Promise.all(model.x402Ended.map(async ({ callId }) => (await escrow.read.x402Pending([callId])) as Hex)),
    Promise.all(real.users.map((a) => read("balances", [a]))),
    Promise.all(real.earners.map((a) => read("earnings", [a]))),
    Promise.all(real.users.map(async (a) => (await escrow.read.pendingExit([a])) as readonly [bigint, bigint])),
    Promise.all([...model.wallets.keys()].map(async (a) => (await usdc.read.balanceOf([a])) as bigint)),
  ]);
  const sum = (values: bigint[]) => values.reduce((a, b) => a + b, 0n);

  expect(escrowHoldings, "escrow USDC = sum of balances + sum of unclaimed earnings + x402PendingTotal").to.equal(
    sum(balances) + sum(earnings) + pendingTotal,
  );
  expect(pendingTotal, "x402PendingTotal").to.equal(model.x402PendingTotal());
  expect(commitments, "pending x402 commitments").to.deep.equal([...model.x402Pending.values()].map(hashX402Pending));
  expect(endedCommitments, "ended x402 payments are cleared").to.deep.equal(model.x402Ended.map(() => zeroHash));
  expect(balances, "balances").to.deep.equal(real.users.map((a) => model.balances.get(a)!));
  expect(earnings, "earnings").to.deep.equal(real.earners.map((a) => model.earnings.get(a)!));
  expect(exits, "pending exits").to.deep.equal(
    real.users.map((a) => {
      const pending = model.exits.get(a);
      return pending ? [pending.amount, pending.readyAtSec] : [0n, 0n];
    }),
  );
  expect(wallets, "wallet balances").to.deep.equal([...model.wallets.values()]);
  for (const account of real.users) {
    const owed = model.deposited.get(account)! - model.spent.get(account)!;
    expect(model.withdrawn.get(account)! <= owed, `${account} withdrew more than it is owed`).to.equal(true);
    expect(model.withdrawn.get(account)! + model.balances.get(account)!, `${account} accounting`).to.equal(owed);
  }
}

/** Builds the chain side and an initial model from a fresh fixture (users may already hold deposits). */
export async function setUp(fx: EscrowFixture): Promise<{ model: EscrowModel; real: Real }> {
  const users = fx.users.map((w) => w.account.address);
  const earners = [...fx.sellers.map((w) => w.account.address), fx.treasury.account.address];
  const coldWallet = fx.outsider.account.address;
  const escrowAs = new Map<Address, Contract>();
  for (const wallet of [...fx.users, ...fx.sellers, fx.treasury, fx.settler]) {
    escrowAs.set(wallet.account.address, await fx.escrowAs(wallet));
  }
  const real: Real = { fx, users, earners, coldWallet, escrowAs };
  const walletBalances = new Map<Address, bigint>();
  for (const account of [...users, ...earners, coldWallet]) {
    walletBalances.set(account, (await fx.usdc.read.balanceOf([account])) as bigint);
  }
  const escrowed = new Map<Address, bigint>();
  for (const account of users) escrowed.set(account, (await fx.escrow.read.balances([account])) as bigint);
  const nowSec = BigInt(await time.latest());
  return { model: new EscrowModel(nowSec, real, walletBalances, escrowed), real };
}
