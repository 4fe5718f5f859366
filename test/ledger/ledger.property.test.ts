import { expect } from "chai";
import fc from "fast-check";
import type { FeeMode } from "../../server/config";
import type { Db } from "../../server/ledger/db";
import { computeCharge } from "../../server/ledger/fees";
import { assertBalanced } from "../../server/ledger/invariants";
import {
  DEV_CREDIT_SOURCE_ID,
  ESCROW_SOURCE_ID,
  PLATFORM_ACCOUNT_ID,
  type CreditKind,
  type Ledger,
} from "../../server/ledger/ledger";
import { allBalances, makeLedger } from "../helpers/ledger";

/*
 * A seeded random walk through the ledger, checked against a model after every step.
 *
 * The model is a map of balances and a list of holds, updated by hand-written arithmetic
 * (its own fee formula, not computeCharge). After each operation the ledger's balances
 * must equal the model's exactly and assertBalanced must pass. Batches end at random
 * points (maxOps 1..8, explicit flushes), so operations are checked both inside an open
 * batch and across commits.
 *
 * The seed is random unless LEDGER_SEED is set, and is printed in the test's title and in
 * any failure. A run is deterministic given its seed, so to replay a failure, shrinking
 * included, run:  LEDGER_SEED=<seed> npx mocha test/ledger/ledger.property.test.ts
 * LEDGER_RUNS sets how many sequences to try (100 by default).
 */

const USERS = ["user:ann", "user:ben", "user:cat"] as const;
// Ann also sells a skill, so she can be charged for her own call and earn from it.
const SELLERS = ["seller:acme", "seller:zeta", "user:ann"] as const;
const SOURCE_OF: Record<CreditKind, string> = { dev_credit: DEV_CREDIT_SOURCE_ID, deposit: ESCROW_SOURCE_ID };

interface ModelHold {
  userId: string;
  sellerId: string;
  chargedMicros: bigint;
  sellerMicros: bigint;
  feeMicros: bigint;
  status: "open" | "captured" | "released";
}

interface Model {
  /** Every (account, bucket) balance, keyed "account/bucket", as allBalances() reads them. */
  balances: Map<string, bigint>;
  holds: ModelHold[];
}

interface Real {
  db: Db;
  ledger: Ledger;
  /** The ledger's id for each of the model's holds, in the same order. */
  holdIds: string[];
}

function initialModel(): Model {
  const balances = new Map<string, bigint>();
  for (const id of [...USERS, ...SELLERS]) for (const bucket of ["available", "held", "earned"]) balances.set(`${id}/${bucket}`, 0n);
  balances.set(`${PLATFORM_ACCOUNT_ID}/fees`, 0n);
  balances.set(`${DEV_CREDIT_SOURCE_ID}/source`, 0n);
  balances.set(`${ESCROW_SOURCE_ID}/source`, 0n);
  return { balances, holds: [] };
}

function move(model: Model, key: string, deltaMicros: bigint): void {
  const current = model.balances.get(key);
  if (current === undefined) throw new Error(`model has no balance ${key}`);
  model.balances.set(key, current + deltaMicros);
}

/** The check run after every step: balances, hold statuses, invariants. */
function expectLedgerMatches(model: Model, real: Real): void {
  const actual = allBalances(real.db);
  const keys = [...new Set([...actual.keys(), ...model.balances.keys()])].sort();
  const mismatches = keys
    .filter((key) => actual.get(key) !== model.balances.get(key))
    .map((key) => `${key}: ledger ${actual.get(key)}, model ${model.balances.get(key)}`);
  expect(mismatches, "balances that differ from the model").to.deep.equal([]);
  const statuses = new Map(
    (real.db.prepare("SELECT id, status FROM holds").all() as { id: string; status: string }[]).map((r) => [r.id, r.status]),
  );
  expect(statuses.size).to.equal(model.holds.length);
  model.holds.forEach((hold, i) => expect(statuses.get(real.holdIds[i]), `hold #${i}`).to.equal(hold.status));
  assertBalanced(real.db);
}

abstract class Step implements fc.Command<Model, Real> {
  check(): boolean {
    return true;
  }
  run(model: Model, real: Real): void {
    this.apply(model, real);
    expectLedgerMatches(model, real);
  }
  protected abstract apply(model: Model, real: Real): void;
  abstract toString(): string;
}

class Credit extends Step {
  constructor(
    readonly userId: string,
    readonly amountMicros: bigint,
    readonly kind: CreditKind,
  ) {
    super();
  }
  protected apply(model: Model, real: Real): void {
    real.ledger.credit(this.userId, this.amountMicros, this.kind);
    move(model, `${SOURCE_OF[this.kind]}/source`, -this.amountMicros);
    move(model, `${this.userId}/available`, this.amountMicros);
  }
  toString(): string {
    return `credit(${this.userId}, ${this.amountMicros}, ${this.kind})`;
  }
}

class Hold extends Step {
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
    const availableMicros = model.balances.get(`${this.userId}/available`)!;
    const result = real.ledger.hold(input);
    if (availableMicros < chargedMicros) {
      expect(result).to.deep.equal({ ok: false, reason: "insufficient_balance", availableMicros, neededMicros: chargedMicros });
      return;
    }
    if (!result.ok) expect.fail(`hold refused with ${result.reason} although ${availableMicros} >= ${chargedMicros}`);
    expect(result.hold).to.deep.include({ accountId: this.userId, sellerAccountId: this.sellerId, amountMicros: chargedMicros, sellerMicros, feeMicros });
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
class HoldForUnknownSeller extends Step {
  constructor(
    readonly userId: string,
    readonly priceMicros: bigint,
  ) {
    super();
  }
  protected apply(model: Model, real: Real): void {
    const input = { accountId: this.userId, sellerAccountId: "seller:ghost", skillId: "skill:prop", charge: computeCharge(this.priceMicros, "included", 1000n) };
    const availableMicros = model.balances.get(`${this.userId}/available`)!;
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
class Settle extends Step {
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
    move(model, `${hold.userId}/held`, -hold.chargedMicros);
    if (this.action === "capture") {
      move(model, `${hold.sellerId}/earned`, hold.sellerMicros);
      move(model, `${PLATFORM_ACCOUNT_ID}/fees`, hold.feeMicros);
      hold.status = "captured";
    } else {
      move(model, `${hold.userId}/available`, hold.chargedMicros);
      hold.status = "released";
    }
  }
  toString(): string {
    return `${this.action}(newest - ${this.fromNewest})`;
  }
}

class Flush extends Step {
  protected apply(_model: Model, real: Real): void {
    real.ledger.commit.flush();
    expect(real.db.inTransaction).to.equal(false);
  }
  toString(): string {
    return "flush()";
  }
}

/** What startup does after a crash: every open hold is released. */
class Recover extends Step {
  protected apply(model: Model, real: Real): void {
    const open = model.holds.filter((h) => h.status === "open");
    expect(real.ledger.recoverOpenHolds()).to.equal(open.length);
    for (const hold of open) {
      move(model, `${hold.userId}/held`, -hold.chargedMicros);
      move(model, `${hold.userId}/available`, hold.chargedMicros);
      hold.status = "released";
    }
  }
  toString(): string {
    return "recoverOpenHolds()";
  }
}

const user = fc.constantFrom(...USERS);
const price = fc.oneof(
  { arbitrary: fc.bigInt({ min: 1n, max: 3_000_000n }), weight: 8 },
  { arbitrary: fc.constantFrom(0n, 1n, 9n, 10n, 19n), weight: 2 },
);
// Repeating an arbitrary in the list weights it: fc.commands picks among them uniformly.
const steps = [
  ...Array.from({ length: 2 }, () =>
    fc
      .tuple(user, fc.bigInt({ min: 1n, max: 10_000_000n }), fc.constantFrom<CreditKind>("dev_credit", "deposit"))
      .map(([u, amount, kind]) => new Credit(u, amount, kind)),
  ),
  ...Array.from({ length: 4 }, () =>
    fc
      .tuple(
        user,
        fc.constantFrom(...SELLERS),
        price,
        fc.constantFrom<FeeMode>("included", "on_top"),
        fc.oneof(fc.constantFrom(0n, 1n, 1000n, 9999n, 10_000n), fc.bigInt({ min: 0n, max: 10_000n })),
      )
      .map(([u, seller, p, mode, bps]) => new Hold(u, seller, p, mode, bps)),
  ),
  fc.tuple(user, fc.bigInt({ min: 1n, max: 3_000_000n })).map(([u, p]) => new HoldForUnknownSeller(u, p)),
  ...Array.from({ length: 3 }, () => fc.nat({ max: 3 }).map((n) => new Settle("capture", n))),
  ...Array.from({ length: 2 }, () => fc.nat({ max: 3 }).map((n) => new Settle("release", n))),
  fc.constant(new Flush()),
  fc.constant(new Recover()),
];

function envInteger(name: string): number | undefined {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return undefined;
  if (!/^-?\d+$/.test(raw)) throw new Error(`${name} must be an integer, got "${raw}"`);
  return Number(raw);
}

const seed = envInteger("LEDGER_SEED") ?? ((Date.now() ^ Math.floor(Math.random() * 0x7fffffff)) | 0);
const numRuns = envInteger("LEDGER_RUNS") ?? 100;

describe("Ledger, against a model", () => {
  it(`keeps every balance equal to the model's and the books balanced after each step (seed ${seed})`, () => {
    const property = fc.property(
      fc.oneof(fc.integer({ min: 1, max: 8 }), fc.constant(512)),
      fc.commands(steps, { maxCommands: 60, size: "max" }),
      (maxOps, commands) => {
        const { db, ledger } = makeLedger({ maxOps });
        try {
          for (const id of USERS) ledger.ensureAccount({ id, kind: "user", name: id });
          for (const id of SELLERS) ledger.ensureAccount({ id, kind: "seller", name: id });
          fc.modelRun(() => ({ model: initialModel(), real: { db, ledger, holdIds: [] } }), commands);
        } finally {
          db.close();
        }
      },
    );
    const details = fc.check(property, { seed, numRuns });
    if (details.failed) {
      const replay = `LEDGER_SEED=${details.seed} npx mocha test/ledger/ledger.property.test.ts`;
      const cause = details.errorInstance instanceof Error ? details.errorInstance.message : String(details.errorInstance);
      throw new Error(`Replay with: ${replay}\n${fc.defaultReportMessage(details)}\nFailure: ${cause}`);
    }
  });
});
