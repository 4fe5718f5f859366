import { expect } from "chai";
import fc from "fast-check";
import { linkAddress } from "../../server/settlement/addresses";
import { GroupCommit } from "../../server/db/group-commit";
import type { Database } from "../../server/db/sql";
import { SqliteDatabase } from "../../server/db/sqlite-database";
import { PostgresDatabase } from "../../server/db/postgres/database";
import { createPostgresPool } from "../../server/db/postgres/pool";
import type { FeeMode } from "../../server/ledger/fees";
import type { CreditKind } from "../../server/ledger/ledger";
import { describeEachEngine, type Engine } from "../helpers/engines";
import { makeLedger, sqliteOf } from "../helpers/ledger";
import { CaptureUsage, Credit, Flush, Hold, HoldForUnknownSeller, Recover, Restart, RollUp, Settle } from "./model/call-steps";
import { ADDRESSES, type Real, SELLERS, USERS, initialModel } from "./model/model";
import { CloseExit, ReplayExitLog, RequestExit, SettleVoucher, Withdraw } from "./model/money-out-steps";
import { X402Payment } from "./model/x402-steps";

/*
 * A seeded random walk through the ledger, checked against a model after every step.
 *
 * The model (./model/) is a map of balances, a list of holds, vouchers and exits, updated by hand-written
 * arithmetic (its own fee formula, not computeCharge; its own exit freezes, not topUpExitFreezes). After
 * each operation the ledger's balances, holds, vouchers and chain_exits rows must equal the model's exactly
 * and assertBalanced must pass. The walk covers the call path (credit, hold, capture, release, recovery, and a
 * usage-priced call's capture of part of its hold),
 * the money going out (withdrawals by voucher, vouchers redeemed or returned) and unilateral exits
 * (requested, replaced, cancelled, completed for less, as much or more than was frozen, logs read twice),
 * with restarts of the ledger in between. It runs on both engines, the same sequences on each (same seed).
 * On SQLite, batches end at random points (maxOps 1..8, explicit flushes), so operations are checked both
 * inside an open batch and across commits; on PostgreSQL every transaction commits, and a restart is a new
 * pool on the same database.
 *
 * The seed is random unless LEDGER_SEED is set, and is printed in the test's title and in
 * any failure. A run is deterministic given its seed, so to replay a failure, shrinking
 * included, run (the failure prints this line with its seed and engine):
 *   LEDGER_SEED=<seed> npx mocha --no-config -r ts-node/register/transpile-only --extension ts --exit --grep "(sqlite)" test/ledger/ledger.property.test.ts
 * LEDGER_RUNS sets how many sequences to try on each engine (50 on SQLite and 5 on PostgreSQL by default; with it
 * set, no mocha timeout). A PostgreSQL sequence costs some ten to twenty SQLite ones (a database of its own, and every
 * check after every step a round trip: the invariants alone are 25 queries), so npm test runs a few, each
 * of up to 100 steps of every kind, and `npm run test:property` runs 500 on each engine.
 */

const user = fc.constantFrom(...USERS);
const price = fc.oneof(
  { arbitrary: fc.bigInt({ min: 1n, max: 3_000_000n }), weight: 8 },
  { arbitrary: fc.constantFrom(0n, 1n, 9n, 10n, 19n), weight: 2 },
);
// Repeating an arbitrary in the list weights it: fc.commands picks among them uniformly. Credits and holds
// are frequent so that exits often meet money on hand and calls in flight (whose releases feed a freeze).
const steps = [
  ...Array.from({ length: 4 }, () =>
    fc
      .tuple(user, fc.bigInt({ min: 1n, max: 10_000_000n }), fc.constantFrom<CreditKind>("dev_credit", "deposit"))
      .map(([u, amount, kind]) => new Credit(u, amount, kind)),
  ),
  ...Array.from({ length: 5 }, () =>
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
  ...Array.from({ length: 2 }, () => fc.nat({ max: 3 }).map((n) => new Settle("capture", n))),
  ...Array.from({ length: 2 }, () => fc.nat({ max: 3 }).map((n) => new Settle("release", n))),
  // A usage-priced call's capture: none of the hold, all of it, or any part between.
  ...Array.from({ length: 2 }, () =>
    fc
      .tuple(fc.nat({ max: 3 }), fc.oneof(fc.constantFrom(0n, 1n, 999n, 1000n), fc.bigInt({ min: 0n, max: 1000n })))
      .map(([n, perMille]) => new CaptureUsage(n, perMille)),
  ),
  fc
    .tuple(fc.constantFrom(...SELLERS), fc.bigInt({ min: 1n, max: 3_000_000n }), fc.constantFrom(0n, 1000n, 10_000n), fc.boolean())
    .map(([seller, p, bps, reuse]) => new X402Payment(seller, p, bps, reuse)),
  fc.constant(new Flush()),
  fc.constant(new RollUp()),
  fc.constant(new Recover()),
  fc.constant(new Restart()),
  fc
    .tuple(
      user,
      fc.oneof({ arbitrary: fc.bigInt({ min: -1n, max: 6_000_000n }), weight: 3 }, { arbitrary: fc.constant("all" as const), weight: 1 }),
    )
    .map(([u, amount]) => new Withdraw(u, amount)),
  fc.tuple(fc.constantFrom("redeemed" as const, "returned" as const), fc.nat({ max: 3 })).map(([fate, n]) => new SettleVoucher(fate, n)),
  ...Array.from({ length: 2 }, () =>
    fc
      .tuple(
        fc.nat({ max: ADDRESSES.length - 1 }),
        fc.oneof(fc.bigInt({ min: 1n, max: 12_000_000n }), fc.constantFrom<bigint | "on_hand" | "beyond">(1n, "on_hand", "beyond")),
        fc.nat({ max: 2 }),
      )
      .map(([a, amount, log]) => new RequestExit(a, amount, log)),
  ),
  ...Array.from({ length: 2 }, () =>
    fc
      .tuple(
        fc.constantFrom("cancelled" as const, "completed" as const, "completed" as const),
        fc.nat({ max: ADDRESSES.length - 1 }),
        fc.oneof(fc.constantFrom("frozen" as const, "requested" as const, 0), fc.integer({ min: 0, max: 1000 })),
        fc.oneof({ arbitrary: fc.constant(false), weight: 9 }, { arbitrary: fc.constant(true), weight: 1 }),
      )
      .map(([kind, a, paid, wrong]) => new CloseExit(kind, a, paid, wrong)),
  ),
  fc.nat({ max: 3 }).map((n) => new ReplayExitLog(n)),
];

function envInteger(name: string): number | undefined {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return undefined;
  if (!/^-?\d+$/.test(raw)) throw new Error(`${name} must be an integer, got "${raw}"`);
  return Number(raw);
}

const seed = envInteger("LEDGER_SEED") ?? (Date.now() ^ Math.floor(Math.random() * 0x7fffffff)) | 0;
const requestedRuns = envInteger("LEDGER_RUNS");
const DEFAULT_RUNS = { sqlite: 50, postgres: 5 } as const;
// The project's .mocharc adds its whole spec to any file named on the command line, so a replay names none.
const MOCHA_ONE_FILE = "npx mocha --no-config -r ts-node/register/transpile-only --extension ts --exit";

/**
 * The real side of one sequence: a fresh ledger on `engine`, the model's accounts and addresses, and what a
 * flush and a restart mean on that engine. The caller closes `handles` when the sequence ends.
 */
async function openReal(engine: Engine, maxOps: number): Promise<{ real: Real; handles: Database[] }> {
  const { db, ledger } = await makeLedger(engine, { maxOps });
  const handles: Database[] = [db];
  for (const id of USERS) await ledger.ensureAccount({ id, kind: "user", name: id });
  for (const id of SELLERS) await ledger.ensureAccount({ id, kind: "seller", name: id });
  for (const { address, accountId } of ADDRESSES) {
    if (accountId === null) continue;
    // linkAddress allows one address per account; Ann's second is written directly (see ADDRESSES).
    const linked = await linkAddress(ledger, { accountId, address });
    if (!linked.ok) await db.run("INSERT INTO account_addresses (address, account_id, created_at) VALUES (?, ?, 0)", [address, accountId]);
  }
  const url = engine.name === "postgres" ? engine.lastUrl() : "";
  const real: Real = {
    db,
    ledger,
    holdIds: [],
    flush:
      engine.name === "sqlite"
        ? async () => {
            const sqlite = sqliteOf(real.db);
            sqlite.commit.flush();
            expect(sqlite.db.inTransaction, "a batch left open after a flush").to.equal(false);
          }
        : () => real.db.durable(),
    reopen: async () => {
      let next: Database;
      if (engine.name === "sqlite") {
        // A new group commit on the same connection: a restarted process on the same file.
        const connection = sqliteOf(real.db).db;
        next = new SqliteDatabase(connection, new GroupCommit(connection, maxOps));
      } else {
        next = new PostgresDatabase(createPostgresPool({ url, max: 4 }));
      }
      handles.push(next);
      return next;
    },
  };
  return { real, handles };
}

describeEachEngine("Ledger, against a model", (engine) => {
  const numRuns = requestedRuns ?? DEFAULT_RUNS[engine.name];

  it(`keeps every balance equal to the model's and the books balanced after each step (seed ${seed})`, async function () {
    // A long run asked for by LEDGER_RUNS takes as long as it takes.
    this.timeout(requestedRuns !== undefined ? 0 : 600_000);
    const property = fc.asyncProperty(
      fc.oneof(fc.integer({ min: 1, max: 8 }), fc.constant(512)),
      fc.commands(steps, { maxCommands: 100, size: "max" }),
      async (maxOps, commands) => {
        const { real, handles } = await openReal(engine, maxOps);
        try {
          await fc.asyncModelRun(() => ({ model: initialModel(), real }), commands);
        } finally {
          // SQLite's handles share one connection: closing the first closes it.
          for (const handle of handles.reverse()) await handle.close().catch(() => {});
        }
      },
    );
    const details = await fc.check(property, { seed, numRuns });
    if (details.failed) {
      const replay = `LEDGER_SEED=${details.seed} ${MOCHA_ONE_FILE} --grep "(${engine.name})" test/ledger/ledger.property.test.ts`;
      const cause = details.errorInstance instanceof Error ? details.errorInstance.message : String(details.errorInstance);
      throw new Error(`Replay with: ${replay}\n${fc.defaultReportMessage(details)}\nFailure: ${cause}`);
    }
  });
});
