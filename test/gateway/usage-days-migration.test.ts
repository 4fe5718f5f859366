import { expect } from "chai";
import type { Database } from "../../server/db/sql";
import { CallsStore } from "../../server/gateway/calls-store";
import { describeMigration } from "../helpers/migrations";

/**
 * SQLite version 31 and PostgreSQL migration 0019 add the usage days (server/gateway/schema.ts). A database with calls
 * before them starts with days equal to what its counted calls add up to (the refusals of a key's own limits left out),
 * and every call written after adds to them.
 */
const DAY = 86_400_000;

async function callsBefore(db: Database): Promise<void> {
  await db.run("INSERT INTO accounts (id, kind, name, created_at) VALUES ('ada', 'user', 'Ada', 1)");
  await db.run("INSERT INTO api_keys (id, account_id, name, prefix, hash, created_at) VALUES ('k1', 'ada', 'k1', 'atom_k1', 'h1', 1)");
  const calls: [string, string, number, bigint, string][] = [
    ["c1", "success", DAY + 1, 10n, "echo"],
    ["c2", "success", DAY + 2, 20n, "echo"],
    ["c3", "rate_limited", DAY + 3, 0n, "echo"],
    ["c4", "skill_error", 2 * DAY, 0n, "echo"],
    ["c5", "success", 2 * DAY + 5, 40n, "other"],
    ["c6", "daily_limit_reached", 2 * DAY + 6, 0n, "other"],
  ];
  for (const [id, outcome, at, charged, skill] of calls)
    await db.run(
      `INSERT INTO calls (id, account_id, api_key_id, skill_id, endpoint, http_status, outcome, charged_micros, latency_us, created_at)
       VALUES (?, 'ada', 'k1', ?, 'call', 200, ?, ?, 1, ?)`,
      [id, skill, outcome, charged, at],
    );
}

describeMigration("Usage days added to a database with calls before them", { sqlite: 31, postgres: 19 }, (at) => {
  beforeEach(async () => {
    await callsBefore(await at().open());
    await at().migrate();
  });

  it("starts the days at what the counted calls add up to, and adds every call written after", async () => {
    const db = at().current();
    expect(await db.all("SELECT day, skill_id, calls, spend_micros FROM usage_days ORDER BY day, skill_id")).to.deep.equal([
      { day: 1n, skill_id: "echo", calls: 2n, spend_micros: 30n },
      { day: 2n, skill_id: "echo", calls: 1n, spend_micros: 0n },
      { day: 2n, skill_id: "other", calls: 1n, spend_micros: 40n },
    ]);
    const store = new CallsStore(db);
    await store.record({
      id: "c7",
      accountId: "ada",
      apiKeyId: "k1",
      skillId: "echo",
      endpoint: "call",
      httpStatus: 200,
      outcome: "success",
      chargedMicros: 80n,
      holdId: null,
      latencyUs: 1,
      createdAtMs: DAY + 9,
    });
    expect(await store.daily("ada", {})).to.deep.equal([
      { day: 1, spendMicros: 110n, calls: 3 },
      { day: 2, spendMicros: 40n, calls: 2 },
    ]);
    expect((await store.byKey("ada", 2 * DAY, DAY))[0]).to.deep.equal({
      apiKeyId: "k1",
      today: { spendMicros: 40n, calls: 2 },
      month: { spendMicros: 150n, calls: 5 },
      total: { spendMicros: 150n, calls: 5 },
    });
  });
});
