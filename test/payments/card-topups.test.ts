import { randomBytes } from "node:crypto";
import { expect } from "chai";
import type { Address, Hash } from "viem";
import type { Database } from "../../server/db/sql";
import { PostgresDatabase } from "../../server/db/postgres/database";
import { createPostgresPool } from "../../server/db/postgres/pool";
import { Ledger } from "../../server/ledger/ledger";
import { type CardNotification, type PaymentProvider, signNotification } from "../../server/payments/card-provider";
import { CardTopups } from "../../server/payments/card-topups";
import { CheckoutsStore } from "../../server/payments/checkouts-store";
import type { ChainConnection } from "../../server/settlement/money-path";
import { describeEachEngine } from "../helpers/engines";

/**
 * CardTopups' side of a checkout on both engines, with a stand-in chain that records what the funding wallet
 * sends (the whole path, on Hardhat, is test/payments/card.test.ts). The point here is exactly once across
 * replicas: two gateways on one PostgreSQL database, each with its own pool, receiving one provider
 * notification at the same time.
 */

const AMOUNT_MICROS = 5_000_000n;
const ADDRESS = `0x${"a1".repeat(20)}`;
const USDC_ADDRESS = `0x${"dc".repeat(20)}` as Address;

/** A chain that mines each transaction `mineMs` after it is sent; `fail` makes the next send of a function throw. */
function fakeChain(mineMs = 20) {
  const sent: string[] = [];
  const mined = new Set<string>();
  const failNext = new Set<string>();
  let allowance = 0n;
  const publicClient = {
    async readContract({ functionName }: { functionName: string }) {
      if (functionName === "minDeposit") return 1_000_000n;
      if (functionName === "usdc") return USDC_ADDRESS;
      if (functionName === "allowance") return allowance;
      throw new Error(`unexpected read ${functionName}`);
    },
    async waitForTransactionReceipt({ hash }: { hash: Hash }) {
      await new Promise((resolve) => setTimeout(resolve, mineMs));
      mined.add(hash);
      return { status: "success" };
    },
    async getTransactionReceipt({ hash }: { hash: Hash }) {
      if (!mined.has(hash)) throw new Error(`transaction ${hash} not found`);
      return { status: "success" };
    },
  };
  const fundingWallet = {
    account: { address: `0x${"f0".repeat(20)}` as Address },
    chain: undefined,
    async writeContract({ functionName }: { functionName: string }) {
      if (failNext.delete(functionName)) throw new Error(`${functionName}: the node is gone`);
      sent.push(functionName);
      if (functionName === "approve") allowance = 2n ** 255n;
      return `0x${randomBytes(32).toString("hex")}` as Hash;
    },
  };
  const connection = {
    publicClient,
    fundingWallet,
    escrowAddress: `0x${"e5".repeat(20)}` as Address,
    chainId: 31337,
    deployBlock: 0n,
  } as unknown as ChainConnection;
  return { connection, sent, fail: (functionName: string) => failNext.add(functionName) };
}

const provider: PaymentProvider = {
  name: "sandbox",
  createCheckout: async () => {
    throw new Error("not used: checkouts are opened by the test");
  },
};

describeEachEngine("CardTopups", (engine) => {
  const secret = randomBytes(32);
  let db: Database;
  let chain: ReturnType<typeof fakeChain>;
  let nowMs: number;
  const closeAfter: Database[] = [];
  const logged: string[] = [];

  /** A gateway replica's card top-ups on `on`. */
  const replica = async (on: Database, fundingLeaseMs?: number) =>
    new CardTopups({
      ledger: await Ledger.open(on),
      provider,
      secret,
      chain: chain.connection,
      log: (message) => logged.push(message),
      now: () => nowMs,
      ...(fundingLeaseMs === undefined ? {} : { fundingLeaseMs }),
    });

  /** Another handle on the same database: a second pool on PostgreSQL; on SQLite, whose one process writes, the same. */
  const secondHandle = (): Database => {
    if (engine.name === "sqlite") return db;
    const second = new PostgresDatabase(createPostgresPool({ url: engine.lastUrl() }));
    closeAfter.push(second);
    return second;
  };

  const notification = (checkoutId: string, outcome: CardNotification["outcome"] = "paid") => {
    const body = JSON.stringify({
      eventId: `evt_${checkoutId}`,
      checkoutId,
      outcome,
      amountMicros: AMOUNT_MICROS.toString(),
      createdAtSec: Math.floor(nowMs / 1000),
    } satisfies CardNotification);
    return { body, signature: signNotification(secret, body, Math.floor(nowMs / 1000)) };
  };

  beforeEach(async () => {
    db = await engine.open();
    chain = fakeChain();
    nowMs = Date.now();
    logged.length = 0;
    const ledger = await Ledger.open(db);
    await ledger.ensureAccount({ id: "ada", kind: "user", name: "Ada" });
    await new CheckoutsStore(db).insertCreated({
      id: "co1",
      provider: "sandbox",
      accountId: "ada",
      address: ADDRESS,
      amountMicros: AMOUNT_MICROS,
      nowMs,
      expiresAtMs: nowMs + 60_000,
    });
  });

  afterEach(async () => {
    for (const handle of closeAfter.splice(0)) await handle.close();
  });

  it("funds a paid checkout once: mint, approve, depositFor, then funded", async () => {
    const topups = await replica(db);
    const { body, signature } = notification("co1");
    const result = await topups.receive(body, signature);
    expect(result.ok && result.duplicate).to.equal(false);
    expect(result.ok && result.checkout.status).to.equal("funded");
    expect(chain.sent).to.deep.equal(["mint", "approve", "depositFor"]);
    const again = await topups.receive(body, signature);
    expect(again.ok && again.duplicate).to.equal(true);
    expect(chain.sent).to.have.length(3);
  });

  it("funds a checkout completed concurrently through two database handles once (two replicas, one notification)", async () => {
    const first = await replica(db);
    const second = await replica(secondHandle());
    const { body, signature } = notification("co1");
    // The provider delivers the notification to both replicas, several times, at once.
    const results = await Promise.all([first, second, first, second].map((topups) => topups.receive(body, signature)));
    for (const result of results) expect(result.ok).to.equal(true);
    const firsts = results.filter((result) => result.ok && !result.duplicate);
    expect(firsts, "exactly one delivery moved the checkout").to.have.length(1);
    expect(chain.sent.filter((f) => f === "mint")).to.have.length(1);
    expect(
      chain.sent.filter((f) => f === "depositFor"),
      "one deposit: the indexer credits the ledger once",
    ).to.have.length(1);
    const checkout = await new CheckoutsStore(db).get("co1");
    expect(checkout).to.include({ status: "funded" });
  });

  it("settles a checkout paid on one replica and abandoned on another exactly one way", async () => {
    const first = await replica(db);
    const second = await replica(secondHandle());
    const paid = notification("co1", "paid");
    const expired = notification("co1", "expired");
    const [a, b] = await Promise.all([first.receive(paid.body, paid.signature), second.receive(expired.body, expired.signature)]);
    expect([a, b].filter((result) => result.ok && !result.duplicate)).to.have.length(1);
    const checkout = (await new CheckoutsStore(db).get("co1"))!;
    expect(["funded", "abandoned"]).to.include(checkout.status);
    expect(chain.sent.filter((f) => f === "depositFor")).to.have.length(checkout.status === "funded" ? 1 : 0);
  });

  it("lets another replica resume a failed funding only once the first has gone quiet for the lease, never minting twice", async () => {
    const leaseMs = 60_000;
    const first = await replica(db, leaseMs);
    const second = await replica(secondHandle(), leaseMs);
    const { body, signature } = notification("co1");
    chain.fail("depositFor");
    const failed = await first.receive(body, signature);
    expect(failed.ok && failed.checkout.status).to.equal("paid");
    expect(chain.sent).to.deep.equal(["mint", "approve"]);

    // A redelivery to the other replica while the first may still be at it changes nothing.
    const early = await second.receive(body, signature);
    expect(early.ok && early.duplicate).to.equal(true);
    expect(early.ok && early.checkout.status).to.equal("paid");
    expect(chain.sent).to.deep.equal(["mint", "approve"]);

    // Once the lease ran out, it resumes: the mint it finds recorded is not sent again.
    nowMs += leaseMs + 1_000;
    const resumed = await second.receive(body, signature);
    expect(resumed.ok && resumed.checkout.status).to.equal("funded");
    expect(chain.sent).to.deep.equal(["mint", "approve", "depositFor"]);
  });

  it("resumes its own failed funding at once on the next notification", async () => {
    const topups = await replica(db);
    const { body, signature } = notification("co1");
    chain.fail("depositFor");
    expect((await topups.receive(body, signature)).ok).to.equal(true);
    const resumed = await topups.receive(body, signature);
    expect(resumed.ok && resumed.checkout.status).to.equal("funded");
    expect(chain.sent).to.deep.equal(["mint", "approve", "depositFor"]);
  });

  it("abandons a lapsed checkout once read, and funds nothing for a late payment", async () => {
    const topups = await replica(db);
    nowMs += 60_000;
    expect(await topups.get("ada", "co1")).to.include({ status: "abandoned" });
    expect(await topups.get("bob", "co1")).to.equal(undefined);
    const { body, signature } = notification("co1");
    const late = await topups.receive(body, signature);
    expect(late.ok && late.duplicate).to.equal(true);
    expect(late.ok && late.checkout.status).to.equal("abandoned");
    expect(chain.sent).to.deep.equal([]);
  });
});
