import { expect } from "chai";
import type { FeeMode } from "../../../server/ledger/fees";
import { computeCharge } from "../../../server/ledger/fees";
import { GroupCommit } from "../../../server/db/group-commit";
import { DEV_CREDIT_SOURCE_ID, ESCROW_SOURCE_ID, Ledger, PLATFORM_ACCOUNT_ID, type CreditKind } from "../../../server/ledger/ledger";
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
  protected apply(model: Model, real: Real): void {
    if (this.kind === "deposit") {
      real.ledger.commit.run(() => {
        real.ledger.credit(this.userId, this.amountMicros, "deposit");
        real.ledger.topUpExitFreezes(this.userId);
      });
    } else {
      real.ledger.credit(this.userId, this.amountMicros, this.kind);
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
  protected apply(model: Model, real: Real): void {
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
      expect(() => real.ledger.hold(input)).to.throw(RangeError, "hold must be positive");
      return;
    }
    // A hold first gives a short exit what it can (normally nothing: a short account has nothing available).
    topUpFreezes(model, this.userId);
    const availableMicros = balanceOf(model, `${this.userId}/available`);
    const result = real.ledger.hold(input);
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
    model.holds.push({ userId: this.userId, sellerId: this.sellerId, chargedMicros, sellerMicros, feeMicros, status: "open" });
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
  protected apply(model: Model, real: Real): void {
    const input = {
      accountId: this.userId,
      sellerAccountId: "seller:ghost",
      skillId: "skill:prop",
      charge: computeCharge(this.priceMicros, "included", 1000n),
    };
    const availableMicros = balanceOf(model, `${this.userId}/available`);
    if (availableMicros < this.priceMicros) {
      expect(real.ledger.hold(input)).to.deep.include({ ok: false, availableMicros, neededMicros: this.priceMicros });
    } else {
      expect(() => real.ledger.hold(input)).to.throw("FOREIGN KEY constraint failed");
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
  protected apply(model: Model, real: Real): void {
    if (model.holds.length === 0) {
      expect(real.ledger[this.action]("hold:none")).to.deep.equal({ ok: false, reason: "hold_not_open" });
      return;
    }
    const index = model.holds.length - 1 - (this.fromNewest % model.holds.length);
    const hold = model.holds[index];
    const result = real.ledger[this.action](real.holdIds[index]);
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

export class Flush extends Step {
  protected apply(_model: Model, real: Real): void {
    real.ledger.commit.flush();
    expect(real.db.inTransaction).to.equal(false);
  }
  toString(): string {
    return "flush()";
  }
}

/** What startup does after a crash: every open hold is released (and feeds its account's short freezes). */
export class Recover extends Step {
  protected apply(model: Model, real: Real): void {
    const open = model.holds.filter((h) => h.status === "open");
    expect(real.ledger.recoverOpenHolds()).to.equal(open.length);
    for (const hold of open) releaseHold(model, hold);
  }
  toString(): string {
    return "recoverOpenHolds()";
  }
}

/**
 * A restart: the batch is committed, a new Ledger (and group commit) opens the same database and startup
 * recovery runs. The new ledger knows whether an exit can be short only from the database (its
 * exitShortfallPossible starts from the chain_exits rows), so a release after a restart must still feed a
 * freeze opened before it.
 */
export class Restart extends Step {
  protected apply(model: Model, real: Real): void {
    real.ledger.commit.flush();
    real.ledger = new Ledger(real.db, new GroupCommit(real.db, real.maxOps));
    const open = model.holds.filter((h) => h.status === "open");
    expect(real.ledger.recoverOpenHolds()).to.equal(open.length);
    for (const id of new Set(model.exits.filter((x) => x.status === "pending" && x.shortfallMicros > 0n).map((x) => x.accountId!))) {
      topUpFreezes(model, id);
    }
    for (const hold of open) releaseHold(model, hold);
  }
  toString(): string {
    return "restart()";
  }
}
