import { expect } from "chai";
import { type CallWrite, writeCall } from "../../server/gateway/call-write";
import { type CallOutcome, CallsStore, usagePage } from "../../server/gateway/calls-store";
import { IdempotencyStore } from "../../server/gateway/idempotency-store";
import { type IdempotencyBegin, IdempotencyKeys } from "../../server/gateway/idempotency";
import type { Database } from "../../server/db/sql";
import { PostgresDatabase } from "../../server/db/postgres/database";
import { createPostgresPool } from "../../server/db/postgres/pool";
import { Ledger } from "../../server/ledger/ledger";
import { describeEachEngine } from "../helpers/engines";
import { noRecord } from "../helpers/records";
import { Rng, randomSeed } from "../helpers/random";
import type { Sql } from "../../server/db/sql";

const TTL_MS = 1_000;
/** The usage property's seed: USAGE_SEED to replay one. */
const USAGE_SEED = Number(process.env.USAGE_SEED ?? randomSeed());

async function expectRejection(promise: Promise<unknown>, message: RegExp): Promise<void> {
  let error: unknown;
  await promise.catch((e: unknown) => (error = e));
  expect(error, `expected a rejection matching ${message}`).to.be.instanceOf(Error);
  expect((error as Error).message).to.match(message);
}

describeEachEngine("gateway's stores", (engine) => {
  let db: Database;

  beforeEach(async () => {
    db = await engine.open();
    await (await Ledger.open(db)).ensureAccount({ id: "ada", kind: "user", name: "Ada" });
  });

  it("IdempotencyStore claims a free or expired key, completes only what is in progress, and purges by age", async () => {
    const store = new IdempotencyStore(db);
    expect(await store.claim("ada", "k", "hash1", 10, 0)).to.deep.equal({ kind: "claimed" });
    expect(await store.get("ada", "k")).to.deep.equal({
      requestHash: "hash1",
      state: "in_progress",
      statusCode: null,
      responseBody: null,
      createdAtMs: 10,
    });
    // A live row is not replaced: the claim returns it instead.
    const held = await store.claim("ada", "k", "hash2", 11, 10);
    expect(held.kind).to.equal("held");
    expect(held.kind === "held" && held.record).to.include({ requestHash: "hash1", state: "in_progress", createdAtMs: 10 });
    await store.complete("ada", "k", 200, "{}");
    await store.complete("ada", "k", 500, "later");
    expect(await store.get("ada", "k")).to.include({ state: "completed", statusCode: 200, responseBody: "{}" });
    await store.abandon("ada", "k");
    expect(await store.get("ada", "k")).to.not.equal(undefined);
    // Created at 10, before the cut-off of 15: expired, so the claim replaces it.
    expect(await store.claim("ada", "k", "hash2", 20, 15)).to.deep.equal({ kind: "claimed" });
    expect(await store.get("ada", "k")).to.include({ requestHash: "hash2", state: "in_progress", statusCode: null, createdAtMs: 20 });
    expect(await store.dropInProgress()).to.equal(1);
    await store.claim("ada", "old", "h", 1, 0);
    await store.claim("ada", "new", "h", 30, 0);
    expect(await store.purgeCreatedBefore(5)).to.equal(1);
    expect(await store.get("ada", "new")).to.not.equal(undefined);
    // Only the keys in progress reserved before the cut-off are dropped.
    await store.claim("ada", "later", "h", 50, 0);
    expect(await store.dropInProgress(40)).to.equal(1);
    expect(await store.get("ada", "new")).to.equal(undefined);
    expect(await store.get("ada", "later")).to.not.equal(undefined);
  });

  it("IdempotencyKeys: a key is new once, in progress until completed, then replayed; another body is refused", async () => {
    const keys = new IdempotencyKeys(new IdempotencyStore(db), TTL_MS);
    expect(await keys.begin("ada", "k", "h", 100)).to.deep.equal({ kind: "new" });
    expect(await keys.begin("ada", "k", "h", 101)).to.deep.equal({ kind: "in_progress" });
    expect(await keys.begin("ada", "k", "other", 101)).to.deep.equal({ kind: "mismatch" });
    await db.transaction((tx) => keys.store.complete("ada", "k", 200, '{"ok":1}', tx));
    expect(await keys.begin("ada", "k", "h", 102)).to.deep.equal({ kind: "replay", status: 200, body: '{"ok":1}' });
    // The same key of another account is another key.
    expect(await keys.begin("bob", "k", "h", 102)).to.deep.equal({ kind: "new" });
    // Past the TTL the key is free again, for any body.
    expect(await keys.begin("ada", "k", "other", 100 + TTL_MS + 1)).to.deep.equal({ kind: "new" });
    await keys.abandon("ada", "k");
    expect(await keys.begin("ada", "k", "h", 100 + TTL_MS + 2)).to.deep.equal({ kind: "new" });
    expect(await keys.purgeExpired(100 + 2 * TTL_MS + 3)).to.equal(2);
  });

  it("writeCall refuses, when the answer it keeps reports a charge, a key that is no longer in progress", async () => {
    const keys = new IdempotencyKeys(new IdempotencyStore(db), TTL_MS);
    const stores = { calls: new CallsStore(db), idempotency: keys.store };
    const write = (id: string, status: number, required: boolean): CallWrite => ({
      line: { ...noRecord("ada").write.line, id, httpStatus: status },
      idempotency: { accountId: "ada", key: "lost", answer: { status, body: "{}" }, required },
    });
    expect((await keys.begin("ada", "lost", "h")).kind).to.equal("new");
    await keys.abandon("ada", "lost");
    // The charge's transaction fails (and takes the charge, and the call's line, with it) rather than commit without a
    // stored answer.
    const error = await db.transaction((tx) => writeCall(stores, write("charged", 200, true), tx)).catch((e: Error) => e);
    expect(error).to.be.instanceOf(Error);
    expect((error as Error).message).to.contain("was not in progress");
    expect(await db.value("SELECT COUNT(*) FROM calls WHERE id = 'charged'")).to.equal(0n);
    // An uncharged answer whose key is gone is simply not kept.
    await db.transaction((tx) => writeCall(stores, write("uncharged", 400, false), tx));
    expect(await db.value("SELECT COUNT(*) FROM calls WHERE id = 'uncharged'")).to.equal(1n);
    expect((await keys.begin("ada", "lost", "h")).kind).to.equal("new");
  });

  it("IdempotencyKeys.recoverInProgress frees the keys in progress, or only those reserved before `before`", async () => {
    const keys = new IdempotencyKeys(new IdempotencyStore(db), TTL_MS);
    await keys.begin("ada", "early", "h", 100);
    await keys.begin("ada", "late", "h", 200);
    await keys.begin("ada", "done", "h", 50);
    await keys.store.complete("ada", "done", 200, "{}");
    expect(await keys.recoverInProgress({ before: 150 })).to.equal(1);
    expect(await keys.begin("ada", "early", "h", 300)).to.deep.equal({ kind: "new" });
    expect(await keys.begin("ada", "late", "h", 300)).to.deep.equal({ kind: "in_progress" });
    expect(await keys.recoverInProgress()).to.equal(2);
    expect(await keys.begin("ada", "done", "h", 300)).to.deep.include({ kind: "replay" });
  });

  it("lets exactly one of many concurrent begins of one key through", async () => {
    const keys = new IdempotencyKeys(new IdempotencyStore(db), TTL_MS);
    const outcomes = await Promise.all(Array.from({ length: 20 }, () => keys.begin("ada", "k", "h", 100)));
    expect(outcomes.filter((o) => o.kind === "new")).to.have.length(1);
    expect(outcomes.filter((o) => o.kind === "in_progress")).to.have.length(19);
  });

  if (engine.name === "postgres") {
    describe("two replicas on one PostgreSQL", () => {
      let other: Database;
      beforeEach(() => {
        other = new PostgresDatabase(createPostgresPool({ url: engine.lastUrl() }));
      });
      afterEach(() => other.close());

      /** Each key begun at once on both replicas (several at a time on each): the kinds each pair came to. */
      async function race(keyCount: number, nowMs: number, before?: (key: string) => Promise<void>): Promise<IdempotencyBegin["kind"][][]> {
        const replicas = [db, other].map((handle) => new IdempotencyKeys(new IdempotencyStore(handle), TTL_MS));
        return Promise.all(
          Array.from({ length: keyCount }, async (_, i) => {
            const key = `k${i}`;
            await before?.(key);
            const begun = await Promise.all(
              replicas.flatMap((keys) => [keys.begin("ada", key, "h", nowMs), keys.begin("ada", key, "h", nowMs)]),
            );
            return begun.map((b) => b.kind).sort();
          }),
        );
      }

      it("lets exactly one replica run a key both begin at once; the others see it in progress", async () => {
        const pairs = await race(25, 1_000);
        for (const kinds of pairs) expect(kinds).to.deep.equal(["in_progress", "in_progress", "in_progress", "new"]);
        expect(await db.value("SELECT COUNT(*) FROM idempotency_keys WHERE state = 'in_progress'")).to.equal(25n);
      });

      it("lets exactly one replica take over an expired key both begin at once", async () => {
        const store = new IdempotencyStore(db);
        const pairs = await race(25, 10_000, async (key) => {
          await store.claim("ada", key, "old", 1, 0);
          await store.complete("ada", key, 200, "old answer");
        });
        for (const kinds of pairs) expect(kinds).to.deep.equal(["in_progress", "in_progress", "in_progress", "new"]);
        expect(await db.value("SELECT COUNT(*) FROM idempotency_keys WHERE state = 'in_progress' AND request_hash = 'h'")).to.equal(25n);
      });

      it("replays a key one replica completed to a retry on the other", async () => {
        const [a, b] = [db, other].map((handle) => new IdempotencyKeys(new IdempotencyStore(handle), TTL_MS));
        expect(await a.begin("ada", "k", "h", 100)).to.deep.equal({ kind: "new" });
        await db.transaction((tx) => a.store.complete("ada", "k", 201, "stored", tx), { durable: true });
        expect(await b.begin("ada", "k", "h", 101)).to.deep.equal({ kind: "replay", status: 201, body: "stored" });
      });
    });
  }

  it("CallsStore records calls, pages usage newest first, counts per day and names a call's owner", async () => {
    const skillId = "00000000-0000-4000-8000-000000000001";
    await db.run(
      `INSERT INTO skills (id, slug, name, description, price_micros, seller_account_id, backend_url, timeout_ms, rate_limit_per_min,
         input_schema, signing_secret, active, created_at, updated_at)
       VALUES (?, 'echo', 'Echo', '', 5, 'ada', 'http://127.0.0.1:1/', 1000, NULL, NULL, 's', 1, 1, 1)`,
      [skillId],
    );
    const store = new CallsStore(db);
    const base = { accountId: "ada", apiKeyId: "k", skillId, endpoint: "call" as const, holdId: null, latencyUs: 3 };
    await store.record({ ...base, id: "c1", httpStatus: 200, outcome: "success", chargedMicros: 0n, createdAtMs: 86_400_000 });
    await store.record({ ...base, id: "c2", httpStatus: 429, outcome: "rate_limited", chargedMicros: 0n, createdAtMs: 86_400_001 });
    await db.transaction((tx) =>
      store.record({ ...base, id: "c3", httpStatus: 200, outcome: "success", chargedMicros: 7n, createdAtMs: 2 * 86_400_000 }, tx),
    );
    expect((await store.recent("ada", 10)).map((r) => [r.id, r.skillSlug])).to.deep.equal([
      ["c3", "echo"],
      ["c2", "echo"],
      ["c1", "echo"],
    ]);
    expect((await store.recent("ada", 1, 2 * 86_400_000)).map((r) => r.id)).to.deep.equal(["c2"]);
    expect(await store.daily("ada", { fromMs: 0 })).to.deep.equal([
      { day: 1, spendMicros: 0n, calls: 1 },
      { day: 2, spendMicros: 7n, calls: 1 },
    ]);
    expect(await store.countSince("ada", 0)).to.equal(2);
    expect(await store.ownerOf("c1")).to.deep.equal({ accountId: "ada", apiKeyId: "k" });
    expect(await store.ownerOf("nope")).to.equal(undefined);
  });

  it("CallsStore narrows usage by key, skill and time, and sums it per day, in all and per key", async () => {
    const ids = { echo: "00000000-0000-4000-8000-000000000001", fail: "00000000-0000-4000-8000-000000000002" };
    for (const [slug, id] of Object.entries(ids)) {
      await db.run(
        `INSERT INTO skills (id, slug, name, description, price_micros, seller_account_id, backend_url, timeout_ms, rate_limit_per_min,
           input_schema, signing_secret, active, created_at, updated_at)
         VALUES (?, ?, ?, '', 5, 'ada', 'http://127.0.0.1:1/', 1000, NULL, NULL, 's', 1, 1, 1)`,
        [id, slug, slug],
      );
    }
    await (await Ledger.open(db)).ensureAccount({ id: "bob", kind: "user", name: "Bob" });
    for (const [id, account] of [
      ["k1", "ada"],
      ["k2", "ada"],
      ["kb", "bob"],
    ]) {
      await db.run("INSERT INTO api_keys (id, account_id, name, prefix, hash, created_at) VALUES (?, ?, ?, ?, ?, 1)", [
        id,
        account,
        `key ${id}`,
        `atom_${id}`,
        `hash-${id}`,
      ]);
    }
    const store = new CallsStore(db);
    const DAY = 86_400_000;
    const call = (id: string, apiKeyId: string, skill: keyof typeof ids, createdAtMs: number, chargedMicros: bigint, accountId = "ada") =>
      store.record({
        id,
        accountId,
        apiKeyId,
        skillId: ids[skill],
        endpoint: "call",
        httpStatus: 200,
        outcome: "success",
        chargedMicros,
        holdId: null,
        latencyUs: 3,
        createdAtMs,
      });
    await call("a", "k1", "echo", DAY + 5, 10n);
    await call("b", "k1", "fail", 2 * DAY + 5, 20n);
    await call("c", "k2", "echo", 2 * DAY + 6, 40n);
    await call("d", "k2", "echo", 3 * DAY, 80n);
    await call("e", "kb", "echo", 2 * DAY, 160n, "bob");
    await store.record({
      id: "f",
      accountId: "ada",
      apiKeyId: "k1",
      skillId: ids.echo,
      endpoint: "call",
      httpStatus: 429,
      outcome: "rate_limited",
      chargedMicros: 0n,
      holdId: null,
      latencyUs: 3,
      createdAtMs: 2 * DAY + 7,
    });

    const recent = async (filter: Parameters<CallsStore["recent"]>[3]) =>
      (await store.recent("ada", 10, undefined, filter)).map((r) => r.id);
    expect(await recent({})).to.deep.equal(["d", "f", "c", "b", "a"]);
    expect(await recent({ apiKeyId: "k1" })).to.deep.equal(["f", "b", "a"]);
    expect(await recent({ apiKeyId: "kb" })).to.deep.equal([]);
    expect(await recent({ skill: "fail" })).to.deep.equal(["b"]);
    expect(await recent({ skill: ids.fail })).to.deep.equal(["b"]);
    expect(await recent({ fromMs: 2 * DAY, untilMs: 3 * DAY })).to.deep.equal(["f", "c", "b"]);
    expect(await recent({ apiKeyId: "k2", skill: "echo", fromMs: 2 * DAY + 6, untilMs: 2 * DAY + 7 })).to.deep.equal(["c"]);
    const [d] = await store.recent("ada", 1, undefined, { apiKeyId: "k2" });
    expect(d).to.include({ id: "d", apiKeyId: "k2", apiKeyName: "key k2", apiKeyPrefix: "atom_k2" });

    // The rate-limited call is listed above, but not counted in the sums.
    expect(await store.daily("ada", { fromMs: 2 * DAY })).to.deep.equal([
      { day: 2, spendMicros: 60n, calls: 2 },
      { day: 3, spendMicros: 80n, calls: 1 },
    ]);
    expect(await store.daily("ada", { apiKeyId: "k1", untilMs: 2 * DAY })).to.deep.equal([{ day: 1, spendMicros: 10n, calls: 1 }]);
    expect(await store.total("ada", {})).to.deep.equal({ spendMicros: 150n, calls: 4 });
    expect(await store.total("ada", { skill: "echo", fromMs: 2 * DAY })).to.deep.equal({ spendMicros: 120n, calls: 2 });
    expect(await store.total("ada", { fromMs: 4 * DAY })).to.deep.equal({ spendMicros: 0n, calls: 0 });

    expect(await store.byKey("ada", 3 * DAY, 2 * DAY)).to.deep.equal([
      {
        apiKeyId: "k1",
        today: { spendMicros: 0n, calls: 0 },
        month: { spendMicros: 20n, calls: 1 },
        total: { spendMicros: 30n, calls: 2 },
      },
      {
        apiKeyId: "k2",
        today: { spendMicros: 80n, calls: 1 },
        month: { spendMicros: 120n, calls: 2 },
        total: { spendMicros: 120n, calls: 2 },
      },
    ]);
    expect(await store.byKey("bob", 0, 0)).to.deep.equal([
      {
        apiKeyId: "kb",
        today: { spendMicros: 160n, calls: 1 },
        month: { spendMicros: 160n, calls: 1 },
        total: { spendMicros: 160n, calls: 1 },
      },
    ]);
  });

  it(`CallsStore's usage sums equal what the calls add up to, over random calls, folded or not (seed ${USAGE_SEED})`, async () => {
    const rng = new Rng(USAGE_SEED);
    const DAY = 86_400_000;
    const skills = ["00000000-0000-4000-8000-00000000000a", "00000000-0000-4000-8000-00000000000b"];
    for (const [i, id] of skills.entries()) {
      await db.run(
        `INSERT INTO skills (id, slug, name, description, price_micros, seller_account_id, backend_url, timeout_ms, rate_limit_per_min,
           input_schema, signing_secret, active, created_at, updated_at)
         VALUES (?, ?, ?, '', 5, 'ada', 'http://127.0.0.1:1/', 1000, NULL, NULL, 's', 1, 1, 1)`,
        [id, `s${i}`, `s${i}`],
      );
    }
    const ledger = await Ledger.open(db);
    const keysOf: Record<string, string[]> = { ada: ["a1", "a2", "a3"], bob: ["b1"] };
    await ledger.ensureAccount({ id: "bob", kind: "user", name: "Bob" });
    for (const [account, keys] of Object.entries(keysOf))
      for (const id of keys)
        await db.run("INSERT INTO api_keys (id, account_id, name, prefix, hash, created_at) VALUES (?, ?, ?, ?, ?, 1)", [
          id,
          account,
          id,
          `atom_${id}`,
          `hash-${id}`,
        ]);
    const store = new CallsStore(db);
    const written: {
      accountId: string;
      apiKeyId: string;
      skillId: string;
      outcome: CallOutcome;
      chargedMicros: bigint;
      createdAtMs: number;
    }[] = [];
    const outcomes: CallOutcome[] = ["success", "success", "skill_error", "rate_limited", "daily_limit_reached", "insufficient_balance"];
    for (let i = 0; i < 240; i++) {
      const accountId = rng.chance(0.8) ? "ada" : "bob";
      // A key of another account (or none of any): counted in the days, left out of the per-key sums.
      const apiKeyId = rng.chance(0.05) ? "x402" : rng.pick(keysOf[accountId]);
      const outcome = rng.pick(outcomes);
      const call = {
        accountId,
        apiKeyId,
        skillId: rng.pick(skills),
        outcome,
        chargedMicros: outcome === "success" ? BigInt(rng.int(0, 5_000)) : 0n,
        createdAtMs: rng.int(0, 6) * DAY + rng.int(0, DAY - 1),
      };
      written.push(call);
      const record = (tx?: Sql) =>
        store.record(
          { ...call, id: `call-${String(i).padStart(4, "0")}`, endpoint: "call", httpStatus: 200, holdId: null, latencyUs: 1 },
          tx,
        );
      // Some in a transaction of several (a group commit's), some alone.
      if (rng.chance(0.3)) await db.transaction(async (tx) => record(tx));
      else await record();
      // PostgreSQL folds its pending calls now and then (its roll-up's job), in parts: the sums never move.
      if (db.engine === "postgres" && rng.chance(0.1)) await db.value("SELECT usage_roll_up(?, 0)", [rng.int(1, 30)]);
    }

    const counted = written.filter((c) => c.outcome !== "rate_limited" && c.outcome !== "daily_limit_reached");
    const sum = (calls: typeof counted) => ({ spendMicros: calls.reduce((a, c) => a + c.chargedMicros, 0n), calls: calls.length });
    for (let round = 0; round < 40; round++) {
      const accountId = rng.pick(["ada", "bob"]);
      const fromDay = rng.chance(0.3) ? undefined : rng.int(0, 7);
      const untilDay = rng.chance(0.3) ? undefined : rng.int(0, 7);
      const apiKeyId = rng.chance(0.5) ? undefined : rng.pick([...keysOf[accountId], "x402"]);
      const skill = rng.weighted<string | undefined>([
        [undefined, 2],
        [skills[0], 1],
        ["s1", 1],
      ]);
      const filter = {
        ...(apiKeyId === undefined ? {} : { apiKeyId }),
        ...(skill === undefined ? {} : { skill }),
        ...(fromDay === undefined ? {} : { fromMs: fromDay * DAY }),
        ...(untilDay === undefined ? {} : { untilMs: untilDay * DAY }),
      };
      const selected = counted.filter(
        (c) =>
          c.accountId === accountId &&
          (apiKeyId === undefined || c.apiKeyId === apiKeyId) &&
          (skill === undefined || c.skillId === (skill === "s1" ? skills[1] : skill)) &&
          (fromDay === undefined || c.createdAtMs >= fromDay * DAY) &&
          (untilDay === undefined || c.createdAtMs < untilDay * DAY),
      );
      const what = `round ${round}: ${accountId} ${JSON.stringify(filter)}`;
      expect(await store.total(accountId, filter), what).to.deep.equal(sum(selected));
      const days = [...new Set(selected.map((c) => Math.floor(c.createdAtMs / DAY)))].sort((a, b) => a - b);
      expect(await store.daily(accountId, filter), what).to.deep.equal(
        days.map((day) => ({ day, ...sum(selected.filter((c) => Math.floor(c.createdAtMs / DAY) === day)) })),
      );
      const today = rng.int(0, 7);
      const month = rng.int(0, today);
      const own = counted.filter((c) => c.accountId === accountId && keysOf[accountId].includes(c.apiKeyId));
      expect(await store.byKey(accountId, today * DAY, month * DAY), what).to.deep.equal(
        [...new Set(own.map((c) => c.apiKeyId))].sort().map((key) => {
          const mine = own.filter((c) => c.apiKeyId === key);
          return {
            apiKeyId: key,
            today: sum(mine.filter((c) => c.createdAtMs >= today * DAY)),
            month: sum(mine.filter((c) => c.createdAtMs >= month * DAY)),
            total: sum(mine),
          };
        }),
      );
      expect(await store.countSince(accountId, today * DAY), what).to.equal(
        counted.filter((c) => c.accountId === accountId && c.createdAtMs >= today * DAY).length,
      );
    }
    // The days are read whole: a time inside one is refused, not silently rounded.
    await expectRejection(store.total("ada", { fromMs: DAY + 1 }), /whole UTC days: 86400001 is not the start of one/);
  });

  it("pages one key's calls through calls_by_key, not through every call of its account", async () => {
    const day = 86_400_000;
    // A busy key and a quiet one, on one account: the quiet key's page must not walk the busy key's calls.
    const values = Array.from({ length: 3_000 }, (_, i) => `('busy-${i}', 'ada', 'k1', 's', 'call', 200, 'success', 1, 1, ${day + i})`);
    values.push(...[0, 1, 2].map((i) => `('quiet-${i}', 'ada', 'k2', 's', 'call', 200, 'success', 1, 1, ${day + 1_000 * i + 1})`));
    await db.run(
      `INSERT INTO calls (id, account_id, api_key_id, skill_id, endpoint, http_status, outcome, charged_micros, latency_us, created_at)
       VALUES ${values.join(", ")}`,
    );
    await db.run("ANALYZE");
    const page = usagePage("ada", { apiKeyId: "k2" }, Number.MAX_SAFE_INTEGER, 50);
    const plan = (
      await db.all<Record<string, unknown>>(`${db.engine === "sqlite" ? "EXPLAIN QUERY PLAN" : "EXPLAIN"} ${page.sql}`, page.params)
    )
      .map((row) => String(row.detail ?? row["QUERY PLAN"]))
      .join("\n");
    expect(plan).to.contain("calls_by_key");
    expect((await new CallsStore(db).recent("ada", 50, undefined, { apiKeyId: "k2" })).map((r) => r.id)).to.deep.equal([
      "quiet-2",
      "quiet-1",
      "quiet-0",
    ]);
  });

  it("keeps a call's line as written and the usage days only growing, on the database's word", async () => {
    const store = new CallsStore(db);
    const day = 86_400_000 * 3;
    const base = { accountId: "ada", apiKeyId: "k", skillId: "s", endpoint: "call" as const, httpStatus: 200, holdId: null, latencyUs: 1 };
    await store.record({ ...base, id: "c1", outcome: "success", chargedMicros: 5n, createdAtMs: day });
    await store.record({ ...base, id: "c2", outcome: "success", chargedMicros: 7n, createdAtMs: day + 1 });
    if (db.engine === "postgres") await db.value("SELECT usage_roll_up(100, 0)");
    await expectRejection(db.run("UPDATE calls SET charged_micros = 0 WHERE id = 'c1'"), /a call's line is written once/);
    await expectRejection(db.run("DELETE FROM calls WHERE id = 'c1'"), /a call's line cannot be deleted/);
    await expectRejection(db.run("UPDATE usage_days SET spend_micros = 0"), /the usage days only grow/);
    await expectRejection(db.run("UPDATE usage_days SET calls = 1"), /the usage days only grow/);
    await expectRejection(db.run("DELETE FROM usage_days"), /the usage days cannot be deleted/);
    if (db.engine === "postgres") {
      await expectRejection(db.run("TRUNCATE calls CASCADE"), /a call's line cannot be deleted/);
      await expectRejection(db.run("TRUNCATE usage_days"), /the usage days cannot be deleted/);
    }
    expect(await store.total("ada", {})).to.deep.equal({ spendMicros: 12n, calls: 2 });
    expect(await db.all("SELECT day, calls, spend_micros FROM usage_days")).to.deep.equal([{ day: 3n, calls: 2n, spend_micros: 12n }]);
  });

  it("CallsStore finishes a page's last millisecond, so the next page skips none of it", async () => {
    await db.run(
      `INSERT INTO skills (id, slug, name, description, price_micros, seller_account_id, backend_url, timeout_ms, rate_limit_per_min,
         input_schema, signing_secret, active, created_at, updated_at)
       VALUES ('s', 'echo', 'Echo', '', 5, 'ada', 'http://127.0.0.1:1/', 1000, NULL, NULL, 's', 1, 1, 1)`,
    );
    const store = new CallsStore(db);
    const base = { accountId: "ada", apiKeyId: "k", skillId: "s", endpoint: "call" as const, holdId: null, latencyUs: 3 };
    const at = [5, 7, 7, 7, 9];
    for (const [i, createdAtMs] of at.entries()) {
      await store.record({ ...base, id: `c${i}`, httpStatus: 200, outcome: "success", chargedMicros: 0n, createdAtMs });
    }
    const first = await store.recent("ada", 2);
    expect(first.map((r) => r.id)).to.deep.equal(["c4", "c3", "c2", "c1"]);
    expect((await store.recent("ada", 2, first.at(-1)!.createdAtMs)).map((r) => r.id)).to.deep.equal(["c0"]);
  });
});
