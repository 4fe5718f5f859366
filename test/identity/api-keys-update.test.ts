import { expect } from "chai";
import { ApiKeys } from "../../server/identity/api-keys";
import type { Database } from "../../server/db/sql";
import { Ledger } from "../../server/ledger/ledger";
import { describeEachEngine } from "../helpers/engines";

const ALICE = "user:alice";
const BOB = "user:bob";
const T0_MS = 1_800_000_000_000;

async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error("expected a rejection");
}

/**
 * ApiKeys.update (PATCH /v1/keys/:id): a key's row and its spending limit change in one transaction, or not at all;
 * only a live key of the account changes; and the change reaches the authentication cache at once, here and (through
 * onChanged) on the other replicas, as a revocation does.
 */
describeEachEngine("ApiKeys.update", (engine) => {
  let db: Database;
  let keys: ApiKeys;
  let changed: string[];

  beforeEach(async () => {
    db = await engine.open();
    const ledger = await Ledger.open(db);
    await ledger.ensureAccount({ id: ALICE, kind: "user", name: "Alice" });
    await ledger.ensureAccount({ id: BOB, kind: "user", name: "Bob" });
    await db.durable();
    // A cache that outlives every test: only a forget can make a change seen.
    keys = new ApiKeys(db, 3_600_000);
    changed = [];
    keys.onChanged = (id) => changed.push(id);
  });

  it("writes the row and the spending limit together: a limit that cannot be written undoes the rest", async () => {
    const { record } = await keys.create(ALICE, { name: "before", metadata: { agent: "a" } });
    const error = await rejection(
      keys.update(record.id, ALICE, () => ({ name: "after", metadata: {}, spendLimit: { limitMicros: 0n, period: "day" } }), T0_MS),
    );
    expect(error).to.be.instanceOf(RangeError);
    expect(await keys.get(record.id)).to.deep.include({ name: "before", metadata: { agent: "a" } });
    expect((await keys.spendLimits([record.id])).size).to.equal(0);
    expect(changed).to.deep.equal([]);

    const done = await keys.update(record.id, ALICE, () => ({ name: "after", spendLimit: { limitMicros: 5n, period: "day" } }), T0_MS);
    expect(done?.record.name).to.equal("after");
    expect(done?.spendLimit).to.include({ limitMicros: 5n, period: "day" });
    expect(changed).to.deep.equal([record.id]);
  });

  it("changes nothing when the plan refuses, and reads the key as it stands in the transaction", async () => {
    const { record } = await keys.create(ALICE, { scopes: ["calls"], spendLimit: { limitMicros: 7n, period: "month" }, nowMs: T0_MS });
    let seen: unknown;
    const error = await rejection(
      keys.update(
        record.id,
        ALICE,
        (current) => {
          seen = { scopes: current.record.scopes, limit: current.spendLimit?.limitMicros };
          throw new Error("refused");
        },
        T0_MS,
      ),
    );
    expect(error.message).to.equal("refused");
    expect(seen).to.deep.equal({ scopes: ["calls"], limit: 7n });
    expect((await keys.get(record.id))?.scopes).to.deep.equal(["calls"]);
    expect(changed).to.deep.equal([]);
  });

  it("answers undefined, without asking the plan, for a revoked key, another account's, an unknown or a malformed id", async () => {
    const revoked = await keys.create(ALICE);
    await keys.revoke(revoked.record.id);
    const bobs = await keys.create(BOB);
    const plan = () => {
      throw new Error("the plan must not run");
    };
    for (const [id, account] of [
      [revoked.record.id, ALICE],
      [bobs.record.id, ALICE],
      ["0190a000-0000-7000-8000-000000000000", ALICE],
      ["not-a-uuid", ALICE],
    ]) {
      expect(await keys.update(id, account, plan)).to.equal(undefined);
    }
    expect((await keys.get(bobs.record.id))?.revokedAtMs).to.equal(null);
    expect(changed).to.deep.equal([]);
  });

  it("is seen at the key's next authentication, though the key is cached, and announced to the other replicas", async () => {
    const { key, record } = await keys.create(ALICE, { scopes: ["calls", "usage:read"] });
    expect((await keys.authenticate(key, T0_MS))?.scopes).to.deep.equal(["calls", "usage:read"]);
    await keys.update(record.id, ALICE, () => ({ scopes: ["calls"], allowedSkills: ["echo"], expiresAtMs: T0_MS + 10 }));
    expect(await keys.authenticate(key, T0_MS + 1)).to.deep.include({
      scopes: ["calls"],
      allowedSkills: ["echo"],
      expiresAtMs: T0_MS + 10,
    });
    expect((await keys.check(key, T0_MS + 10)).kind).to.equal("expired");
    expect(changed).to.deep.equal([record.id]);
  });

  it("lets a revocation's check refuse it, the key left live", async () => {
    const { key, record } = await keys.create(ALICE);
    const error = await rejection(
      keys.revoke(record.id, {
        check: async () => {
          throw new Error("not yours to revoke");
        },
      }),
    );
    expect(error.message).to.equal("not yours to revoke");
    expect((await keys.authenticate(key))?.id).to.equal(record.id);
    expect(await keys.revoke(record.id, { check: async () => {} })).to.equal(true);
    expect(await keys.authenticate(key)).to.equal(undefined);
  });
});
