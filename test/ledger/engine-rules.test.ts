import { expect } from "chai";
import fs from "node:fs";
import path from "node:path";
import { openDatabase } from "../../server/db/db";
import { GroupCommit } from "../../server/db/group-commit";
import { PostgresDatabase } from "../../server/db/postgres/database";
import { POSTGRES_MIGRATIONS_DIR } from "../../server/db/postgres/migrate";
import { createPostgresPool } from "../../server/db/postgres/pool";
import type { Database } from "../../server/db/sql";
import { SqliteDatabase } from "../../server/db/sqlite-database";
import { assertBalanced } from "../../server/ledger/invariants";
import { Ledger, PLATFORM_ACCOUNT_ID } from "../../server/ledger/ledger";
import { type SpendPeriod, SpendLimits } from "../../server/ledger/spend-limits";
import { SCHEMA } from "../../server/schema";
import { freshPostgresDatabase, onSharedPostgres } from "../helpers/engines";
import { buildCharge } from "../helpers/ledger";
import { Rng } from "../helpers/random";

/*
 * The hold and the capture have two implementations: server/ledger/ledger.ts's statements (SQLite) and the
 * server-side functions ledger_hold and ledger_capture (PostgreSQL, migrations 0013 and 0016), which keep the buyer's
 * balance row locked for one statement instead of a transaction's round trips; and PostgreSQL's balances take a
 * capture's postings as pending deltas, folded into the rows later (postings_move_balance, ledger_roll_up: 0016). One definition of each rule is kept by
 * checking the two against each other: the same seeded walk of credits, key limits, holds, captures, releases and
 * clock moves runs on both engines, and what each step answers (outcomes, the refusals' numbers, the budgets a
 * capture reports) and every balance and key count after it must be the same. The second test shows the check
 * catching a difference: each function is replaced by a copy with one rule changed, and the walk must then differ.
 */

const USD = 1_000_000n;
const DAY_MS = 86_400_000;
const T0 = Date.UTC(2026, 0, 30, 12);
const USER = "user:walker";
const SELLER = "seller:walk";
const KEYS = ["key:a", "key:b", "key:c"];
const STEPS = 160;

/** One step's answer and the books after it, as text (ids left out: each engine draws its own). */
type Transcript = string[];

const show = (value: unknown) => JSON.stringify(value, (_k, v) => (typeof v === "bigint" ? `${v}` : v));

/** The seeded walk on `db`; returns what each step answered and the books after it. */
async function walk(db: Database, seed: number): Promise<Transcript> {
  const ledger = await Ledger.open(db);
  const limits = new SpendLimits(db);
  await ledger.ensureAccount({ id: USER, kind: "user", name: "walker" });
  await ledger.ensureAccount({ id: SELLER, kind: "seller", name: "seller" });
  const rng = new Rng(seed);
  const open: string[] = [];
  const out: Transcript = [];
  let nowMs = T0;
  for (let step = 0; step < STEPS; step++) {
    const kind = rng.weighted<string>([
      ["credit", 2],
      ["limit", 1],
      ["hold", 8],
      ["capture", 4],
      ["release", 2],
      ["clock", 3],
      ["roll-up", 2],
    ]);
    let answer: unknown;
    switch (kind) {
      case "credit":
        await ledger.credit(USER, BigInt(rng.int(1, 6)) * USD, "dev_credit");
        answer = "credited";
        break;
      case "limit": {
        const key = rng.pick(KEYS);
        const limit = rng.chance(0.2)
          ? null
          : { limitMicros: BigInt(rng.int(1, 8)) * USD, period: rng.pick<SpendPeriod>(["day", "month", "total"]) };
        await limits.set(key, limit, nowMs);
        answer = { key, limit };
        break;
      }
      case "hold": {
        // Whole dollars, so that a hold often reaches a limit or a balance exactly.
        const charge = buildCharge({ priceMicros: BigInt(rng.int(1, 3)) * USD, feeBps: BigInt(rng.pick([0, 1000, 10_000])) });
        const key = rng.chance(0.8) ? rng.pick(KEYS) : undefined;
        const held = await ledger.hold({ accountId: USER, sellerAccountId: SELLER, skillId: "skill:walk", charge, apiKeyId: key, nowMs });
        if (held.ok) open.push(held.hold.id);
        answer = held.ok ? { ok: true, amount: held.hold.amountMicros, fee: held.hold.feeMicros } : held;
        break;
      }
      case "capture":
      case "release": {
        if (open.length === 0) continue;
        const [holdId] = open.splice(rng.int(0, open.length - 1), 1);
        if (kind === "release") {
          answer = (await ledger.release(holdId)).ok;
        } else {
          const captured = await db.transaction((tx) => ledger.captureWithBudget(holdId, { apiKeyId: rng.pick(KEYS), nowMs }, tx), {
            durable: true,
            group: true,
          });
          answer = captured.ok ? captured.budget : captured;
        }
        break;
      }
      case "clock":
        nowMs += rng.pick([DAY_MS / 3, DAY_MS, 31 * DAY_MS]);
        answer = nowMs;
        break;
      case "roll-up":
        // PostgreSQL folds its pending deltas into the rows (how many depends on the engine: not part of the answer).
        await ledger.rollUp.once();
        answer = "rolled up";
        break;
    }
    const balances = await db.all(`SELECT account_id, bucket, balance FROM ${db.dialect.balances} ORDER BY account_id, bucket`);
    const counts = await limits.statuses(KEYS, nowMs);
    out.push(`${step} ${kind} ${show(answer)} | ${show(balances)} | ${show([...counts].sort(([a], [b]) => a.localeCompare(b)))}`);
  }
  await assertBalanced(db);
  expect(await ledger.balanceOf(PLATFORM_ACCOUNT_ID, "fees")).to.be.a("bigint");
  return out;
}

/** The first step where two transcripts differ, or undefined. */
function firstDifference(a: Transcript, b: Transcript): string | undefined {
  for (let i = 0; i < Math.max(a.length, b.length); i++) if (a[i] !== b[i]) return `sqlite: ${a[i]}\npostgres: ${b[i]}`;
  return undefined;
}

/** A server-side function as the newest migration defining it defines it, to be replaced by a changed copy. */
function functionSource(name: string): string {
  const files = fs
    .readdirSync(POSTGRES_MIGRATIONS_DIR)
    .filter((f) => f.endsWith(".sql"))
    .sort()
    .reverse();
  for (const f of files) {
    const file = fs.readFileSync(path.join(POSTGRES_MIGRATIONS_DIR, f), "utf8");
    const at = file.search(new RegExp(`CREATE (OR REPLACE )?FUNCTION ${name}\\(`));
    if (at < 0) continue;
    const end = file.indexOf("$$;", file.indexOf("$$", at) + 2) + 3;
    return file.slice(at, end).replace(/^CREATE FUNCTION/, "CREATE OR REPLACE FUNCTION");
  }
  throw new Error(`no migration defines the function ${name}`);
}

/** One rule changed in one function: the check must see the walk differ. */
const MUTANTS = [
  {
    name: "a hold refused when it reaches its key's limit exactly",
    fn: "ledger_hold",
    from: "IF v_spent > v_limit.limit_micros",
    to: "IF v_spent >= v_limit.limit_micros",
  },
  {
    name: "a key's count not started again in a new period",
    fn: "ledger_hold",
    from: "v_spent := 0;",
    to: "v_spent := v_limit.spent_micros;",
  },
  {
    name: "a balance allowed to cover a charge it equals only",
    fn: "ledger_hold",
    from: "IF v_available < p_amount",
    to: "IF v_available <= p_amount",
  },
  {
    name: "a capture's budget read from the held balance",
    fn: "ledger_capture",
    from: "la.bucket = 'available'),",
    to: "la.bucket = 'held'),",
  },
  {
    name: "a capture's pending delta recorded at twice its posting",
    fn: "postings_move_balance",
    from: "VALUES (NEW.id, NEW.account_id, NEW.bucket, NEW.amount);",
    to: "VALUES (NEW.id, NEW.account_id, NEW.bucket, 2 * NEW.amount);",
  },
  {
    name: "a capture's payment out of held moving the row at once but also left pending",
    fn: "postings_move_balance",
    from: "  ELSE\n",
    to: "    UPDATE ledger_accounts SET balance = balance + NEW.amount WHERE account_id = NEW.account_id AND bucket = NEW.bucket;\n  ELSE\n",
  },
  {
    name: "a roll-up that adds the pending deltas to their rows and keeps them pending",
    fn: "ledger_roll_up",
    from: "DELETE FROM ledger_balance_deltas d WHERE d.posting_id = ANY (v_ids) RETURNING d.account_id, d.bucket, d.amount",
    to: "SELECT d.account_id, d.bucket, d.amount FROM ledger_balance_deltas d WHERE d.posting_id = ANY (v_ids)",
  },
];

describe("the ledger's rules on SQLite (TypeScript) and on PostgreSQL (server-side functions)", function () {
  this.timeout(300_000);
  const opened = onSharedPostgres();

  const sqlite = () => {
    const connection = openDatabase(":memory:", SCHEMA);
    const db = new SqliteDatabase(connection, new GroupCommit(connection));
    opened.push(db);
    return db;
  };
  const postgres = async () => {
    const db = new PostgresDatabase(createPostgresPool({ url: await freshPostgresDatabase(), max: 4 }));
    opened.push(db);
    return db;
  };

  for (const seed of [1, 2, 3]) {
    it(`answer every step of the same walk alike, and leave the same books (seed ${seed})`, async () => {
      const difference = firstDifference(await walk(sqlite(), seed), await walk(await postgres(), seed));
      expect(difference, difference).to.equal(undefined);
    });
  }

  for (const mutant of MUTANTS) {
    it(`catch a server-side function made to differ: ${mutant.name}`, async () => {
      const source = functionSource(mutant.fn);
      expect(source, `the rule to change is in ${mutant.fn}`).to.include(mutant.from);
      let caught: string | undefined;
      for (const seed of [1, 2, 3]) {
        const db = await postgres();
        await db.run(source.replace(mutant.from, mutant.to));
        try {
          caught = firstDifference(await walk(sqlite(), seed), await walk(db, seed));
        } catch (error) {
          // A difference the database refuses outright (a CHECK, the invariants) is caught as well.
          caught = `seed ${seed}: ${(error as Error).message}`;
        }
        if (caught) break;
      }
      expect(caught, "the changed rule went unnoticed").to.be.a("string");
    });
  }
});
