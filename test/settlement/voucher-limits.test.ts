import { expect } from "chai";
import type { Database } from "../../server/db/sql";
import { assertBalanced } from "../../server/ledger/invariants";
import type { Ledger } from "../../server/ledger/ledger";
import { type IssueVoucherResult, type VoucherIssuer, type VoucherLimits, issueRefusal } from "../../server/settlement/vouchers";
import { VoucherStore } from "../../server/settlement/vouchers-store";
import { describeEachEngine } from "../helpers/engines";
import { makeLedger } from "../helpers/ledger";
import { DEFAULT_VOUCHER_LIMITS, offlineIssuer, voucherHolder } from "../helpers/vouchers";

const USDC = 1_000_000n;
const ALICE = "0x00000000000000000000000000000000000a11ce";
/** Wall clock and chain clock of the tests: the vouchers live 600 s (offlineIssuer's ttl). */
const NOW_MS = 1_750_000_000_000;
const NOW_SEC = NOW_MS / 1000;
const MINUTE_MS = 60_000;

type Refused = Exclude<IssueVoucherResult, { ok: true }>;

/**
 * Issue 23's finding: one key issued 3,600 vouchers of $0.000001 in 5.8 s. Each row is one bound, the state just
 * short of it, and the request that would pass it: refused, in the envelope's terms, writing nothing.
 */
const FINDINGS: {
  what: string;
  limits?: Partial<VoucherLimits>;
  /** Brings alice (100 USDC, one address) to the edge of the bound. */
  before: (issue: (micros: bigint, atMs?: number) => Promise<void>) => Promise<void>;
  ask: { amountMicros?: bigint; nowMs?: number };
  refused: Refused;
  code: string;
  message: string;
  retryAfterSec?: number;
}[] = [
  {
    what: "a voucher for less than the minimum ($0.000001)",
    before: async () => {},
    ask: { amountMicros: 1n },
    refused: { ok: false, reason: "amount_below_minimum", minimumMicros: 10_000n },
    code: "amount_below_minimum",
    message: "at least $0.01",
  },
  {
    what: "everything available, when that is less than the minimum",
    before: (issue) => issue(100n * USDC - 5_000n),
    ask: {},
    refused: { ok: false, reason: "amount_below_minimum", minimumMicros: 10_000n, availableMicros: 5_000n },
    code: "amount_below_minimum",
    message: "Only $0.005 is available, and a withdrawal voucher must be for at least $0.01",
  },
  {
    what: "one open voucher more than the account may hold",
    limits: { openPerAccountMax: 3 },
    before: async (issue) => {
      for (let i = 0; i < 3; i++) await issue(USDC);
    },
    ask: { amountMicros: USDC },
    // The first open voucher's deadline is 600 s away; the second after it, it no longer counts.
    refused: { ok: false, reason: "too_many_open", max: 3, retryAfterMs: 601_000 },
    code: "rate_limited",
    message: "already holds 3 open withdrawal vouchers",
    retryAfterSec: 601,
  },
  {
    what: "one voucher more in an hour than the account may be issued",
    limits: { openPerAccountMax: 100, issuedPerHourMax: 4 },
    before: async (issue) => {
      for (let i = 0; i < 4; i++) await issue(USDC, NOW_MS - 30 * MINUTE_MS + i);
    },
    ask: { amountMicros: USDC },
    // The first of the hour leaves the window 30 minutes from now.
    refused: { ok: false, reason: "too_many_issued", max: 4, retryAfterMs: 30 * MINUTE_MS },
    code: "rate_limited",
    message: "was issued 4 withdrawal vouchers in the last hour",
    retryAfterSec: 1_800,
  },
];

describeEachEngine("withdrawal vouchers are bounded", (engine) => {
  let db: Database;
  let ledger: Ledger;
  let store: VoucherStore;

  beforeEach(async () => {
    ({ db, ledger } = await makeLedger(engine));
    store = new VoucherStore(db);
    await voucherHolder(ledger, "alice", 100n * USDC, ALICE);
  });

  const issuerWith = (limits: Partial<VoucherLimits> = {}) => offlineIssuer(ledger, { limits: { ...DEFAULT_VOUCHER_LIMITS, ...limits } });
  const issued = async (issuer: VoucherIssuer, micros: bigint, nowMs = NOW_MS, nowSec = NOW_SEC) => {
    const result = await issuer.issue("alice", { amountMicros: micros, nowMs, nowSec });
    if (!result.ok) throw new Error(`expected a voucher, got ${result.reason}`);
    return result.issued.voucher;
  };
  const written = async () => ({
    vouchers: Number(await db.value<bigint>("SELECT COUNT(*) FROM vouchers")),
    available: await ledger.balanceOf("alice", "available"),
  });

  for (const row of FINDINGS) {
    it(`refuses ${row.what}, writing nothing`, async () => {
      const issuer = issuerWith(row.limits);
      await row.before(async (micros, atMs) => void (await issued(issuer, micros, atMs)));
      const before = await written();

      const result = await issuer.issue("alice", { ...row.ask, nowMs: row.ask.nowMs ?? NOW_MS, nowSec: NOW_SEC });

      expect(result).to.deep.equal(row.refused);
      const refusal = issueRefusal(result as Refused);
      expect(refusal.code).to.equal(row.code);
      expect(refusal.message).to.include(row.message);
      expect(refusal.details?.retry_after_sec).to.equal(row.retryAfterSec);
      expect(await written()).to.deep.equal(before);
      await assertBalanced(db);
    });
  }

  it("counts a voucher open only until its deadline, and a redeemed one not at all", async () => {
    const issuer = issuerWith({ openPerAccountMax: 2 });
    const first = await issued(issuer, USDC);
    await issued(issuer, USDC);
    expect(await issuer.issue("alice", { amountMicros: USDC, nowMs: NOW_MS, nowSec: NOW_SEC })).to.deep.include({
      reason: "too_many_open",
    });

    // Redeemed: it stops counting at once (the sweep, or the wallet path, saw it).
    await store.settle(ALICE, first.nonce, "redeemed");
    const third = await issued(issuer, USDC);
    expect(await issuer.issue("alice", { amountMicros: USDC, nowMs: NOW_MS, nowSec: NOW_SEC })).to.deep.include({
      reason: "too_many_open",
    });

    // Past their deadline the escrow refuses them, so they stop counting before the sweep gives them back.
    const later = Number(third.deadline) + 1;
    expect(await issuer.issue("alice", { amountMicros: USDC, nowMs: later * 1000, nowSec: later })).to.include({ ok: true });
  });

  it("lets the account be issued another once the first voucher of the hour leaves the window, and not a moment before", async () => {
    const issuer = issuerWith({ openPerAccountMax: 100, issuedPerHourMax: 2 });
    await issued(issuer, USDC, NOW_MS);
    await issued(issuer, USDC, NOW_MS + 10 * MINUTE_MS);
    const hourLater = NOW_MS + 60 * MINUTE_MS;
    expect(await issuer.issue("alice", { amountMicros: USDC, nowMs: hourLater - 1, nowSec: NOW_SEC })).to.deep.equal({
      ok: false,
      reason: "too_many_issued",
      max: 2,
      retryAfterMs: 1,
    });
    expect(await issuer.issue("alice", { amountMicros: USDC, nowMs: hourLater, nowSec: NOW_SEC })).to.include({ ok: true });
    // Returned or redeemed, a voucher still counts in its hour: the limit is on issuing.
    expect(await issuer.issue("alice", { amountMicros: USDC, nowMs: hourLater + 1, nowSec: NOW_SEC })).to.deep.include({
      reason: "too_many_issued",
    });
  });

  it("gives the last open place to one of ten requests of the account sent at once", async () => {
    const issuer = issuerWith({ openPerAccountMax: 3 });
    const results = await Promise.all(
      Array.from({ length: 10 }, () => issuer.issue("alice", { amountMicros: USDC, nowMs: NOW_MS, nowSec: NOW_SEC })),
    );
    expect(results.filter((r) => r.ok)).to.have.length(3);
    expect(results.filter((r) => !r.ok).map((r) => (r as Refused).reason)).to.deep.equal(Array(7).fill("too_many_open"));
    expect(await written()).to.deep.equal({ vouchers: 3, available: 97n * USDC });
    await assertBalanced(db);
  });

  it("bounds each account alone: another account's vouchers take none of its places", async () => {
    const issuer = issuerWith({ openPerAccountMax: 1, issuedPerHourMax: 1 });
    await voucherHolder(ledger, "bob", 5n * USDC, "0x0000000000000000000000000000000000000b0b");
    await issued(issuer, USDC);
    expect(await issuer.issue("bob", { amountMicros: USDC, nowMs: NOW_MS, nowSec: NOW_SEC })).to.include({ ok: true });
  });

  /**
   * The order of the checks (server/settlement/vouchers.ts): a request that fails several is told the first. Alice
   * holds one voucher with room for one, issued this hour with room for one, and each row asks for something that
   * fails its own check and every check after it.
   */
  const ORDER: { check: string; account: string; amountMicros: bigint; redeemFirst?: true; atMs?: number; reason: Refused["reason"] }[] = [
    { check: "the escrow address", account: "carol", amountMicros: 1n, reason: "no_address" },
    { check: "the minimum amount", account: "alice", amountMicros: 1n, reason: "amount_below_minimum" },
    { check: "the open vouchers", account: "alice", amountMicros: 1_000n * USDC, reason: "too_many_open" },
    { check: "the vouchers issued this hour", account: "alice", amountMicros: 1_000n * USDC, redeemFirst: true, reason: "too_many_issued" },
    {
      check: "the balance",
      account: "alice",
      amountMicros: 1_000n * USDC,
      redeemFirst: true,
      atMs: NOW_MS + 60 * MINUTE_MS,
      reason: "insufficient_balance",
    },
  ];
  for (const [i, row] of ORDER.entries()) {
    it(`checks ${row.check} ${i === ORDER.length - 1 ? "last" : "before what comes after it"}`, async () => {
      await ledger.ensureAccount({ id: "carol", kind: "user", name: "carol" });
      const issuer = issuerWith({ openPerAccountMax: 1, issuedPerHourMax: 1 });
      const first = await issued(issuer, USDC);
      if (row.redeemFirst) await store.settle(ALICE, first.nonce, "redeemed");
      const result = await issuer.issue(row.account, { amountMicros: row.amountMicros, nowMs: row.atMs ?? NOW_MS, nowSec: NOW_SEC });
      expect(result).to.deep.include({ reason: row.reason });
    });
  }
});
