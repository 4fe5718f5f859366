/**
 * Where a paid call's SQLite time goes, statement by statement (`npm run bench:sqlite-statements`): a real gateway on
 * a SQLite file (test/helpers/gateway.ts's stack), paid echo calls ten at a time, and every statement better-sqlite3
 * runs counted and timed on the event loop (its Statement and Database methods wrapped for the run). Prints the
 * statements a call, the µs a call spent in them, and the statements that cost most.
 *
 *   SQLITE_BENCH_CALLS (default 1000)  calls measured, after 200 to warm up
 */
import { performance } from "node:perf_hooks";
import Database from "better-sqlite3";
import { startStack } from "../../test/helpers/gateway";

const CALLS = Number(process.env.SQLITE_BENCH_CALLS ?? 1_000);
const IN_FLIGHT = 10;

const costs = new Map<string, { count: number; ms: number }>();
function note(sql: string, ms: number): void {
  const key = sql.replace(/\s+/g, " ").slice(0, 120);
  const cost = costs.get(key) ?? { count: 0, ms: 0 };
  cost.count++;
  cost.ms += ms;
  costs.set(key, cost);
}

/** Wraps the methods that run SQL: a statement's run/get/all/iterate, and the connection's exec (BEGIN, COMMIT). */
function instrument(): void {
  const probe = new Database(":memory:");
  const statement = Object.getPrototypeOf(probe.prepare("SELECT 1")) as Record<string, (...args: unknown[]) => unknown>;
  for (const method of ["run", "get", "all", "iterate"]) {
    const original = statement[method];
    statement[method] = function (this: { source: string }, ...args: unknown[]) {
      const start = performance.now();
      try {
        return original.apply(this, args);
      } finally {
        note(this.source, performance.now() - start);
      }
    };
  }
  const connection = Object.getPrototypeOf(probe) as { exec: (sql: string) => unknown };
  const exec = connection.exec;
  connection.exec = function (this: unknown, sql: string) {
    const start = performance.now();
    try {
      return exec.call(this, sql);
    } finally {
      note(`exec: ${sql}`, performance.now() - start);
    }
  };
  probe.close();
}

async function main(): Promise<void> {
  instrument();
  const stack = await startStack({ buyerUsd: "1000", config: { rateLimitPerMin: 10_000_000 } });
  try {
    await stack.addSkill("echo", "/echo");
    const calls = async (count: number) => {
      for (let i = 0; i < count; i += IN_FLIGHT) {
        const answers = await Promise.all(Array.from({ length: IN_FLIGHT }, (_, k) => stack.post("/v1/skills/echo/call", { i: i + k })));
        const failed = answers.find((answer) => answer.status !== 200);
        if (failed) throw new Error(`a call answered ${failed.status}: ${JSON.stringify(failed.body)}`);
      }
    };
    await calls(200);
    costs.clear();
    await calls(CALLS);
    const rows = [...costs].sort((a, b) => b[1].ms - a[1].ms);
    const statements = rows.reduce((sum, [, cost]) => sum + cost.count, 0);
    const ms = rows.reduce((sum, [, cost]) => sum + cost.ms, 0);
    console.log(
      `${CALLS} paid echo calls on SQLite, ${IN_FLIGHT} at a time: ${(statements / CALLS).toFixed(2)} statements a call, ` +
        `${((ms * 1000) / CALLS).toFixed(1)} µs a call in them (wall time on the event loop)\n`,
    );
    console.log("| a call | µs a call | statement |\n| ---: | ---: | --- |");
    for (const [sql, cost] of rows.slice(0, 20))
      console.log(`| ${(cost.count / CALLS).toFixed(2)} | ${((cost.ms * 1000) / CALLS).toFixed(1)} | \`${sql.replaceAll("|", "\\|")}\` |`);
  } finally {
    await stack.close();
  }
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
