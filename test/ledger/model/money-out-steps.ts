import { expect } from "chai";
import type { StoredAddress } from "../../../server/settlement/addresses-store";
import { type ApplyExitEventReturnType, type ChainExitEvent, applyExitEvent } from "../../../server/settlement/exits";
import { rejectionOf } from "../../helpers/ledger";
import {
  ADDRESSES,
  type Model,
  type ModelExit,
  type Real,
  Step,
  balanceOf,
  giveBack,
  restore,
  snapshot,
  takeOut,
  topUpFreezes,
} from "./model";

/*
 * The steps that take money out of the ledger or put it back from the escrow's side: withdrawals by voucher
 * (issued, redeemed, returned unredeemed) and unilateral exits (requested, replaced, cancelled, completed,
 * and logs read twice). Vouchers are written as server/settlement/vouchers.ts writes them and exit logs go through
 * server/settlement/exits.ts, so the invariants that join those tables to the journal are checked too; the model
 * of what each one does is written out again in ./model.ts.
 */

/** The user's first address: where its vouchers are payable. */
function addressOf(userId: string): StoredAddress {
  return ADDRESSES.find((a) => a.accountId === userId)!.address;
}

/**
 * Issues a voucher as the vouchers module does: Ledger.withdrawByVoucher (which first tops short exits up, and
 * throws, undoing everything, when the available balance falls short) and the voucher row, in one operation.
 * `amount` is a number of micros or "all", the whole available balance as the model sees it.
 */
export class Withdraw extends Step {
  constructor(
    readonly userId: string,
    readonly amount: bigint | "all",
  ) {
    super();
  }
  protected async apply(model: Model, real: Real): Promise<void> {
    const saved = snapshot(model);
    topUpFreezes(model, this.userId);
    const availableMicros = balanceOf(model, `${this.userId}/available`);
    const amountMicros = this.amount === "all" ? availableMicros : this.amount;
    const address = addressOf(this.userId);
    const nonce = model.nextVoucherNonce;
    const issue = () =>
      real.db.transaction(async (tx) => {
        const entryId = await real.ledger.withdrawByVoucher(this.userId, amountMicros, { address, nonce }, "", tx);
        await tx.run(
          `INSERT INTO vouchers (address, nonce, account_id, amount, deadline, status, entry_id, created_at)
           VALUES (?, ?, ?, ?, 0, 'issued', ?, 0)`,
          [address, nonce, this.userId, amountMicros, entryId],
        );
      });
    const refusal =
      amountMicros <= 0n
        ? "withdrawal must be positive"
        : availableMicros < amountMicros
          ? `withdrawal of ${amountMicros} exceeds available ${availableMicros}`
          : undefined;
    if (refusal !== undefined) {
      restore(model, saved);
      const error = await rejectionOf(issue);
      expect(error).to.be.instanceOf(RangeError);
      expect(error.message).to.contain(refusal);
      return;
    }
    await issue();
    takeOut(model, this.userId, amountMicros);
    model.vouchers.push({ accountId: this.userId, address, nonce, amountMicros, status: "issued" });
    model.nextVoucherNonce++;
  }
  toString(): string {
    return `withdraw(${this.userId}, ${this.amount})`;
  }
}

/**
 * Settles one voucher, counted back from the newest, as the voucher sweep does: redeemed on-chain (nothing
 * moves), or expired unredeemed, whose amount Ledger.returnVoucher gives back (and which then tops short
 * exits up). A voucher already settled is left alone.
 */
export class SettleVoucher extends Step {
  constructor(
    readonly fate: "redeemed" | "returned",
    readonly fromNewest: number,
  ) {
    super();
  }
  protected async apply(model: Model, real: Real): Promise<void> {
    if (model.vouchers.length === 0) return;
    const voucher = model.vouchers[model.vouchers.length - 1 - (this.fromNewest % model.vouchers.length)];
    await real.db.transaction(async (tx) => {
      const changed = await tx.run("UPDATE vouchers SET status = ? WHERE address = ? AND nonce = ? AND status = 'issued'", [
        this.fate,
        voucher.address,
        voucher.nonce,
      ]);
      if (changed === 1 && this.fate === "returned") {
        const key = { address: voucher.address, nonce: voucher.nonce };
        await real.ledger.returnVoucher(voucher.accountId, voucher.amountMicros, key, "", tx);
      }
    });
    if (voucher.status !== "issued") return;
    voucher.status = this.fate;
    if (this.fate === "returned") {
      giveBack(model, voucher.accountId, voucher.amountMicros);
      topUpFreezes(model, voucher.accountId);
    }
  }
  toString(): string {
    return `voucher(newest - ${this.fromNewest}) ${this.fate}`;
  }
}

/** Ends a pending exit (exits.ts `close`): it keeps min(paid, frozen), gives the rest of its freeze back. */
function closeExit(model: Model, exit: ModelExit, status: "replaced" | "cancelled" | "completed", paidMicros: bigint | null): void {
  const keptMicros = paidMicros === null ? 0n : paidMicros < exit.frozenMicros ? paidMicros : exit.frozenMicros;
  const returnedMicros = exit.frozenMicros - keptMicros;
  exit.status = status;
  exit.frozenMicros = keptMicros;
  exit.shortfallMicros = 0n;
  exit.paidMicros = paidMicros;
  exit.uncoveredMicros = paidMicros === null ? 0n : paidMicros - keptMicros;
  // The row is closed first, so what comes back can only go to the account's other short exits.
  if (returnedMicros > 0n) {
    giveBack(model, exit.accountId!, returnedMicros);
    topUpFreezes(model, exit.accountId!);
  }
}

function pendingAt(model: Model, address: string): ModelExit | undefined {
  return model.exits.find((x) => x.address === address && x.status === "pending");
}

/** Where the next exit log sits on the chain: a block of its own, a log index that varies. */
function nextPosition(model: Model, logIndex: number) {
  const blockNumber = model.nextBlock++;
  return {
    txHash: `0x${blockNumber.toString(16).padStart(64, "0")}`,
    logIndex,
    blockNumber,
    blockHash: `0x${(blockNumber + 0xb10c_0000n).toString(16).padStart(64, "0")}`,
  };
}

/** What the model says applyExitEvent should answer, and the real answer, compared on what matters. */
function expectOutcome(result: ApplyExitEventReturnType, expected: "applied" | "conflict" | "duplicate"): void {
  expect(
    result.outcome,
    JSON.stringify(result, (_k, v) => (typeof v === "bigint" ? v.toString() : v)),
  ).to.equal(expected);
}

/**
 * An ExitRequested log: replaces the address's pending request, then freezes what available covers. The
 * amount is a number of micros, or relative to the account as the model sees it: "on_hand" (available plus
 * held: short by exactly what calls in flight hold, which their releases then freeze) or "beyond" (a million
 * more than that, so the exit stays short and takes every unit that reaches the account).
 */
export class RequestExit extends Step {
  constructor(
    readonly addressIndex: number,
    readonly amount: bigint | "on_hand" | "beyond",
    readonly logIndex: number,
  ) {
    super();
  }
  protected async apply(model: Model, real: Real): Promise<void> {
    const { address, accountId } = ADDRESSES[this.addressIndex];
    const onHandMicros = accountId === null ? 0n : balanceOf(model, `${accountId}/available`) + balanceOf(model, `${accountId}/held`);
    const wanted = this.amount === "on_hand" ? onHandMicros : this.amount === "beyond" ? onHandMicros + 1_000_000n : this.amount;
    // The escrow refuses an exit of nothing.
    const amountMicros = wanted > 0n ? wanted : 1n;
    const event: ChainExitEvent = { kind: "requested", ...nextPosition(model, this.logIndex), address, amountMicros, readyAtSec: 1_000n };
    const result = await applyExitEvent(real.ledger, event);
    expectOutcome(result, "applied");
    model.appliedLogs.push(event);

    const previous = pendingAt(model, address);
    if (previous) closeExit(model, previous, "replaced", null);
    const exit: ModelExit = {
      txHash: event.txHash,
      logIndex: event.logIndex,
      blockNumber: event.blockNumber,
      address,
      accountId,
      requestedMicros: amountMicros,
      status: "pending",
      frozenMicros: 0n,
      shortfallMicros: accountId === null ? 0n : amountMicros,
      paidMicros: null,
      uncoveredMicros: 0n,
    };
    model.exits.push(exit);
    if (accountId !== null) topUpFreezes(model, accountId);
    if (result.outcome === "applied") {
      expect(result.requested).to.deep.include({ accountId, address, requestedMicros: amountMicros, frozenMicros: exit.frozenMicros });
      expect(result.warning !== undefined, "a warning for an exit by an unlinked address").to.equal(accountId === null);
    }
  }
  toString(): string {
    return `requestExit(${ADDRESSES[this.addressIndex].address.slice(-2)}, ${this.amount}, log ${this.logIndex})`;
  }
}

/**
 * An ExitCancelled or ExitCompleted log for an address. It must name the pending request's amount; with
 * `wrongAmount`, or when nothing is pending, the ledger reports a conflict and changes nothing. `paid` (for a
 * completion) is "frozen", "requested", or per mille of the requested amount: the escrow pays
 * min(requested, its balance), which may be less or more than the ledger froze.
 */
export class CloseExit extends Step {
  constructor(
    readonly kind: "cancelled" | "completed",
    readonly addressIndex: number,
    readonly paid: "frozen" | "requested" | number,
    readonly wrongAmount: boolean,
  ) {
    super();
  }
  protected async apply(model: Model, real: Real): Promise<void> {
    const { address } = ADDRESSES[this.addressIndex];
    const pending = pendingAt(model, address);
    const requestedMicros = (pending?.requestedMicros ?? 1n) + (this.wrongAmount ? 1n : 0n);
    const paidMicros =
      this.paid === "frozen"
        ? (pending?.frozenMicros ?? 0n)
        : this.paid === "requested"
          ? requestedMicros
          : (requestedMicros * BigInt(this.paid)) / 1000n;
    const position = nextPosition(model, 0);
    const event: ChainExitEvent =
      this.kind === "cancelled"
        ? { kind: "cancelled", ...position, address, amountMicros: requestedMicros }
        : { kind: "completed", ...position, address, requestedMicros, paidMicros };
    const result = await applyExitEvent(real.ledger, event);
    if (!pending || this.wrongAmount) {
      expectOutcome(result, "conflict");
      return;
    }
    expectOutcome(result, "applied");
    model.appliedLogs.push(event);
    const beyondFreeze = this.kind === "completed" && paidMicros > pending.frozenMicros;
    closeExit(model, pending, this.kind, this.kind === "completed" ? paidMicros : null);
    expect(result.outcome === "applied" && result.warning !== undefined, "a warning for an exit paid beyond its freeze").to.equal(
      beyondFreeze,
    );
  }
  toString(): string {
    const paid = this.kind === "completed" ? `, paid ${typeof this.paid === "number" ? `${this.paid}‰` : this.paid}` : "";
    return `exit ${this.kind}(${ADDRESSES[this.addressIndex].address.slice(-2)}${paid}${this.wrongAmount ? ", wrong amount" : ""})`;
  }
}

/** An exit log read a second time (an RPC repeating it, a chunk re-read after a crash): nothing happens. */
export class ReplayExitLog extends Step {
  constructor(readonly fromNewest: number) {
    super();
  }
  protected async apply(model: Model, real: Real): Promise<void> {
    if (model.appliedLogs.length === 0) return;
    const event = model.appliedLogs[model.appliedLogs.length - 1 - (this.fromNewest % model.appliedLogs.length)];
    expectOutcome(await applyExitEvent(real.ledger, event), "duplicate");
  }
  toString(): string {
    return `replayExitLog(newest - ${this.fromNewest})`;
  }
}
