import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Worker } from "node:worker_threads";
import Database from "better-sqlite3";
import { expect } from "chai";
import type { SqliteDatabase } from "../../server/db/sqlite-database";
import { WriterLock } from "../../server/db/writer-lock";
import { computeCharge } from "../../server/ledger/fees";
import { SqliteLedgerWriter } from "../../server/gateway/ledger-writer";
import { LEGACY_SCOPES } from "../../server/identity/scopes";
import type { HoldInput } from "../../server/ledger/ledger";
import { assertBalanced } from "../../server/ledger/invariants";
import { type ChargingBackend, startChargingBackend } from "../helpers/charging-backend";
import { type TestStack, startStack } from "../helpers/gateway";
import { noRecord } from "../helpers/records";
import { copyMigratedSqlite } from "../helpers/sqlite-template";

/*
 * Keyed calls with SQLITE_LEDGER_WRITER=thread: holds, captures and releases written by the ledger writer's thread on
 * a connection of its own (server/gateway/ledger-writer.ts), while the event loop's connection writes everything else
 * to the same file. The money rules are the ledger's own (they run unchanged in the thread); what these tests guard
 * is the thread's part: every 200 a capture on disk, a failed call never charged, the two connections taking turns
 * on the file without losing or blocking a write.
 */
describe("the SQLite ledger writer thread (SQLITE_LEDGER_WRITER=thread)", function () {
  this.timeout(60_000);
  let stack: TestStack;
  let charging: ChargingBackend;
  before(async () => {
    charging = await startChargingBackend();
    stack = await startStack({
      buyerUsd: "10",
      config: { sqliteLedgerWriter: "thread", rateLimitPerMin: 1_000_000 },
      publicStandIns: [charging.url],
    });
    expect(stack.gw.holds).to.be.instanceOf(SqliteLedgerWriter);
    // The event loop's connection must never meet the file locked by the thread's (it would wait in SQLite's busy
    // handler, on the event loop): without a busy timeout, a write that did would fail at once, and the call with it.
    (stack.gw.db as SqliteDatabase).db.pragma("busy_timeout = 0");
  });
  after(async () => {
    await stack.close();
    await charging.close();
  });

  const rows = <T>(sql: string, ...params: unknown[]): T[] => {
    const raw = new Database(stack.dbPath, { readonly: true });
    try {
      raw.defaultSafeIntegers(true);
      return raw.prepare(sql).all(...params) as T[];
    } finally {
      raw.close();
    }
  };

  it("charges each of many concurrent calls once, splits it, and has every 200's capture committed to the file", async () => {
    const before = { available: await stack.available(), earned: await stack.earned(), fees: await stack.fees() };
    const answers = await Promise.all(Array.from({ length: 60 }, (_, i) => stack.post("/v1/skills/echo/call", { i })));
    expect(answers.map((a) => a.status)).to.deep.equal(answers.map(() => 200));
    // Read by a connection of its own, as after a crash: what the 200s reported is in the file.
    const ids = answers.map((a) => (a.body as { metadata: { callId: string } }).metadata.callId);
    const captured = rows<{ id: string }>(
      `SELECT c.id FROM calls c JOIN holds h ON h.id = c.hold_id WHERE h.status = 'captured' AND c.id IN (${ids.map(() => "?").join(",")})`,
      ...ids,
    );
    expect(captured).to.have.length(60);
    expect(await stack.available()).to.equal(before.available - 60n * 1_000n);
    expect(await stack.earned()).to.equal(before.earned + 60n * 900n);
    expect(await stack.fees()).to.equal(before.fees + 60n * 100n);
    await assertBalanced(stack.gw.db);
  });

  it("shows a hold in a balance read on the event loop as soon as the hold is answered, before its batch would commit", async () => {
    const before = await stack.gw.ledger.balance(stack.buyerId);
    const charge = computeCharge(70_000n, "included", 1_000n);
    const held = await stack.gw.holds.hold({ accountId: stack.buyerId, sellerAccountId: stack.sellerId, skillId: "echo", charge });
    if (!held.ok) throw new Error(`not held: ${held.reason}`);
    // Answered before its batch commits (within 2 ms): the read waits for the thread to commit what it answered.
    expect(await stack.gw.ledger.balance(stack.buyerId)).to.deep.equal({
      availableMicros: before.availableMicros - charge.chargedMicros,
      heldMicros: before.heldMicros + charge.chargedMicros,
    });
    await stack.gw.holds.release(held.hold.id);
    expect(await stack.gw.ledger.balance(stack.buyerId)).to.deep.equal(before);
  });

  it("reads a balance inside an event loop transaction without waiting for the thread, which waits for that transaction", async () => {
    const charge = computeCharge(30_000n, "included", 1_000n);
    const input = { accountId: stack.buyerId, sellerAccountId: stack.sellerId, skillId: "echo", charge };
    const read = stack.gw.db.transaction(async () => {
      // A hold asked of the thread now waits for the file, which this transaction has.
      const waiting = stack.gw.holds.hold(input);
      await new Promise((resolve) => setTimeout(resolve, 20));
      return { balance: await stack.gw.ledger.balance(stack.buyerId), waiting };
    });
    let timer: NodeJS.Timeout | undefined;
    const stuck = new Promise<"stuck">((resolve) => (timer = setTimeout(resolve, 5_000, "stuck")));
    const outcome = await Promise.race([read, stuck]);
    clearTimeout(timer);
    if (outcome === "stuck") throw new Error("the read waited for the thread, which waited for the read's transaction");
    const held = await outcome.waiting;
    if (!held.ok) throw new Error(`not held: ${held.reason}`);
    await stack.gw.holds.release(held.hold.id);
  });

  it("tells each answer the balance its charge left, read in the capture's own transaction", async () => {
    // A cent a call, so that the header (USD to the cent) tells every charge apart.
    await stack.addSkill("echo-cent", "/echo", { priceMicros: 10_000n });
    const start = await stack.available();
    for (let i = 1; i <= 5; i++) {
      const answer = await stack.post("/v1/skills/echo-cent/call", { i });
      expect(answer.headers.get("x-balance-available")).to.equal((Number(start - BigInt(i) * 10_000n) / 1e6).toFixed(2));
    }
  });

  it("does not charge a failed call, releases its hold and logs it", async () => {
    const available = await stack.available();
    const answer = await stack.post("/v1/skills/fail/call", {});
    expect(answer.status).to.equal(502);
    expect(await stack.available()).to.equal(available);
    const callId = answer.headers.get("x-call-id");
    const [line] = rows<{ outcome: string; charged_micros: bigint; status: string }>(
      "SELECT c.outcome, c.charged_micros, h.status FROM calls c JOIN holds h ON h.id = c.hold_id WHERE c.id = ?",
      callId,
    );
    expect(line).to.deep.equal({ outcome: "skill_error", charged_micros: 0n, status: "released" });
    expect(rows("SELECT id FROM holds WHERE status = 'open'")).to.deep.equal([]);
  });

  it("replays an Idempotency-Key's answer without a second charge", async () => {
    const available = await stack.available();
    const headers = { "idempotency-key": "writer-thread-replay" };
    const first = await stack.post("/v1/skills/echo/call", { once: true }, { headers });
    const again = await stack.post("/v1/skills/echo/call", { once: true }, { headers });
    expect(first.status).to.equal(200);
    expect(again.status).to.equal(200);
    expect(again.body).to.deep.equal(first.body);
    expect(await stack.available()).to.equal(available - 1_000n);
  });

  it("keeps a key's spending limit exact under concurrent calls", async () => {
    const buyer = await stack.addBuyer("1");
    const { key } = await stack.gw.keys.create(buyer.accountId, {
      scopes: LEGACY_SCOPES,
      spendLimit: { limitMicros: 5_000n, period: "day" },
    });
    const answers = await Promise.all(Array.from({ length: 15 }, () => stack.post("/v1/skills/echo/call", {}, { key })));
    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((s) => s === 200)).to.have.length(5);
    expect(statuses.filter((s) => s === 402)).to.have.length(10);
    expect(await stack.available(buyer.accountId)).to.equal(1_000_000n - 5_000n);
  });

  it("sends a hold's answer before the COMMIT (and its fsync) of the batch it joined", async () => {
    const writer = stack.gw.holds as SqliteLedgerWriter;
    const messages: { kind: string; value?: { hold?: { id: string } } }[][] = [];
    const worker = (writer as unknown as { worker: Worker }).worker;
    const record = (batch: (typeof messages)[number]) => messages.push(batch);
    worker.on("message", record);
    try {
      const input = {
        accountId: stack.buyerId,
        sellerAccountId: stack.sellerId,
        skillId: "echo",
        charge: computeCharge(1_000n, "included", 1_000n),
      };
      const first = await writer.hold(input);
      if (!first.ok) throw new Error(`not held: ${first.reason}`);
      // In one turn: a release, which commits its batch at once (its answer waits for it), and a hold joining that batch.
      const [, second] = await Promise.all([writer.release(first.hold.id), writer.hold(input)]);
      if (!second.ok) throw new Error(`not held: ${second.reason}`);
      await writer.release(second.hold.id);
      // The replies in the order they came, each with the message that carried it; the first commit after the hold's
      // answer is its batch's (an earlier batch's commit may share the answer's message).
      const replies = messages.flatMap((batch, message) => batch.map((reply) => ({ reply, message })));
      const answer = replies.findIndex(({ reply }) => reply.value?.hold?.id === second.hold.id);
      const commit = replies.findIndex(({ reply }, i) => i > answer && reply.kind === "commit");
      expect(answer).to.be.above(-1);
      expect(commit).to.be.above(-1);
      expect(replies[commit]!.message, "the commit's message comes after the hold's answer's").to.be.above(replies[answer]!.message);
    } finally {
      worker.off("message", record);
    }
  });

  it("counts a hold in its key's spending as soon as the hold is answered", async () => {
    const buyer = await stack.addBuyer("1");
    const { record } = await stack.gw.keys.create(buyer.accountId, {
      scopes: LEGACY_SCOPES,
      spendLimit: { limitMicros: 500_000n, period: "day" },
    });
    const charge = computeCharge(40_000n, "included", 1_000n);
    const held = await stack.gw.holds.hold({
      accountId: buyer.accountId,
      sellerAccountId: stack.sellerId,
      skillId: "echo",
      charge,
      apiKeyId: record.id,
    });
    if (!held.ok) throw new Error(`not held: ${held.reason}`);
    // Answered before its batch commits: the read waits for the thread to commit what it answered.
    expect((await stack.gw.keys.spendLimits([record.id])).get(record.id)?.spentMicros).to.equal(charge.chargedMicros);
    await stack.gw.holds.release(held.hold.id);
  });

  it("takes turns on the file with the event loop's writes: credits made during calls all land", async () => {
    const buyer = await stack.addBuyer("0.5");
    const calls = Array.from({ length: 40 }, (_, i) => stack.post("/v1/skills/echo/call", { i }, { key: buyer.key }));
    const credits = Array.from({ length: 20 }, () => stack.gw.ledger.credit(buyer.accountId, 10_000n, "dev_credit", "during calls"));
    const answers = await Promise.all(calls);
    await Promise.all(credits);
    await stack.gw.db.durable();
    expect(answers.every((a) => a.status === 200)).to.equal(true);
    expect(await stack.available(buyer.accountId)).to.equal(500_000n + 20n * 10_000n - 40n * 1_000n);
    await assertBalanced(stack.gw.db);
  });

  it("charges a usage-priced call what its backend reported, and gives the rest of the hold back", async () => {
    const secret = "ab".repeat(32);
    await stack.addSkill("metered", "/unused", {
      backendUrl: `${charging.url}/charge`,
      pricing: "usage",
      priceMicros: 50_000n,
      signingSecret: secret,
    });
    charging.setSecret(secret);
    const available = await stack.available();
    const earned = await stack.earned();
    const answer = await stack.post("/v1/call", { skill_id: "metered", input: { report: "0.0123" } });
    expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
    expect(await stack.available()).to.equal(available - 12_300n);
    expect(await stack.earned()).to.equal(earned + 11_070n);
    await assertBalanced(stack.gw.db);
  });

  it("records what the seller is shown of an answer that broke the skill's output contract, with the call's line", async () => {
    await stack.addSkill("promises-a-number", "/echo", { outputSchema: { type: "number" } });
    const available = await stack.available();
    const answer = await stack.post("/v1/skills/promises-a-number/call", { not: "a number" });
    expect(answer.status).to.equal(502);
    expect(await stack.available()).to.equal(available);
    const callId = answer.headers.get("x-call-id");
    expect(rows("SELECT c.outcome FROM calls c JOIN call_output_failures f ON f.call_id = c.id WHERE c.id = ?", callId)).to.deep.equal([
      { outcome: "skill_bad_output" },
    ]);
  });

  it("refuses a call the balance does not cover, with nothing held", async () => {
    const buyer = await stack.addBuyer("0.0015");
    const [first, second] = [
      await stack.post("/v1/skills/echo/call", {}, { key: buyer.key }),
      await stack.post("/v1/skills/echo/call", {}, { key: buyer.key }),
    ];
    expect(first.status).to.equal(200);
    expect(second.status).to.equal(402);
    expect((second.body as { code: string }).code).to.equal("insufficient_balance");
    expect(await stack.available(buyer.accountId)).to.equal(500n);
    expect(rows("SELECT id FROM holds WHERE account_id = ? AND status = 'open'", buyer.accountId)).to.deep.equal([]);
  });
});

describe("SqliteLedgerWriter's messages to its thread", () => {
  const STAND_IN = path.join(__dirname, "..", "helpers", "counting-writer-worker.cjs");

  it("sends the operations asked for in one turn of the event loop in one message, and matches each answer to its own", async () => {
    const writer = await SqliteLedgerWriter.start("unused.db", new WriterLock(), () => {}, STAND_IN);
    try {
      const input = (i: number) => ({ accountId: `buyer-${i}` }) as unknown as HoldInput;
      const answers = (await Promise.all(Array.from({ length: 12 }, (_, i) => writer.hold(input(i))))) as unknown as {
        hold: { id: string };
        carriedWith: number;
      }[];
      expect(answers.map((answer) => answer.carriedWith)).to.deep.equal(Array(12).fill(12));
      expect(new Set(answers.map((answer) => answer.hold.id)).size).to.equal(12);
      // The next turn's operation travels in a message of its own.
      await new Promise((resolve) => setImmediate(resolve));
      expect(await writer.hold(input(12))).to.have.property("carriedWith", 1);
    } finally {
      await writer.close();
    }
  });

  it("refuses an operation that cannot be sent to the thread alone, and sends the others of its turn", async () => {
    const writer = await SqliteLedgerWriter.start("unused.db", new WriterLock(), () => {}, STAND_IN);
    try {
      const sendable = { accountId: "buyer" } as unknown as HoldInput;
      // A function cannot be copied to another thread (a DataCloneError).
      const unsendable = { accountId: "buyer", callback: () => {} } as unknown as HoldInput;
      const outcomes = await Promise.allSettled([writer.hold(sendable), writer.hold(unsendable), writer.hold(sendable)]);
      expect(outcomes.map((outcome) => outcome.status)).to.deep.equal(["fulfilled", "rejected", "fulfilled"]);
      expect((outcomes[1] as PromiseRejectedResult).reason).to.have.property("name", "DataCloneError");
      // The writer is not broken by it.
      expect(await writer.hold(sendable)).to.have.property("ok", true);
    } finally {
      await writer.close();
    }
  });
});

describe("SqliteLedgerWriter when its thread fails", () => {
  const STAND_IN = path.join(__dirname, "..", "helpers", "failing-writer-worker.cjs");
  const write = noRecord().write;

  it("refuses the operation waiting and every later one, and tells the gateway once, on a commit that failed", async () => {
    const fatal: unknown[] = [];
    const writer = await SqliteLedgerWriter.start("unused.db", new WriterLock(), (error) => fatal.push(error), STAND_IN);
    try {
      expect(await writer.hold({} as HoldInput)).to.deep.equal({ ok: true, hold: { id: "h1" } });
      const settled = await writer.settle("h1", { apiKeyId: "k", nowMs: 0 }, { write, run: async () => {} }).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(settled).to.be.instanceOf(Error).with.property("code", "SQLITE_IOERR");
      expect(fatal).to.have.length(1);
      const later = await writer.hold({} as HoldInput).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(later).to.equal(fatal[0]);
      expect(fatal).to.have.length(1);
    } finally {
      await writer.close();
    }
  });

  it("refuses the operation waiting when the thread dies, and tells the gateway", async () => {
    const fatal: unknown[] = [];
    const writer = await SqliteLedgerWriter.start("unused.db", new WriterLock(), (error) => fatal.push(error), STAND_IN);
    const released = await writer.release("h1").then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(released).to.be.instanceOf(Error);
    expect((released as Error).message).to.match(/thread stopped \(exit code 3\)/);
    expect(fatal).to.deep.equal([released]);
    await writer.close();
  });
});

describe("SqliteLedgerWriter's threads, kept for the next gateway of the process", function () {
  this.timeout(60_000);
  const threadOf = (stack: TestStack) => (stack.gw.holds as SqliteLedgerWriter).threadId;
  // A gateway's file that outlives its stack (a stack removes its own folder), to be read after another has run.
  let kept: string;
  before(() => (kept = fs.mkdtempSync(path.join(os.tmpdir(), "writer-thread-"))));
  after(() => fs.rmSync(kept, { recursive: true, force: true }));
  const callsIn = (file: string): number => {
    const raw = new Database(file, { readonly: true });
    try {
      return Number(raw.prepare("SELECT COUNT(*) AS n FROM calls").get()!["n" as never]);
    } finally {
      raw.close();
    }
  };

  it("serves the next gateway on that gateway's file once its own has closed it cleanly", async () => {
    const first = await startStack({ buyerUsd: "1", dbPath: path.join(kept, "first.db"), config: { sqliteLedgerWriter: "thread" } });
    let thread: number;
    try {
      thread = threadOf(first);
      expect((await first.post("/v1/skills/echo/call", {})).status).to.equal(200);
    } finally {
      await first.close();
    }
    const firstCalls = callsIn(first.dbPath);
    const second = await startStack({ buyerUsd: "1", config: { sqliteLedgerWriter: "thread" } });
    try {
      expect(threadOf(second)).to.equal(thread);
      const before = await second.available();
      const answers = await Promise.all(Array.from({ length: 5 }, (_, i) => second.post("/v1/skills/echo/call", { i })));
      expect(answers.map((a) => a.status)).to.deep.equal([200, 200, 200, 200, 200]);
      expect(await second.available()).to.equal(before - 5n * 1_000n);
      expect(callsIn(second.dbPath)).to.equal(5);
      await assertBalanced(second.gw.db);
    } finally {
      await second.close();
    }
    // The first gateway's file got nothing more once it was closed.
    expect(callsIn(first.dbPath)).to.equal(firstCalls);
  });

  it("never gives a thread that failed to open a file to another writer", async () => {
    const first = await startStack({ buyerUsd: "1", config: { sqliteLedgerWriter: "thread" } });
    const thread = threadOf(first);
    await first.close();
    expect(SqliteLedgerWriter.idleThreadIds().at(-1)).to.equal(thread);
    // A file below a regular file: no folder can be made there.
    const plain = path.join(kept, "plain");
    fs.writeFileSync(plain, "");
    const opened = await SqliteLedgerWriter.start(path.join(plain, "x.db"), new WriterLock(), () => {}).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(opened).to.be.instanceOf(Error);
    // The failed open took the idle thread and stopped it.
    expect(SqliteLedgerWriter.idleThreadIds()).to.not.include(thread);
    const next = await startStack({ buyerUsd: "1", config: { sqliteLedgerWriter: "thread" } });
    try {
      expect(threadOf(next)).to.not.equal(thread);
      expect((await next.post("/v1/skills/echo/call", {})).status).to.equal(200);
    } finally {
      await next.close();
    }
  });

  it("keeps the process alive while a kept thread opens the next file, and no longer once the last writer closed", async () => {
    const files = ["exits-1.db", "exits-2.db"].map((name) => path.join(kept, name));
    for (const file of files) copyMigratedSqlite(file);
    // Nothing else keeps this process alive: the second writer opens its file on the thread the first left idle (the
    // process must wait for that), and once the second has closed, the process ends by itself, its idle thread with it.
    const script = `
      const { SqliteLedgerWriter } = require(${JSON.stringify(require.resolve("../../server/gateway/ledger-writer"))});
      const { WriterLock } = require(${JSON.stringify(require.resolve("../../server/db/writer-lock"))});
      const fatal = (error) => { console.error(error); process.exit(2); };
      const cycle = (file) => SqliteLedgerWriter.start(file, new WriterLock(), fatal).then(async (writer) => {
        await writer.caughtUp();
        await writer.close();
        return writer.threadId;
      });
      cycle(${JSON.stringify(files[0])}).then(async (first) => {
        const second = await cycle(${JSON.stringify(files[1])});
        console.log(second === first ? "closed twice on one thread" : "closed on two threads");
      });`;
    const child = await new Promise<{ code: number | null; stdout: string }>((resolve) => {
      const started = execFile(
        process.execPath,
        ["-r", require.resolve("../../server/devstack/ts-register.cjs"), "-e", script],
        { timeout: 30_000 },
        (_error, stdout) => resolve({ code: started.exitCode, stdout }),
      );
    });
    expect(child).to.deep.equal({ code: 0, stdout: "closed twice on one thread\n" });
  });
});
