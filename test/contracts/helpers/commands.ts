import { time } from "@nomicfoundation/hardhat-network-helpers";
import fc from "fast-check";
import { keccak256, toHex, type Hash, type Hex } from "viem";
import { batchFromReceipts, buildReceipt, feeOf } from "./batch";
import { expectRevert } from "./errors";
import { DAY_SEC, USDC } from "./fixtures";
import { checkInvariants, type EscrowModel, type Real } from "./model";
import { signVoucher } from "./signatures";
import { X402_RECLAIM_DELAY_SEC, signX402Payment, type X402Payment, type X402Pending } from "./x402";

/**
 * The commands of the seeded property test: each predicts, from the model, either the exact new state or the
 * exact custom error (name and arguments), runs against the contract, and updates the model.
 */

type Expected = { ok: true } | { ok: false; errorName: string; args?: readonly unknown[] };

/**
 * How often each command ended in each outcome ("deposit:ok", "settle:EscrowInsufficientBalance", ...). The
 * property test asserts that every path it claims to cover was actually taken, so a generator that drifts into
 * producing only failures cannot go unnoticed.
 */
export const outcomeCounts = new Map<string, number>();

/** Sends one transaction at a known block time (the model's clock plus one second). */
async function send(name: string, model: EscrowModel, real: Real, tx: () => Promise<Hash>, expected: Expected): Promise<void> {
  const key = `${name}:${expected.ok ? "ok" : expected.errorName}`;
  outcomeCounts.set(key, (outcomeCounts.get(key) ?? 0) + 1);
  model.nowSec += 1n;
  await time.setNextBlockTimestamp(model.nowSec);
  if (expected.ok) {
    const hash = await tx();
    await real.fx.publicClient.waitForTransactionReceipt({ hash });
  } else {
    await expectRevert(tx(), expected.errorName, expected.args ?? [], [real.fx.usdc.abi]);
  }
}

const min = (a: bigint, b: bigint) => (a < b ? a : b);

class DepositCommand implements fc.AsyncCommand<EscrowModel, Real> {
  constructor(
    readonly user: number,
    readonly amount: bigint,
  ) {}
  check = () => true;
  async run(model: EscrowModel, real: Real) {
    const account = real.users[this.user];
    const ok = this.amount >= USDC;
    await send(
      "deposit",
      model,
      real,
      () => real.escrowAs.get(account)!.write.deposit([this.amount]),
      ok ? { ok } : { ok, errorName: "EscrowDepositBelowMinimum", args: [this.amount, USDC] },
    );
    if (!ok) return;
    model.add(model.balances, account, this.amount);
    model.add(model.wallets, account, -this.amount);
    model.add(model.deposited, account, this.amount);
  }
  toString = () => `deposit(user ${this.user}, ${this.amount})`;
}

type Call = { user: number; seller: number; priceMicros: bigint };

class SettleCommand implements fc.AsyncCommand<EscrowModel, Real> {
  constructor(
    readonly calls: Call[],
    readonly replay: boolean,
  ) {}
  check = () => true;
  async run(model: EscrowModel, real: Real) {
    const settler = real.escrowAs.get(real.fx.settler.account.address)!;
    const sellers = real.earners.slice(0, -1);
    const receipts = this.calls.map((call) =>
      buildReceipt(model.callCounter++, real.users[call.user], sellers[call.seller], call.priceMicros),
    );
    if (this.replay) {
      const stale = batchFromReceipts(model.nextBatch - 1n, receipts).batch;
      await send("settle", model, real, () => settler.write.settle([stale]), {
        ok: false,
        errorName: "EscrowBatchOutOfOrder",
        args: [model.nextBatch, model.nextBatch - 1n],
      });
      return;
    }
    const { batch } = batchFromReceipts(model.nextBatch, receipts);
    const overdrawn = batch.debits.find(({ account, amount }) => amount > model.balances.get(account)!);
    await send(
      "settle",
      model,
      real,
      () => settler.write.settle([batch]),
      overdrawn
        ? {
            ok: false,
            errorName: "EscrowInsufficientBalance",
            args: [overdrawn.account, model.balances.get(overdrawn.account)!, overdrawn.amount],
          }
        : { ok: true },
    );
    if (overdrawn) return;
    model.nextBatch += 1n;
    for (const { account, amount } of batch.debits) {
      model.add(model.balances, account, -amount);
      model.add(model.spent, account, amount);
    }
    for (const { seller, amount } of batch.credits) model.add(model.earnings, seller, amount);
    model.add(model.earnings, real.earners[real.earners.length - 1], batch.platformFee);
  }
  toString = () => `settle(${this.replay ? "replay, " : ""}${this.calls.map((c) => `${c.user}->${c.seller}:${c.priceMicros}`).join(" ")})`;
}

/**
 * One x402 payment collected by the settler before its call runs: the payer's wallet, not its escrowed balance,
 * pays into the escrow, where the value stays pending until an {@link EndX402Command}. Flaws: a replay of an
 * authorization already collected (`pick` chooses which), an expired authorization, a fee above the value, a
 * call id that already has a pending payment (`pick` chooses which).
 */
class CollectX402Command implements fc.AsyncCommand<EscrowModel, Real> {
  constructor(
    readonly user: number,
    readonly seller: number,
    readonly value: bigint,
    readonly flaw: "none" | "replay" | "expired" | "feeTooHigh" | "pendingCallId",
    readonly pick: number,
  ) {}
  check = () => true;
  async run(model: EscrowModel, real: Real) {
    const payer = real.fx.users[this.user];
    const from = payer.account.address;
    const txTimeSec = model.nowSec + 1n;
    const collected = model.x402Authorizations.filter((authorization) => authorization.from === from);
    const replayed = this.flaw === "replay" && collected.length > 0 ? collected[this.pick % collected.length].nonce : undefined;
    const nonce = replayed ?? keccak256(toHex(`x402 authorization ${model.callCounter++}`));
    const pendingCallIds = [...model.x402Pending.keys()];
    const takenCallId =
      this.flaw === "pendingCallId" && pendingCallIds.length > 0 ? pendingCallIds[this.pick % pendingCallIds.length] : undefined;
    const payment: X402Payment = {
      from,
      value: this.value,
      validAfter: 0n,
      // validBefore is exclusive: an authorization valid before the transaction's own block time has expired.
      validBefore: this.flaw === "expired" ? txTimeSec : txTimeSec + DAY_SEC,
      nonce,
      seller: real.earners[this.seller],
      platformFee: this.flaw === "feeTooHigh" ? this.value + 1n : feeOf(this.value),
      callId: takenCallId ?? keccak256(toHex(`x402 call ${model.callCounter++}`)),
    };
    const signature = await signX402Payment(payer, real.fx.usdc.address, real.fx.chainId, real.fx.escrow.address, payment);
    const wallet = model.wallets.get(from)!;
    // The escrow's own checks come first (fee, then the call id), then the token's in its order: window, nonce, funds.
    const expected: Expected =
      payment.platformFee > payment.value
        ? { ok: false, errorName: "EscrowFeeExceedsAmount", args: [payment.platformFee, payment.value] }
        : takenCallId
          ? { ok: false, errorName: "EscrowX402PaymentExists", args: [takenCallId] }
          : this.flaw === "expired"
            ? { ok: false, errorName: "ERC3009InvalidAuthorizationTime", args: [payment.validAfter, payment.validBefore] }
            : replayed
              ? { ok: false, errorName: "ERC3009UsedAuthorization", args: [from, nonce] }
              : payment.value > wallet
                ? { ok: false, errorName: "ERC20InsufficientBalance", args: [from, wallet, payment.value] }
                : { ok: true };
    const settler = real.escrowAs.get(real.fx.settler.account.address)!;
    await send("x402Collect", model, real, () => settler.write.collectX402([payment, signature]), expected);
    if (!expected.ok) return;
    model.x402Authorizations.push({ from, nonce });
    model.add(model.wallets, from, -payment.value);
    model.x402Pending.set(payment.callId, {
      payer: from,
      seller: payment.seller,
      value: payment.value,
      platformFee: payment.platformFee,
      reclaimableAt: model.nowSec + X402_RECLAIM_DELAY_SEC,
    });
  }
  toString = () =>
    `x402Collect(user ${this.user} -> seller ${this.seller}: ${this.value}, ${this.flaw}${this.flaw === "replay" || this.flaw === "pendingCallId" ? ` pick ${this.pick}` : ""})`;
}

type X402Ending = "complete" | "refund" | "reclaim";

const samePending = (a: X402Pending, b: X402Pending) =>
  a.payer === b.payer &&
  a.seller === b.seller &&
  a.value === b.value &&
  a.platformFee === b.platformFee &&
  a.reclaimableAt === b.reclaimableAt;

/**
 * Ends an x402 payment: the settler completes it (the call succeeded: seller and treasury credited) or refunds it
 * (the call failed: the payer's wallet gets the value back), or anyone (`caller`) reclaims it for the payer, which
 * fails before its reclaimableAt. `pick` chooses among the pending payments. Flaws: one field changed from what
 * was collected (`pick` chooses which), a payment that already ended. With nothing to pick, a call id that was
 * never collected.
 */
class EndX402Command implements fc.AsyncCommand<EscrowModel, Real> {
  described = "";
  constructor(
    readonly ending: X402Ending,
    readonly pick: number,
    readonly flaw: "none" | "tampered" | "ended",
    readonly caller: number,
  ) {}
  check = () => true;
  async run(model: EscrowModel, real: Real) {
    const pendingCallIds = [...model.x402Pending.keys()];
    let target: { callId: Hex; pending: X402Pending };
    if (this.flaw === "ended" && model.x402Ended.length > 0) {
      target = model.x402Ended[this.pick % model.x402Ended.length];
    } else if (pendingCallIds.length > 0) {
      const callId = pendingCallIds[this.pick % pendingCallIds.length];
      const pending = model.x402Pending.get(callId)!;
      target = { callId, pending: this.flaw === "tampered" ? this.tamper(pending, real) : pending };
    } else {
      const never: X402Pending = { payer: real.users[0], seller: real.earners[0], value: 1n, platformFee: 0n, reclaimableAt: 0n };
      target = { callId: keccak256(toHex(`x402 call never collected ${model.callCounter++}`)), pending: never };
    }
    const { callId, pending } = target;
    const committed = model.x402Pending.get(callId);
    const txTimeSec = model.nowSec + 1n;
    const expected: Expected =
      !committed || !samePending(committed, pending)
        ? { ok: false, errorName: "EscrowX402PaymentNotPending", args: [callId] }
        : this.ending === "reclaim" && txTimeSec < pending.reclaimableAt
          ? { ok: false, errorName: "EscrowX402NotReclaimable", args: [callId, pending.reclaimableAt, txTimeSec] }
          : { ok: true };
    const callers = [...real.users, ...real.earners];
    const caller = this.ending === "reclaim" ? callers[this.caller % callers.length] : real.fx.settler.account.address;
    this.described = `${callId.slice(0, 10)} by ${caller.slice(0, 8)}`;
    const contract = real.escrowAs.get(caller)!;
    const name = `x402${this.ending[0].toUpperCase()}${this.ending.slice(1)}`;
    await send(name, model, real, () => contract.write[`${this.ending}X402`]([callId, pending]), expected);
    if (!expected.ok) return;
    if (this.ending === "complete") {
      if (txTimeSec >= pending.reclaimableAt) outcomeCounts.set("x402Complete:late", (outcomeCounts.get("x402Complete:late") ?? 0) + 1);
      model.add(model.earnings, pending.seller, pending.value - pending.platformFee);
      model.add(model.earnings, real.earners[real.earners.length - 1], pending.platformFee);
    } else {
      model.add(model.wallets, pending.payer, pending.value);
    }
    model.x402Pending.delete(callId);
    model.x402Ended.push({ callId, pending });
  }
  /** `pending` with one field changed, so that it no longer matches the commitment. */
  private tamper(pending: X402Pending, real: Real): X402Pending {
    const other = <T>(list: T[], current: T) => list[(list.indexOf(current) + 1) % list.length];
    switch (this.pick % 5) {
      case 0:
        return { ...pending, payer: other(real.users, pending.payer) };
      case 1:
        return { ...pending, seller: other(real.earners, pending.seller) };
      case 2:
        return { ...pending, value: pending.value + 1n };
      case 3:
        return { ...pending, platformFee: pending.platformFee === 0n ? 1n : pending.platformFee - 1n };
      default:
        return { ...pending, reclaimableAt: pending.reclaimableAt - 1n };
    }
  }
  toString = () => `x402${this.ending}(pick ${this.pick}, ${this.flaw}${this.described ? `: ${this.described}` : ""})`;
}

class ClaimCommand implements fc.AsyncCommand<EscrowModel, Real> {
  constructor(
    readonly earner: number,
    readonly toColdWallet: boolean,
  ) {}
  check = () => true;
  async run(model: EscrowModel, real: Real) {
    const account = real.earners[this.earner];
    const amount = model.earnings.get(account)!;
    const contract = real.escrowAs.get(account)!;
    const recipient = this.toColdWallet ? real.coldWallet : account;
    await send(
      "claim",
      model,
      real,
      () => (this.toColdWallet ? contract.write.claimTo([recipient]) : contract.write.claim()),
      amount === 0n ? { ok: false, errorName: "EscrowNothingToClaim", args: [account] } : { ok: true },
    );
    if (amount === 0n) return;
    model.earnings.set(account, 0n);
    model.add(model.wallets, recipient, amount);
  }
  toString = () => `claim(earner ${this.earner}${this.toColdWallet ? ", to cold wallet" : ""})`;
}

/**
 * Amounts that depend on the state (withdrawals, exits) are generated as a share of the current balance in
 * basis points; shares above 10_000 ask for more than the balance and must be refused.
 */
const shareOf = (balance: bigint, shareBps: bigint) => (balance * shareBps) / 10_000n;

class VoucherCommand implements fc.AsyncCommand<EscrowModel, Real> {
  amount = 0n;
  constructor(
    readonly user: number,
    readonly shareBps: bigint,
    readonly nonce: bigint,
    readonly flaw: "none" | "expired" | "forged",
  ) {}
  check = () => true;
  async run(model: EscrowModel, real: Real) {
    const account = real.users[this.user];
    const txTimeSec = model.nowSec + 1n;
    this.amount = shareOf(model.balances.get(account)!, this.shareBps);
    const voucher = {
      account,
      amount: this.amount,
      nonce: this.nonce,
      deadline: this.flaw === "expired" ? txTimeSec - 1n : txTimeSec + DAY_SEC,
    };
    const signer = this.flaw === "forged" ? real.fx.settler : real.fx.voucherSigner;
    const signature = await signVoucher(signer, real.fx.escrow.address, real.fx.chainId, voucher);
    const balance = model.balances.get(account)!;
    const nonceKey = `${account}:${this.nonce}`;
    const expected: Expected =
      this.flaw === "expired"
        ? { ok: false, errorName: "EscrowVoucherExpired", args: [voucher.deadline, txTimeSec] }
        : model.usedNonces.has(nonceKey)
          ? { ok: false, errorName: "EscrowVoucherNonceUsed", args: [account, this.nonce] }
          : this.flaw === "forged"
            ? { ok: false, errorName: "EscrowInvalidVoucherSigner", args: [signer.account.address] }
            : this.amount === 0n
              ? { ok: false, errorName: "EscrowZeroAmount" }
              : this.amount > balance
                ? { ok: false, errorName: "EscrowInsufficientBalance", args: [account, balance, this.amount] }
                : { ok: true };
    const contract = real.escrowAs.get(account)!;
    await send("voucher", model, real, () => contract.write.withdrawWithVoucher([voucher, signature]), expected);
    if (!expected.ok) return;
    model.usedNonces.add(nonceKey);
    model.add(model.balances, account, -this.amount);
    model.add(model.wallets, account, this.amount);
    model.add(model.withdrawn, account, this.amount);
  }
  toString = () => `voucher(user ${this.user}, ${this.shareBps} bps = ${this.amount}, nonce ${this.nonce}, ${this.flaw})`;
}

class RequestExitCommand implements fc.AsyncCommand<EscrowModel, Real> {
  amount = 0n;
  constructor(
    readonly user: number,
    readonly shareBps: bigint,
  ) {}
  check = () => true;
  async run(model: EscrowModel, real: Real) {
    const account = real.users[this.user];
    const balance = model.balances.get(account)!;
    this.amount = shareOf(balance, this.shareBps);
    const expected: Expected =
      this.amount === 0n
        ? { ok: false, errorName: "EscrowZeroAmount" }
        : this.amount > balance
          ? { ok: false, errorName: "EscrowInsufficientBalance", args: [account, balance, this.amount] }
          : { ok: true };
    await send("requestExit", model, real, () => real.escrowAs.get(account)!.write.requestExit([this.amount]), expected);
    if (expected.ok) model.exits.set(account, { amount: this.amount, readyAtSec: model.nowSec + DAY_SEC });
  }
  toString = () => `requestExit(user ${this.user}, ${this.shareBps} bps = ${this.amount})`;
}

/**
 * Completes an exit. `pick` prefers users with a pending exit (chosen from the model, so the run stays
 * deterministic); with none pending it picks any user, which must fail with EscrowNoPendingExit.
 */
class CompleteExitCommand implements fc.AsyncCommand<EscrowModel, Real> {
  user = -1;
  constructor(readonly pick: number) {}
  check = () => true;
  async run(model: EscrowModel, real: Real) {
    const pendingUsers = real.users.flatMap((account, index) => (model.exits.has(account) ? [index] : []));
    this.user = pendingUsers.length > 0 ? pendingUsers[this.pick % pendingUsers.length] : this.pick % real.users.length;
    const account = real.users[this.user];
    const pending = model.exits.get(account);
    const txTimeSec = model.nowSec + 1n;
    const expected: Expected = !pending
      ? { ok: false, errorName: "EscrowNoPendingExit", args: [account] }
      : txTimeSec < pending.readyAtSec
        ? { ok: false, errorName: "EscrowExitNotReady", args: [account, pending.readyAtSec, txTimeSec] }
        : { ok: true };
    await send("completeExit", model, real, () => real.escrowAs.get(account)!.write.completeExit(), expected);
    if (!expected.ok || !pending) return;
    const paid = min(pending.amount, model.balances.get(account)!);
    if (paid < pending.amount) {
      outcomeCounts.set("completeExit:paid-less", (outcomeCounts.get("completeExit:paid-less") ?? 0) + 1);
    }
    model.exits.delete(account);
    model.add(model.balances, account, -paid);
    model.add(model.wallets, account, paid);
    model.add(model.withdrawn, account, paid);
  }
  toString = () => `completeExit(pick ${this.pick} = user ${this.user})`;
}

class CancelExitCommand implements fc.AsyncCommand<EscrowModel, Real> {
  constructor(readonly user: number) {}
  check = () => true;
  async run(model: EscrowModel, real: Real) {
    const account = real.users[this.user];
    const pending = model.exits.get(account);
    await send(
      "cancelExit",
      model,
      real,
      () => real.escrowAs.get(account)!.write.cancelExit(),
      pending ? { ok: true } : { ok: false, errorName: "EscrowNoPendingExit", args: [account] },
    );
    model.exits.delete(account);
  }
  toString = () => `cancelExit(user ${this.user})`;
}

class AdvanceTimeCommand implements fc.AsyncCommand<EscrowModel, Real> {
  constructor(readonly seconds: bigint) {}
  check = () => true;
  async run(model: EscrowModel) {
    model.nowSec += this.seconds;
  }
  toString = () => `advanceTime(${this.seconds}s)`;
}

/** Runs a command, then checks the whole state against the model (so a failure names the step that broke it). */
class Checked implements fc.AsyncCommand<EscrowModel, Real> {
  constructor(readonly inner: fc.AsyncCommand<EscrowModel, Real>) {}
  check = () => true;
  async run(model: EscrowModel, real: Real) {
    await this.inner.run(model, real);
    await checkInvariants(model, real);
  }
  toString = () => this.inner.toString();
}

/** Arbitraries of every command, over `userCount` users and `sellerCount` sellers (+ the treasury). */
export function commandArbitraries(userCount: number, sellerCount: number): fc.Arbitrary<Checked>[] {
  const user = fc.nat({ max: userCount - 1 });
  const share = fc.oneof(
    { weight: 3, arbitrary: fc.bigInt({ min: 1n, max: 10_000n }) },
    // Everything: what a leaving user asks for, and what a later debit can cut short.
    { weight: 2, arbitrary: fc.constant(10_000n) },
    { weight: 1, arbitrary: fc.constantFrom(0n, 10_001n, 12_000n) },
  );
  const advance = fc
    .oneof(fc.bigInt({ min: 0n, max: 2n * 3600n }), fc.bigInt({ min: DAY_SEC - 3600n, max: DAY_SEC + 6n * 3600n }))
    .map((s) => new AdvanceTimeCommand(s));
  const seller = fc.nat({ max: sellerCount - 1 });
  // Mostly the spec's 0.001 to 0.50 USD per call, sometimes a large one that may overdraw.
  const priceMicros = fc.oneof(
    { weight: 9, arbitrary: fc.bigInt({ min: 1_000n, max: 500_000n }) },
    { weight: 1, arbitrary: fc.bigInt({ min: 1n, max: 60n * USDC }) },
  );
  const call = fc.record({ user, seller, priceMicros });
  const collectX402 = fc
    .tuple(
      user,
      seller,
      priceMicros,
      fc.oneof(
        { weight: 7, arbitrary: fc.constant("none" as const) },
        { weight: 1, arbitrary: fc.constant("replay" as const) },
        { weight: 1, arbitrary: fc.constant("expired" as const) },
        { weight: 1, arbitrary: fc.constant("feeTooHigh" as const) },
        { weight: 1, arbitrary: fc.constant("pendingCallId" as const) },
      ),
      fc.nat({ max: 7 }),
    )
    .map(([u, s, value, flaw, pick]) => new CollectX402Command(u, s, value, flaw, pick));
  const endX402 = fc
    .tuple(
      fc.oneof(
        { weight: 4, arbitrary: fc.constant("complete" as const) },
        { weight: 3, arbitrary: fc.constant("refund" as const) },
        { weight: 3, arbitrary: fc.constant("reclaim" as const) },
      ),
      fc.nat({ max: 7 }),
      fc.oneof(
        { weight: 8, arbitrary: fc.constant("none" as const) },
        { weight: 1, arbitrary: fc.constant("tampered" as const) },
        { weight: 1, arbitrary: fc.constant("ended" as const) },
      ),
      fc.nat({ max: userCount + sellerCount }),
    )
    .map(([ending, pick, flaw, caller]) => new EndX402Command(ending, pick, flaw, caller));
  const deposit = fc
    .tuple(
      user,
      fc.oneof(
        { weight: 9, arbitrary: fc.bigInt({ min: USDC, max: 60n * USDC }) },
        { weight: 1, arbitrary: fc.bigInt({ min: 0n, max: USDC }) },
      ),
    )
    .map(([u, a]) => new DepositCommand(u, a));
  const settle = fc
    .tuple(
      fc.array(call, { minLength: 1, maxLength: 8 }),
      fc.oneof({ weight: 19, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }),
    )
    .map(([calls, replay]) => new SettleCommand(calls, replay));
  const flaw = fc.oneof(
    { weight: 8, arbitrary: fc.constant("none" as const) },
    { weight: 1, arbitrary: fc.constant("expired" as const) },
    { weight: 1, arbitrary: fc.constant("forged" as const) },
  );
  // Entries listed twice are weighted up: money has to go in, calls have to be settled (x402 payments collected
  // and ended) and time has to pass for claims, exits and reclaims to have something to act on.
  return [
    deposit,
    deposit,
    settle,
    settle,
    collectX402,
    collectX402,
    endX402,
    endX402,
    fc.tuple(fc.nat({ max: sellerCount }), fc.boolean()).map(([e, cold]) => new ClaimCommand(e, cold)),
    fc.tuple(user, share, fc.bigInt({ min: 0n, max: 4n }), flaw).map(([u, s, n, f]) => new VoucherCommand(u, s, n, f)),
    fc.tuple(user, share).map(([u, s]) => new RequestExitCommand(u, s)),
    fc.nat({ max: 5 }).map((pick) => new CompleteExitCommand(pick)),
    user.map((u) => new CancelExitCommand(u)),
    advance,
    advance,
  ].map((arbitrary: fc.Arbitrary<fc.AsyncCommand<EscrowModel, Real>>) => arbitrary.map((command) => new Checked(command)));
}
