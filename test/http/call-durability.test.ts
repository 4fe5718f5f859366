import { expect } from "chai";
import { WalFileSync } from "../../server/db/wal-sync";
import { type TestStack, startStack } from "../helpers/gateway";

/**
 * On SQLite a charge's durability is an fsync of the -wal file on libuv's thread pool (server/db/wal-sync.ts): the
 * paid call's 200 must wait for it, and a failed fsync must answer no 200 and stop the gateway. The real fsync is
 * held back (or failed) here at its one boundary, WalFileSync.sync, as a slow or failing disk would. The event loop's
 * group commit is what this checks (SQLITE_LEDGER_WRITER=loop): the writer thread's COMMIT runs at synchronous=FULL,
 * its fsync inside it (test/gateway/ledger-writer.test.ts).
 */
describe("POST /v1/call on SQLite: the answer waits for the log's fsync", () => {
  const realSync = WalFileSync.prototype.sync;
  let stack: TestStack;
  let fatal: unknown[];
  /** The fsyncs asked for while the disk is held back, each let go (or failed) by the test. */
  let held: { go: () => void; fail: (error: Error) => void }[];

  beforeEach(async () => {
    fatal = [];
    held = [];
    stack = await startStack({ config: { sqliteLedgerWriter: "loop" }, gateway: { onFatal: (error) => fatal.push(error) } });
  });
  afterEach(async () => {
    WalFileSync.prototype.sync = realSync;
    await stack.close();
  });

  /** From now on each fsync waits for the test. */
  const holdTheDisk = () => {
    WalFileSync.prototype.sync = function (this: WalFileSync) {
      return new Promise<void>((go, fail) => held.push({ go, fail })).then(() => realSync.call(this));
    };
  };
  const until = async (done: () => boolean | Promise<boolean>) => {
    for (let i = 0; i < 200 && !(await done()); i++) await new Promise((resolve) => setTimeout(resolve, 5));
    expect(await done(), "never came").to.equal(true);
  };
  const capturedCalls = async () =>
    Number(await stack.gw.db.value<bigint>("SELECT COUNT(*) FROM holds WHERE account_id = ? AND status = 'captured'", [stack.buyerId]));

  it("does not send the 200 of a captured call before the fsync begun after its COMMIT completes", async () => {
    holdTheDisk();
    let answered = false;
    const call = stack.post("/v1/call", { skill_id: "echo", input: { hello: "disk" } }).finally(() => (answered = true));
    await until(async () => (await capturedCalls()) === 1 && held.length > 0);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(answered, "answered while its commit was not on disk").to.equal(false);
    while (!answered) {
      for (const fsync of held.splice(0)) fsync.go();
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    const res = await call;
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(fatal).to.deep.equal([]);
  });

  it("answers no 200 when the fsync fails, stops the gateway, and acknowledges no later charge", async () => {
    holdTheDisk();
    const call = stack.post("/v1/call", { skill_id: "echo", input: { hello: "disk" } });
    await until(() => held.length > 0);
    for (const fsync of held.splice(0)) fsync.fail(Object.assign(new Error("EIO: i/o error, fsync"), { code: "EIO" }));
    const res = await call;
    expect(res.status).to.equal(500);
    expect(res.body.success).to.equal(false);
    expect(JSON.stringify(res.body), "no detail of the disk reaches the client").to.not.contain("EIO");
    expect(fatal).to.have.length(1);
    expect((fatal[0] as Error).message).to.contain("could not be synced");
    // The gateway would have stopped; kept alive here, it charges nothing more.
    WalFileSync.prototype.sync = realSync;
    const later = await stack.post("/v1/call", { skill_id: "echo", input: { hello: "again" } });
    expect(later.status).to.not.equal(200);
  });
});
