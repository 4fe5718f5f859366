import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { expect } from "chai";
import hre from "hardhat";
import { linkAddress } from "../../server/settlement/addresses";
import { settlementStores } from "../../server/settlement/store";
import { DeepReorgError, DepositIndexer, type DepositIndexerParameters } from "../../server/settlement/indexer";
import { type Database, isUniqueViolation } from "../../server/db/sql";
import { PostgresDatabase } from "../../server/db/postgres/database";
import { createPostgresPool } from "../../server/db/postgres/pool";
import { assertBalanced, findViolations } from "../../server/ledger/invariants";
import { Ledger } from "../../server/ledger/ledger";
import { USDC, USERS, startLocalChain, type LocalChain, type UserName } from "../helpers/chain";
import { describeEachEngine } from "../helpers/engines";

const accountOf = (user: UserName) => `user:${user}`;

/** Polls `condition` every 5 ms until it holds; throws after `timeoutMs`. */
async function waitUntil(condition: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describeEachEngine("server/settlement/indexer", (engine) => {
  describe("DepositIndexer", function () {
    let chain: LocalChain;
    let untouched: string;
    let clean: string;
    let db: Database;
    let ledger: Ledger;
    let indexers: DepositIndexer[];
    let logged: string[];
    /** Databases a test opened beside the suite's (a restart, a second replica); closed after it. */
    let extra: Database[];

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

    /** A second connection to the suite's PostgreSQL database, as another gateway replica has. */
    async function secondReplica(): Promise<{ db: Database; ledger: Ledger }> {
      const other = new PostgresDatabase(createPostgresPool({ url: engine.lastUrl(), max: 5 }));
      extra.push(other);
      return { db: other, ledger: await Ledger.open(other) };
    }

    /** Creates the user's account and links its wallet address. */
    async function linkUser(user: UserName): Promise<void> {
      await ledger.ensureAccount({ id: accountOf(user), kind: "user", name: user });
      const result = await linkAddress(ledger, { accountId: accountOf(user), address: chain.address(user) });
      expect(
        result.ok,
        JSON.stringify(result, (_k, v) => (typeof v === "bigint" ? `${v}` : v)),
      ).to.equal(true);
    }

    const available = async (user: UserName) => (await ledger.balance(accountOf(user))).availableMicros;

    /** The books balance, and every linked user's ledger balance is exactly its escrow balance on-chain. */
    async function expectBooksMatchChain(): Promise<void> {
      await assertBalanced(db);
      for (const user of USERS) {
        if (!(await ledger.getAccount(accountOf(user)))) continue;
        const onChain = await chain.escrowBalance(chain.address(user));
        expect(await available(user), `${user}: ledger vs escrow`).to.equal(onChain);
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
      db = await engine.open();
      ledger = await Ledger.open(db);
      indexers = [];
      logged = [];
      extra = [];
      await linkUser("alice");
      await linkUser("bob");
    });

    afterEach(async () => {
      for (const indexer of indexers) await indexer.stop();
      // A test may have closed one already (a restart).
      for (const other of extra) await other.close().catch(() => {});
      await chain.setAutomine(true);
      await chain.revert(clean);
      clean = await chain.snapshot();
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
      expect(await available("alice")).to.equal(0n);

      await chain.mine(1);
      const third = await indexer.poll();
      expect(third).to.deep.include({ toBlock: blockNumber, recorded: 1, credited: 1 });
      expect(await available("alice")).to.equal(5n * USDC);
      const entry = await db.one("SELECT kind, deposit_tx_hash, deposit_log_index, memo FROM entries WHERE kind = 'deposit'");
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
      expect(await available("alice")).to.equal(7n * USDC);
      expect(await available("bob")).to.equal(7n * USDC);
      await expectBooksMatchChain();
    });

    it("credits depositFor to the credited account, not to the payer, and records the payer", async () => {
      const indexer = makeIndexer();
      await chain.depositFor("bob", chain.address("alice"), 3n * USDC);
      await indexer.poll();
      expect(await available("alice")).to.equal(3n * USDC);
      expect(await available("bob")).to.equal(0n);
      const row = await db.one("SELECT address, sender, account_id FROM chain_deposits");
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
      expect((await indexer.lastIndexed())?.block).to.equal(from + 3n);
      expect(await available("alice")).to.equal(4n * USDC); // 1 + 3
      expect(await available("bob")).to.equal(6n * USDC); // 2 + 4
      await assertBalanced(db);

      const result = await indexer.poll();
      expect(result).to.deep.include({ fromBlock: from + 4n, toBlock: head, recorded: 1, credited: 1 });
      // Two blocks per read; the failed chunk is read again, nothing before it is.
      expect(ranges).to.deep.equal([
        [from, from + 1n],
        [from + 2n, from + 3n],
        [from + 4n, from + 4n],
        [from + 4n, from + 4n],
      ]);
      expect(await available("alice")).to.equal(9n * USDC);
      expect(await available("bob")).to.equal(6n * USDC);
      await expectBooksMatchChain();
    });

    it("credits the same logs once, however often they are read", async () => {
      const indexer = makeIndexer();
      await chain.deposit("alice", 5n * USDC);
      const [a, b] = await Promise.all([indexer.poll(), indexer.poll()]);
      expect(a.credited + b.credited).to.equal(1);

      // Progress lost (or a second indexer under another name): the logs are read again, nothing is credited.
      await db.run("DELETE FROM indexer_state");
      const reread = await indexer.poll();
      expect(reread.fromBlock).to.equal(chain.deployment.deployBlock);
      expect(reread).to.deep.include({ recorded: 0, credited: 0 });
      expect((await makeIndexer({ name: "deposits:second" }).poll()).credited).to.equal(0);
      expect(await available("alice")).to.equal(5n * USDC);
      await expectBooksMatchChain();
    });

    it("resumes from its saved block after a restart on the same database, without re-crediting", async () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "indexer-test-"));
      /** The same books opened again, as a restarted process opens them. */
      const reopen = async (): Promise<Database> => {
        if (engine.name === "sqlite") return engine.open({ file: path.join(dir, "gateway.db") });
        const again = new PostgresDatabase(createPostgresPool({ url: engine.lastUrl(), max: 5 }));
        extra.push(again);
        return again;
      };
      try {
        if (engine.name === "sqlite") {
          db = await reopen();
          ledger = await Ledger.open(db);
          await linkUser("alice");
        }
        await chain.deposit("alice", 5n * USDC);
        const before = await makeIndexer().poll();
        expect(before.credited).to.equal(1);
        await db.close();

        await chain.deposit("alice", 4n * USDC);
        db = await reopen();
        ledger = await Ledger.open(db);
        const after = await makeIndexer().poll();
        expect(after.fromBlock).to.equal(before.toBlock + 1n);
        expect(after).to.deep.include({ recorded: 1, credited: 1 });
        expect(await available("alice")).to.equal(9n * USDC);
        await expectBooksMatchChain();
      } finally {
        await db.close();
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });

    it("holds a deposit to an unlinked address and credits it in the transaction that links the address", async () => {
      const indexer = makeIndexer();
      await chain.deposit("carol", 6n * USDC);
      expect(await indexer.poll()).to.deep.include({ recorded: 1, credited: 0 });
      expect(await db.one("SELECT account_id, entry_id FROM chain_deposits")).to.deep.equal({ account_id: null, entry_id: null });
      expect(logged.join("\n")).to.match(/no account has linked/);
      await assertBalanced(db);

      await ledger.ensureAccount({ id: accountOf("carol"), kind: "user", name: "carol" });
      const taken = await linkAddress(ledger, { accountId: accountOf("carol"), address: chain.address("alice") });
      expect(taken).to.deep.equal({ ok: false, reason: "address_taken", accountId: accountOf("alice") });
      const linked = await linkAddress(ledger, { accountId: accountOf("carol"), address: chain.address("carol") });
      expect(linked).to.deep.include({ ok: true, created: true, creditedDeposits: 1, creditedMicros: 6n * USDC });
      expect(await available("carol")).to.equal(6n * USDC);
      const again = await linkAddress(ledger, {
        accountId: accountOf("carol"),
        address: chain.address("carol").toUpperCase().replace("0X", "0x"),
      });
      expect(again).to.deep.include({ ok: true, created: false, creditedDeposits: 0 });
      expect(await settlementStores(db).addresses.addressesOf(accountOf("carol"))).to.deep.equal([chain.address("carol").toLowerCase()]);

      await chain.deposit("carol", 1n * USDC);
      expect(await indexer.poll()).to.deep.include({ recorded: 1, credited: 1 });
      expect(await available("carol")).to.equal(7n * USDC);
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
      expect(await available("alice")).to.equal(0n);
      expect(await available("bob")).to.equal(7n * USDC);
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
      const indexed = (await indexer.lastIndexed())!;

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
      expect(await available("bob")).to.equal(0n);

      indexer.start(5);
      await indexer.whenStopped();
      expect(indexer.running).to.equal(false);
      expect(indexer.fatalError).to.be.instanceOf(DeepReorgError);
      expect(logged.join("\n")).to.match(/stopped, no further deposits will be credited: deep reorg/);
      expect(await available("bob")).to.equal(0n);
      await assertBalanced(db);
    });

    it("keeps polling through RPC failures, backing off, and credits once the node answers", async () => {
      const indexer = makeIndexer({ maxBackoffMs: 40 });
      await chain.deposit("alice", 5n * USDC);
      chain.failNextRequests(6);
      indexer.start(5);
      await waitUntil(async () => (await available("alice")) > 0n, 5_000, "the deposit to be credited");
      expect(chain.failedRequests).to.be.at.least(6);
      expect(logged.filter((line) => /poll failed/.test(line))).to.have.length(6);
      expect(logged.join("\n")).to.match(/retrying in 40 ms/);
      expect(indexer.running).to.equal(true);
      await chain.deposit("alice", 1n * USDC);
      await waitUntil(async () => (await available("alice")) === 6n * USDC, 5_000, "the second deposit");
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

    describe("on two replicas sharing one PostgreSQL database", () => {
      beforeEach(function () {
        // SQLite has one gateway process: its group commit is the only writer, so there is no second replica.
        if (engine.name !== "postgres") this.skip();
      });

      it("credits each deposit once when two indexers poll at the same time, from the very first chunk on", async () => {
        const other = await secondReplica();
        const first = makeIndexer();
        const second = new DepositIndexer({
          ledger: other.ledger,
          publicClient: chain.publicClient,
          escrowAddress: chain.deployment.escrow,
          deployBlock: chain.deployment.deployBlock,
          confirmations: 0,
          log: (message) => logged.push(`second: ${message}`),
        });
        indexers.push(second);
        // Before either has finished a chunk there is no progress row to wait on.
        await chain.deposit("alice", 5n * USDC);
        await chain.deposit("bob", 7n * USDC);
        const [a, b] = await Promise.all([first.poll(), second.poll()]);
        expect(a.credited + b.credited).to.equal(2);
        for (let round = 1; round <= 4; round++) {
          await chain.deposit(round % 2 ? "alice" : "bob", BigInt(round) * USDC);
          const [a, b] = await Promise.all([first.poll(), second.poll()]);
          expect(a.credited + b.credited, `round ${round}`).to.equal(1);
        }
        expect(await db.value("SELECT COUNT(*) FROM chain_deposits")).to.equal(6n);
        expect(await db.value("SELECT COUNT(*) FROM entries WHERE kind = 'deposit'")).to.equal(6n);
        expect(await findViolations(db)).to.deep.equal([]);
        await expectBooksMatchChain();
        expect(first.fatalError).to.equal(undefined);
        expect(second.fatalError).to.equal(undefined);
      });

      it("credits a deposit to an address linked on another replica while the chunk that records it waits", async () => {
        const other = await secondReplica();
        const indexer = makeIndexer();
        // A first chunk, so the indexer has a progress row to lock.
        await indexer.poll();
        await ledger.ensureAccount({ id: accountOf("carol"), kind: "user", name: "carol" });
        await chain.deposit("carol", 6n * USDC);

        let linked!: () => void;
        const hasLinked = new Promise<void>((resolve) => (linked = resolve));
        let release!: () => void;
        const gate = new Promise<void>((resolve) => (release = resolve));
        // The link's transaction stays open (uncommitted) until the gate opens.
        const linking = other.db.transaction(async (tx) => {
          const result = await linkAddress(
            other.ledger,
            { accountId: accountOf("carol"), address: chain.address("carol") },
            settlementStores(other.db),
            tx,
          );
          linked();
          await gate;
          return result;
        });
        await hasLinked;
        const polling = indexer.poll();
        try {
          // The chunk's transaction waits for the link's lock rather than reading that carol's address has no owner.
          await waitUntil(
            async () =>
              Number(
                await other.db.value<bigint>(
                  "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
                ),
              ) > 0,
            4_000,
            "the chunk to wait for the link's lock",
          );
        } finally {
          release();
        }
        const [link, poll] = await Promise.all([linking, polling]);
        expect(link).to.deep.include({ ok: true, created: true, creditedDeposits: 0 });
        expect(poll).to.deep.include({ recorded: 1, credited: 1 });
        expect(await available("carol")).to.equal(6n * USDC);
        expect(await findViolations(db)).to.deep.equal([]);
        await expectBooksMatchChain();
      });

      it("lets one of two links of one address win, and tells the other who has it", async () => {
        const other = await secondReplica();
        await ledger.ensureAccount({ id: accountOf("carol"), kind: "user", name: "carol" });
        await ledger.ensureAccount({ id: "user:dave", kind: "user", name: "dave" });
        await chain.deposit("carol", 3n * USDC);
        // Carol's deposit recorded, waiting for her address; then no progress row (as before an indexer's
        // first chunk), so nothing orders the two links but the address's key.
        await makeIndexer().poll();
        await db.run("DELETE FROM indexer_state");
        const results = await Promise.all([
          linkAddress(ledger, { accountId: accountOf("carol"), address: chain.address("carol") }),
          linkAddress(other.ledger, { accountId: "user:dave", address: chain.address("carol") }),
        ]);
        const winners = results.filter((r) => r.ok);
        expect(winners).to.have.length(1);
        const winner = results[0].ok ? accountOf("carol") : "user:dave";
        expect(results.find((r) => !r.ok)).to.deep.equal({ ok: false, reason: "address_taken", accountId: winner });
        expect(winners[0]).to.deep.include({ creditedDeposits: 1, creditedMicros: 3n * USDC });
        expect(await findViolations(db)).to.deep.equal([]);
      });
    });

    describe("the chain deposit invariants", () => {
      beforeEach(async () => {
        await chain.deposit("alice", 5n * USDC);
        await chain.deposit("carol", 2n * USDC);
        await makeIndexer().poll();
        expect(await findViolations(db)).to.deep.equal([]);
      });

      it("catch a second entry for the same log (a double credit), which the database refuses first", async () => {
        const log = (await db.one<{ txHash: string; logIndex: bigint }>(
          'SELECT deposit_tx_hash AS "txHash", deposit_log_index AS "logIndex" FROM entries WHERE deposit_tx_hash IS NOT NULL',
        ))!;
        const again = () =>
          ledger.creditChainDeposit(accountOf("alice"), 5n * USDC, { txHash: log.txHash, logIndex: Number(log.logIndex) });
        const refused = await again().then(
          () => expect.fail("a second credit of the same log was accepted"),
          (error: unknown) => error,
        );
        expect(isUniqueViolation(refused)).to.equal(true);
        // The second wall: books where the index was lost (a tool, a restored file) still say what is wrong.
        await db.run("DROP INDEX entries_one_credit_per_deposit");
        await again();
        expect((await findViolations(db)).map((v) => v.rule)).to.deep.equal([
          "every deposit entry for a chain log is the one its chain deposit records",
        ]);
      });

      it("catch a credited amount that differs from the log's", async () => {
        await db.run("UPDATE chain_deposits SET amount = amount + 1 WHERE account_id IS NOT NULL");
        expect((await findViolations(db)).map((v) => v.rule)).to.deep.equal([
          "a credited chain deposit is one deposit entry paying its amount into its account",
        ]);
      });

      it("catch a deposit left waiting after its address was linked", async () => {
        await ledger.ensureAccount({ id: accountOf("carol"), kind: "user", name: "carol" });
        await db.run("INSERT INTO account_addresses (address, account_id, created_at) VALUES (?, ?, 0)", [
          chain.address("carol").toLowerCase(),
          accountOf("carol"),
        ]);
        expect((await findViolations(db)).map((v) => v.rule)).to.deep.equal([
          "a chain deposit is credited to its address's account, and waits only while the address is unlinked",
        ]);
      });
    });
  });
});
