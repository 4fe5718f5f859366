import { expect } from "chai";
import type { FeeMode } from "../../../server/ledger/fees";
import { computeCharge } from "../../../server/ledger/fees";
import { DEV_CREDIT_SOURCE_ID, ESCROW_SOURCE_ID, Ledger, PLATFORM_ACCOUNT_ID, type CreditKind } from "../../../server/ledger/ledger";
import { constraintOf, rejectionOf } from "../../helpers/ledger";
import { type Model, type Real, Step, balanceOf, credit, move, releaseHold, topUpFreezes } from "./model";

/*
 * The steps of the call path and of the process around it: credits, holds, captures and releases,
 * commits, crash recovery and restarts.
 */

const SOURCE_OF: Record<CreditKind, string> = { dev_credit: DEV_CREDIT_SOURCE_ID, deposit: ESCROW_SOURCE_ID };

/**
 * A credit. A development credit tops short exit freezes up itself; a chain deposit is credited the way the
 * indexer does it (server/settlement/indexer.ts): the credit, then the top-up, in one operation.
 */
export class Credit extends Step {
  constructor(
    readonly userId: string,
    readonly amountMicros: bigint,
    readonly kind: CreditKind,
  ) {
    super();
  }
  protected async apply(model: Model, real: Real): Promise<void> {
    if (this.kind === "deposit") {
      await real.db.transaction(async (tx) => {
        await real.ledger.credit(this.userId, this.amountMicros, "deposit", "", tx);
        await real.ledger.topUpExitFreezes(this.userId, tx);
      });
    } else {
      await real.ledger.credit(this.userId, this.amountMicros, this.kind);
    }
    credit(model, this.userId, this.amountMicros, SOURCE_OF[this.kind]);
  }
  toString(): string {
    return `credit(${this.userId}, ${this.amountMicros}, ${this.kind})`;
  }
}

export class Hold extends Step {
  constructor(
    readonly userId: string,
    readonly sellerId: string,
    readonly priceMicros: bigint,
    readonly feeMode: FeeMode,
    readonly feeBps: bigint,
  ) {
    super();
  }
  protected async apply(model: Model, real: Real): Promise<void> {
    // The model's own fee formula, not computeCharge's.
    const feeMicros = (this.priceMicros * this.feeBps) / 10_000n;
    const chargedMicros = this.feeMode === "included" ? this.priceMicros : this.priceMicros + feeMicros;
    const sellerMicros = this.feeMode === "included" ? this.priceMicros - feeMicros : this.priceMicros;
    const input = {
      accountId: this.userId,
      sellerAccountId: this.sellerId,
      skillId: "skill:prop",
      charge: computeCharge(this.priceMicros, this.feeMode, this.feeBps),
    };
    if (chargedMicros === 0n) {
      const error = await rejectionOf(real.ledger.hold(input));
      expect(error).to.be.instanceOf(RangeError);
      expect(error.message).to.contain("hold must be positive");
      return;
    }
    // A hold first gives a short exit what it can (normally nothing: a short account has nothing available).
    topUpFreezes(model, this.userId);
    const availableMicros = balanceOf(model, `${this.userId}/available`);
    const result = await real.ledger.hold(input);
    if (availableMicros < chargedMicros) {
      expect(result).to.deep.equal({ ok: false, reason: "insufficient_balance", availableMicros, neededMicros: chargedMicros });
      return;
    }
    if (!result.ok) expect.fail(`hold refused with ${result.reason} although ${availableMicros} >= ${chargedMicros}`);
    expect(result.hold).to.deep.include({
      accountId: this.userId,
      sellerAccountId: this.sellerId,
      amountMicros: chargedMicros,
      sellerMicros,
      feeMicros,
    });
    real.holdIds.push(result.hold.id);
    model.holds.push({
      userId: this.userId,
      sellerId: this.sellerId,
      chargedMicros,
      sellerMicros,
      feeMicros,
      status: "open",
      priceMicros: this.priceMicros,
      feeMode: this.feeMode,
      feeBps: this.feeBps,
    });
    move(model, `${this.userId}/available`, -chargedMicros);
    move(model, `${this.userId}/held`, chargedMicros);
  }
  toString(): string {
    return `hold(${this.userId} -> ${this.sellerId}, ${this.priceMicros}, ${this.feeMode}, ${this.feeBps} bps)`;
  }
}

/** A hold for a seller the ledger does not know: refused for lack of money, or thrown back, and nothing written. */
export class HoldForUnknownSeller extends Step {
  constructor(
    readonly userId: string,
    readonly priceMicros: bigint,
  ) {
    super();
  }
  protected async apply(model: Model, real: Real): Promise<void> {
    const input = {
      accountId: this.userId,
      sellerAccountId: "seller:ghost",
      skillId: "skill:prop",
      charge: computeCharge(this.priceMicros, "included", 1000n),
    };
    const availableMicros = balanceOf(model, `${this.userId}/available`);
    if (availableMicros < this.priceMicros) {
      expect(await real.ledger.hold(input)).to.deep.include({ ok: false, availableMicros, neededMicros: this.priceMicros });
    } else {
      const error = await rejectionOf(real.ledger.hold(input));
      expect(constraintOf(error), error.message).to.equal("foreign_key");
    }
  }
  toString(): string {
    return `holdForUnknownSeller(${this.userId}, ${this.priceMicros})`;
  }
}

/** Captures or releases one of the holds taken so far, counted back from the newest: often one already settled. */
export class Settle extends Step {
  constructor(
    readonly action: "capture" | "release",
    readonly fromNewest: number,
  ) {
    super();
  }
  protected async apply(model: Model, real: Real): Promise<void> {
    if (model.holds.length === 0) {
      expect(await real.ledger[this.action]("hold:none")).to.deep.equal({ ok: false, reason: "hold_not_open" });
      return;
    }
    const index = model.holds.length - 1 - (this.fromNewest % model.holds.length);
    const hold = model.holds[index];
    const result = await real.ledger[this.action](real.holdIds[index]);
    if (hold.status !== "open") {
      expect(result).to.deep.equal({ ok: false, reason: "hold_not_open" });
      return;
    }
    expect(result).to.deep.include({ ok: true });
    if (this.action === "capture") {
      // Spent for good: a capture never feeds a freeze.
      move(model, `${hold.userId}/held`, -hold.chargedMicros);
      move(model, `${hold.sellerId}/earned`, hold.sellerMicros);
      move(model, `${PLATFORM_ACCOUNT_ID}/fees`, hold.feeMicros);
      hold.status = "captured";
    } else {
      releaseHold(model, hold);
    }
  }
  toString(): string {
    return `${this.action}(newest - ${this.fromNewest})`;
  }
}

/**
 * A usage-priced call's capture (issue 27): what the backend reported, `perMille` thousandths of the hold's price (the
 * skill's max_price), split on the hold's fee terms. The rest of the hold goes back to available (and from there to a
 * short freeze); a report of 0 releases the hold.
 */
export class CaptureUsage extends Step {
  constructor(
    readonly fromNewest: number,
    readonly perMille: bigint,
  ) {
    super();
  }
  protected async apply(model: Model, real: Real): Promise<void> {
    if (model.holds.length === 0) return;
    const index = model.holds.length - 1 - (this.fromNewest % model.holds.length);
    const hold = model.holds[index];
    // The model's own split, as Hold's.
    const reportedMicros = (hold.priceMicros * this.perMille) / 1000n;
    const feeMicros = (reportedMicros * hold.feeBps) / 10_000n;
    const chargedMicros = hold.feeMode === "included" ? reportedMicros : reportedMicros + feeMicros;
    const sellerMicros = hold.feeMode === "included" ? reportedMicros - feeMicros : reportedMicros;
    const result = await real.ledger.capture(real.holdIds[index], undefined, computeCharge(reportedMicros, hold.feeMode, hold.feeBps));
    if (hold.status !== "open") {
      expect(result).to.deep.equal({ ok: false, reason: "hold_not_open" });
      return;
    }
    expect(result).to.deep.include({ ok: true });
    if (chargedMicros === 0n) {
      releaseHold(model, hold);
      return;
    }
    expect(result.ok && result.hold).to.deep.include({ amountMicros: chargedMicros, sellerMicros, feeMicros });
    move(model, `${hold.userId}/held`, -hold.chargedMicros);
    move(model, `${hold.userId}/available`, hold.chargedMicros - chargedMicros);
    move(model, `${hold.sellerId}/earned`, sellerMicros);
    move(model, `${PLATFORM_ACCOUNT_ID}/fees`, feeMicros);
    Object.assign(hold, { chargedMicros, sellerMicros, feeMicros, status: "captured" });
    topUpFreezes(model, hold.userId);
  }
  toString(): string {
    return `captureUsage(newest - ${this.fromNewest}, ${this.perMille}/1000 of the price)`;
  }
}

export class Flush extends Step {
  protected async apply(_model: Model, real: Real): Promise<void> {
    await real.flush();
  }
  toString(): string {
    return "flush()";
  }
}

/**
 * PostgreSQL's balance roll-up (server/ledger/balance-roll-up.ts): the deltas captures left pending folded into their
 * rows. Balances as read do not change (the check after every step reads them with the deltas); on SQLite, nothing.
 */
export class RollUp extends Step {
  protected async apply(_model: Model, real: Real): Promise<void> {
    await real.ledger.rollUp.once();
  }
  toString(): string {
    return "rollUp.once()";
  }
}

/** What startup does after a crash: every open hold is released (and feeds its account's short freezes). */
export class Recover extends Step {
  protected async apply(model: Model, real: Real): Promise<void> {
    const open = model.holds.filter((h) => h.status === "open");
    expect(await real.ledger.recoverOpenHolds()).to.equal(open.length);
    for (const hold of open) releaseHold(model, hold);
  }
  toString(): string {
    return "recoverOpenHolds()";
  }
}

/**
 * A restart: what is open is committed, a new process opens the same tables (a new group commit on SQLite, a
 * new pool on PostgreSQL) with a new Ledger, and startup recovery runs. The new ledger knows whether an exit
 * can be short only from the database (its exitShortfallPossible starts from the chain_exits rows), so a
 * release after a restart must still feed a freeze opened before it.
 */
export class Restart extends Step {
  protected async apply(model: Model, real: Real): Promise<void> {
    await real.flush();
    real.db = await real.reopen();
    real.ledger = await Ledger.open(real.db);
    const open = model.holds.filter((h) => h.status === "open");
    expect(await real.ledger.recoverOpenHolds()).to.equal(open.length);
    for (const id of new Set(model.exits.filter((x) => x.status === "pending" && x.shortfallMicros > 0n).map((x) => x.accountId!))) {
      topUpFreezes(model, id);
    }
    for (const hold of open) releaseHold(model, hold);
  }
  toString(): string {
    return "restart()";
  }
}
