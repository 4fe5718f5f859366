import { expect } from "chai";
import hre from "hardhat";
import { linkAddress } from "../../server/settlement/addresses";
import { settlementStores } from "../../server/settlement/store";
import { DeepReorgError, DepositIndexer, type DepositIndexerParameters } from "../../server/settlement/indexer";
import type { Db } from "../../server/db/db";
import { assertBalanced, findViolations } from "../../server/ledger/invariants";
import type { Ledger } from "../../server/ledger/ledger";
import { USDC, USERS, startLocalChain, waitFor, type LocalChain, type UserName } from "../helpers/chain";
import { makeLedger, makeTempDir } from "../helpers/ledger";

const accountOf = (user: UserName) => `user:${user}`;

describe("server/settlement/indexer: DepositIndexer", function () {
  let chain: LocalChain;
  let untouched: string;
  let clean: string;
  let db: Db;
  let ledger: Ledger;
  let indexers: DepositIndexer[];
  let logged: string[];

  /** An indexer over the test chain and the current ledger; stopped after the test. */
  function makeIndexer(overrides: Partial<DepositIndexerParameters> = {}): DepositIndexer {
    const indexer = new DepositIndexer({
      ledger,
      publicClient: chain.publicClient,
      escrowAddress: chain.deployment.escrow,
      deployBlock: chain.deployment.deployBlock,
      confirmations: 0,
      log: (message) => logged.push(message),
      ...overrides,
    });
    indexers.push(indexer);
    return indexer;
  }

  /** Creates the user's account and links its wallet address. */
  async function linkUser(user: UserName): Promise<void> {
    ledger.ensureAccount({ id: accountOf(user), kind: "user", name: user });
    const result = await linkAddress(ledger, { accountId: accountOf(user), address: chain.address(user) });
    expect(
      result.ok,
      JSON.stringify(result, (_k, v) => (typeof v === "bigint" ? `${v}` : v)),
    ).to.equal(true);
  }

  const available = (user: UserName) => ledger.balance(accountOf(user)).availableMicros;

  /** The books balance, and every linked user's ledger balance is exactly its escrow balance on-chain. */
  async function expectBooksMatchChain(): Promise<void> {
    assertBalanced(db);
    for (const user of USERS) {
      if (!ledger.getAccount(accountOf(user))) continue;
      const onChain = await chain.escrowBalance(chain.address(user));
      expect(available(user), `${user}: ledger vs escrow`).to.equal(onChain);
    }
  }

  before(async function () {
    this.timeout(60_000);
    untouched = (await hre.network.provider.request({ method: "evm_snapshot", params: [] })) as string;
    chain = await startLocalChain();
    clean = await chain.snapshot();
  });

  after(async () => {
    // Leave the shared in-process chain as this file found it.
    await hre.network.provider.request({ method: "evm_revert", params: [untouched] });
  });

  beforeEach(async () => {
    ({ db, ledger } = makeLedger());
    indexers = [];
    logged = [];
    await linkUser("alice");
    await linkUser("bob");
  });

  afterEach(async () => {
    for (const indexer of indexers) await indexer.stop();
    await chain.setAutomine(true);
    await chain.revert(clean);
    clean = await chain.snapshot();
    if (db.open) {
      ledger.commit.flush();
      db.close();
    }
  });

  it("starts from the deploy block and credits a deposit after `confirmations` blocks, not before", async () => {
    const indexer = makeIndexer({ confirmations: 3 });
    const hash = await chain.deposit("alice", 5n * USDC);
    const { blockNumber } = await chain.receipt(hash);

    const first = await indexer.poll();
    expect(first.fromBlock).to.equal(chain.deployment.deployBlock);
    expect(first.toBlock).to.equal(blockNumber - 3n);
    expect(first.credited).to.equal(0);
    await chain.mine(2);
    expect((await indexer.poll()).credited).to.equal(0);
    expect(available("alice")).to.equal(0n);

    await chain.mine(1);
    const third = await indexer.poll();
    expect(third).to.deep.include({ toBlock: blockNumber, recorded: 1, credited: 1 });
    expect(available("alice")).to.equal(5n * USDC);
    const entry = db.prepare("SELECT kind, deposit_tx_hash, deposit_log_index, memo FROM entries WHERE kind = 'deposit'").get();
    const log = (await chain.receipt(hash)).logs.find((l) => l.address.toLowerCase() === chain.deployment.escrow.toLowerCase())!;
    expect(entry).to.deep.equal({
      kind: "deposit",
      deposit_tx_hash: hash.toLowerCase(),
      deposit_log_index: BigInt(log.logIndex),
      memo: `${hash}:${log.logIndex}`,
    });
    await expectBooksMatchChain();
  });

  it("credits two deposits mined in one block, each by its own log", async () => {
    const indexer = makeIndexer();
    await chain.setAutomine(false);
    const hashes = [
      await chain.deposit("alice", 5n * USDC),
      await chain.deposit("bob", 7n * USDC),
      await chain.deposit("alice", 2n * USDC),
    ];
    await chain.mine(1);
    await chain.setAutomine(true);
    const receipts = await Promise.all(hashes.map((hash) => chain.receipt(hash)));
    expect(new Set(receipts.map((r) => r.blockNumber)).size).to.equal(1);

    expect((await indexer.poll()).credited).to.equal(3);
    expect(available("alice")).to.equal(7n * USDC);
    expect(available("bob")).to.equal(7n * USDC);
    await expectBooksMatchChain();
  });

  it("credits depositFor to the credited account, not to the payer, and records the payer", async () => {
    const indexer = makeIndexer();
    await chain.depositFor("bob", chain.address("alice"), 3n * USDC);
    await indexer.poll();
    expect(available("alice")).to.equal(3n * USDC);
    expect(available("bob")).to.equal(0n);
    const row = db.prepare("SELECT address, sender, account_id FROM chain_deposits").get();
    expect(row).to.deep.equal({
      address: chain.address("alice").toLowerCase(),
      sender: chain.address("bob").toLowerCase(),
      account_id: accountOf("alice"),
    });
    await expectBooksMatchChain();
  });

  it("reads a long range in chunks of batchBlocks, each chunk committed with its progress", async () => {
    const ranges: [bigint, bigint][] = [];
    const { publicClient } = chain;
    const counting = {
      ...publicClient,
      getLogs: ((args: { fromBlock: bigint; toBlock: bigint }) => {
        ranges.push([args.fromBlock, args.toBlock]);
        if (ranges.length === 3) return Promise.reject(new Error("injected: the node dropped the third request"));
        return publicClient.getLogs(args as never);
      }) as typeof publicClient.getLogs,
    };
    // Start the indexer at the first deposit's block, so the chunks line up with the deposits: two per chunk.
    const from = (await chain.head()) + 1n;
    const indexer = makeIndexer({ batchBlocks: 2, publicClient: counting, deployBlock: from });
    for (let i = 0; i < 5; i++) await chain.deposit(i % 2 ? "bob" : "alice", BigInt(i + 1) * USDC);
    const head = await chain.head();
    expect(head).to.equal(from + 4n);

    // Chunks [from, from+1] and [from+2, from+3] commit; the third read fails and the poll throws.
    const failed = await indexer.poll().catch((error: unknown) => error);
    expect(failed)
      .to.be.instanceOf(Error)
      .with.property("message")
      .that.matches(/third request/);
    expect(indexer.lastIndexed()?.block).to.equal(from + 3n);
    expect(available("alice")).to.equal(4n * USDC); // 1 + 3
    expect(available("bob")).to.equal(6n * USDC); // 2 + 4
    assertBalanced(db);

    const result = await indexer.poll();
    expect(result).to.deep.include({ fromBlock: from + 4n, toBlock: head, recorded: 1, credited: 1 });
    // Two blocks per read; the failed chunk is read again, nothing before it is.
    expect(ranges).to.deep.equal([
      [from, from + 1n],
      [from + 2n, from + 3n],
      [from + 4n, from + 4n],
      [from + 4n, from + 4n],
    ]);
    expect(available("alice")).to.equal(9n * USDC);
    expect(available("bob")).to.equal(6n * USDC);
    await expectBooksMatchChain();
  });

  it("credits the same logs once, however often they are read", async () => {
    const indexer = makeIndexer();
    await chain.deposit("alice", 5n * USDC);
    const [a, b] = await Promise.all([indexer.poll(), indexer.poll()]);
    expect(a.credited + b.credited).to.equal(1);

    // Progress lost (or a second indexer under another name): the logs are read again, nothing is credited.
    db.prepare("DELETE FROM indexer_state").run();
    const reread = await indexer.poll();
    expect(reread.fromBlock).to.equal(chain.deployment.deployBlock);
    expect(reread).to.deep.include({ recorded: 0, credited: 0 });
    expect((await makeIndexer({ name: "deposits:second" }).poll()).credited).to.equal(0);
    expect(available("alice")).to.equal(5n * USDC);
    await expectBooksMatchChain();
  });

  it("resumes from its saved block after a restart on the same database file, without re-crediting", async () => {
    const dir = makeTempDir();
    try {
      db.close();
      ({ db, ledger } = makeLedger({ file: dir.file("gateway.db") }));
      await linkUser("alice");
      await chain.deposit("alice", 5n * USDC);
      const before = await makeIndexer().poll();
      expect(before.credited).to.equal(1);
      db.close();

      await chain.deposit("alice", 4n * USDC);
      ({ db, ledger } = makeLedger({ file: dir.file("gateway.db") }));
      const after = await makeIndexer().poll();
      expect(after.fromBlock).to.equal(before.toBlock + 1n);
      expect(after).to.deep.include({ recorded: 1, credited: 1 });
      expect(available("alice")).to.equal(9n * USDC);
      await expectBooksMatchChain();
    } finally {
      if (db.open) db.close();
      dir.remove();
    }
  });

  it("holds a deposit to an unlinked address and credits it in the transaction that links the address", async () => {
    const indexer = makeIndexer();
    await chain.deposit("carol", 6n * USDC);
    expect(await indexer.poll()).to.deep.include({ recorded: 1, credited: 0 });
    expect(db.prepare("SELECT account_id, entry_id FROM chain_deposits").get()).to.deep.equal({ account_id: null, entry_id: null });
    expect(logged.join("\n")).to.match(/no account has linked/);
    assertBalanced(db);

    ledger.ensureAccount({ id: accountOf("carol"), kind: "user", name: "carol" });
    const taken = await linkAddress(ledger, { accountId: accountOf("carol"), address: chain.address("alice") });
    expect(taken).to.deep.equal({ ok: false, reason: "address_taken", accountId: accountOf("alice") });
    const linked = await linkAddress(ledger, { accountId: accountOf("carol"), address: chain.address("carol") });
    expect(linked).to.deep.include({ ok: true, created: true, creditedDeposits: 1, creditedMicros: 6n * USDC });
    expect(available("carol")).to.equal(6n * USDC);
    const again = await linkAddress(ledger, {
      accountId: accountOf("carol"),
      address: chain.address("carol").toUpperCase().replace("0X", "0x"),
    });
    expect(again).to.deep.include({ ok: true, created: false, creditedDeposits: 0 });
    expect(settlementStores(db).addresses.addressesOf(accountOf("carol"))).to.deep.equal([chain.address("carol").toLowerCase()]);

    await chain.deposit("carol", 1n * USDC);
    expect(await indexer.poll()).to.deep.include({ recorded: 1, credited: 1 });
    expect(available("carol")).to.equal(7n * USDC);
    await expectBooksMatchChain();
  });

  it("refuses links that cannot hold a deposit", async () => {
    expect(await linkAddress(ledger, { accountId: accountOf("alice"), address: "0x1234" })).to.deep.equal({
      ok: false,
      reason: "invalid_address",
    });
    expect(await linkAddress(ledger, { accountId: "user:nobody", address: chain.address("carol") })).to.deep.equal({
      ok: false,
      reason: "unknown_account",
    });
    expect(await linkAddress(ledger, { accountId: "platform", address: chain.address("carol") })).to.deep.equal({
      ok: false,
      reason: "account_cannot_deposit",
    });
  });

  it("credits only what survived a reorg shallower than the confirmation depth", async () => {
    const indexer = makeIndexer({ confirmations: 3 });
    const fork = await chain.snapshot();
    await chain.deposit("alice", 5n * USDC);
    await chain.mine(1);
    expect((await indexer.poll()).credited).to.equal(0);

    await chain.revert(fork); // alice's deposit is gone; bob's takes its height
    const hash = await chain.deposit("bob", 7n * USDC);
    await chain.mine(3);
    const result = await indexer.poll();
    expect(result).to.deep.include({ toBlock: (await chain.receipt(hash)).blockNumber, credited: 1 });
    expect(available("alice")).to.equal(0n);
    expect(available("bob")).to.equal(7n * USDC);
    await chain.mine(4);
    expect((await indexer.poll()).credited).to.equal(0);
    await expectBooksMatchChain();
  });

  it("detects a reorg deeper than the depth and refuses to go on", async () => {
    const indexer = makeIndexer({ confirmations: 1 });
    const fork = await chain.snapshot();
    await chain.deposit("alice", 5n * USDC);
    await chain.mine(1);
    expect((await indexer.poll()).credited).to.equal(1);
    const indexed = indexer.lastIndexed()!;

    await chain.revert(fork);
    // The chain is now shorter than what was indexed.
    const shorter = await indexer.poll().catch((error: unknown) => error);
    expect(shorter).to.be.instanceOf(DeepReorgError).and.include({ blockNumber: indexed.block, chainHash: undefined });

    await chain.deposit("bob", 7n * USDC);
    await chain.mine(3);
    const replaced = await indexer.poll().catch((error: unknown) => error);
    expect(replaced).to.be.instanceOf(DeepReorgError).and.include({ blockNumber: indexed.block, indexedHash: indexed.hash });
    expect((replaced as DeepReorgError).chainHash)
      .to.match(/^0x[0-9a-f]{64}$/)
      .and.not.equal(indexed.hash);
    expect(available("bob")).to.equal(0n);

    indexer.start(5);
    await indexer.whenStopped();
    expect(indexer.running).to.equal(false);
    expect(indexer.fatalError).to.be.instanceOf(DeepReorgError);
    expect(logged.join("\n")).to.match(/stopped, no further deposits will be credited: deep reorg/);
    expect(available("bob")).to.equal(0n);
    assertBalanced(db);
  });

  it("keeps polling through RPC failures, backing off, and credits once the node answers", async () => {
    const indexer = makeIndexer({ maxBackoffMs: 40 });
    await chain.deposit("alice", 5n * USDC);
    chain.failNextRequests(6);
    indexer.start(5);
    await waitFor(() => available("alice") > 0n, 5_000, "the deposit to be credited");
    expect(chain.failedRequests).to.be.at.least(6);
    expect(logged.filter((line) => /poll failed/.test(line))).to.have.length(6);
    expect(logged.join("\n")).to.match(/retrying in 40 ms/);
    expect(indexer.running).to.equal(true);
    await chain.deposit("alice", 1n * USDC);
    await waitFor(() => available("alice") === 6n * USDC, 5_000, "the second deposit");
    await indexer.stop();
    expect(indexer.running).to.equal(false);
    expect(indexer.fatalError).to.equal(undefined);
    await expectBooksMatchChain();
  });

  it("refuses settings it cannot work with", () => {
    expect(() => makeIndexer({ confirmations: -1 })).to.throw(RangeError, /confirmations/);
    expect(() => makeIndexer({ confirmations: 1.5 })).to.throw(RangeError, /confirmations/);
    expect(() => makeIndexer({ batchBlocks: 0 })).to.throw(RangeError, /batchBlocks/);
    expect(() => makeIndexer({ escrowAddress: "0x12" })).to.throw(RangeError, /escrowAddress/);
    const indexer = makeIndexer();
    expect(() => indexer.start(0)).to.throw(RangeError, /intervalMs/);
    indexer.start(50);
    expect(() => indexer.start(50)).to.throw(/already running/);
  });

  describe("the chain deposit invariants", () => {
    beforeEach(async () => {
      await chain.deposit("alice", 5n * USDC);
      await chain.deposit("carol", 2n * USDC);
      await makeIndexer().poll();
      expect(findViolations(db)).to.deep.equal([]);
    });

    it("catch a second entry for the same log (a double credit), which the database refuses first", () => {
      const log = db
        .prepare("SELECT deposit_tx_hash AS txHash, deposit_log_index AS logIndex FROM entries WHERE deposit_tx_hash IS NOT NULL")
        .get() as {
        txHash: string;
        logIndex: bigint;
      };
      const again = () => ledger.creditChainDeposit(accountOf("alice"), 5n * USDC, { txHash: log.txHash, logIndex: Number(log.logIndex) });
      expect(again).to.throw(/UNIQUE constraint failed/);
      // The second wall: books where the index was lost (a tool, a restored file) still say what is wrong.
      db.exec("DROP INDEX entries_one_credit_per_deposit");
      again();
      expect(findViolations(db).map((v) => v.rule)).to.deep.equal([
        "every deposit entry for a chain log is the one its chain deposit records",
      ]);
    });

    it("catch a credited amount that differs from the log's", () => {
      db.prepare("UPDATE chain_deposits SET amount = amount + 1 WHERE account_id IS NOT NULL").run();
      expect(findViolations(db).map((v) => v.rule)).to.deep.equal([
        "a credited chain deposit is one deposit entry paying its amount into its account",
      ]);
    });

    it("catch a deposit left waiting after its address was linked", () => {
      ledger.ensureAccount({ id: accountOf("carol"), kind: "user", name: "carol" });
      db.prepare("INSERT INTO account_addresses (address, account_id, created_at) VALUES (?, ?, 0)").run(
        chain.address("carol").toLowerCase(),
        accountOf("carol"),
      );
      expect(findViolations(db).map((v) => v.rule)).to.deep.equal([
        "a chain deposit is credited to its address's account, and waits only while the address is unlinked",
      ]);
    });
  });
});
