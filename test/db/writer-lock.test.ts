import { Worker } from "node:worker_threads";
import { expect } from "chai";
import { WriterLock } from "../../server/db/writer-lock";

/** A thread that takes the lock blocking, holds it `holdMs` (busy), writes its name into `log`, and gives it back. */
function holder(lock: WriterLock, log: SharedArrayBuffer, rounds: number, holdMs: number): Worker {
  const source = `
    const { workerData, parentPort } = require("node:worker_threads");
    const counters = new Int32Array(workerData.lock);
    const log = new Int32Array(workerData.log);
    for (let i = 0; i < workerData.rounds; i++) {
      const ticket = Atomics.add(counters, 0, 1);
      for (;;) {
        const serving = Atomics.load(counters, 1);
        if (serving === ticket) break;
        Atomics.wait(counters, 1, serving);
      }
      // Inside: nobody else may be. The slot 0 of log counts holders inside; 1 counts overlaps seen.
      if (Atomics.add(log, 0, 1) !== 0) Atomics.add(log, 1, 1);
      const until = Date.now() + workerData.holdMs;
      while (Date.now() < until) {}
      Atomics.sub(log, 0, 1);
      Atomics.add(log, 2, 1);
      Atomics.add(counters, 1, 1);
      Atomics.notify(counters, 1);
    }
    parentPort.postMessage("done");
  `;
  return new Worker(source, { eval: true, workerData: { lock: lock.buffer, log, rounds, holdMs } });
}

describe("WriterLock (the SQLite file's write lock shared by threads)", () => {
  it("lets one holder in at a time across the event loop and a blocking thread, and the event loop waits without blocking", async () => {
    const lock = new WriterLock();
    const log = new SharedArrayBuffer(12);
    const counts = new Int32Array(log);
    const worker = holder(lock, log, 20, 2);
    const done = new Promise((resolve) => worker.once("message", resolve));
    let ticks = 0;
    const ticker = setInterval(() => ticks++, 1);
    for (let i = 0; i < 20; i++) {
      await lock.acquire();
      if (Atomics.add(counts, 0, 1) !== 0) Atomics.add(counts, 1, 1);
      await new Promise((resolve) => setTimeout(resolve, 1));
      Atomics.sub(counts, 0, 1);
      Atomics.add(counts, 2, 1);
      lock.release();
    }
    await done;
    clearInterval(ticker);
    await worker.terminate();
    expect(Atomics.load(counts, 1), "overlaps").to.equal(0);
    expect(Atomics.load(counts, 2), "turns taken").to.equal(40);
    // The loop kept turning while the thread held the lock (a blocking wait would have stopped the timer).
    expect(ticks).to.be.above(10);
  });

  it("waits for a thread holding the lock without blocking the event loop", async () => {
    const lock = new WriterLock();
    const log = new SharedArrayBuffer(12);
    // The thread takes the lock first and holds it 200 ms (busy); the event loop then asks for it.
    const worker = holder(lock, log, 1, 200);
    while (Atomics.load(new Int32Array(log), 0) === 0) await new Promise((resolve) => setTimeout(resolve, 1));
    let timerFired = false;
    const timer = setTimeout(() => (timerFired = true), 10);
    await lock.acquire();
    const firedWhileWaiting = timerFired;
    clearTimeout(timer);
    lock.release();
    await worker.terminate();
    // A blocking wait would have held the event loop for the thread's 200 ms: the 10 ms timer could not have run.
    expect(firedWhileWaiting).to.equal(true);
  });

  it("lets a waiter in at once, and every later one, once the other thread abandoned it", async () => {
    const lock = new WriterLock();
    const thread = new WriterLock(lock.buffer);
    // The other thread holds the lock and has another ticket queued: it dies with both.
    await thread.acquire();
    const waiting = lock.acquire();
    void thread.acquire();
    lock.abandon();
    await waiting;
    await lock.acquire();
    expect(lock.contended).to.equal(false);
  });

  it("serves tickets first come, first served, and tells its holder when another waits", async () => {
    const lock = new WriterLock();
    const other = new WriterLock(lock.buffer);
    await lock.acquire();
    expect(lock.contended).to.equal(false);
    const order: string[] = [];
    const second = other.acquire().then(() => order.push("second"));
    await Promise.resolve();
    expect(lock.contended).to.equal(true);
    const third = lock.acquire().then(() => order.push("third"));
    lock.release();
    await second;
    other.release();
    await third;
    lock.release();
    expect(order).to.deep.equal(["second", "third"]);
    expect(lock.contended).to.equal(false);
  });

  it("reads contention right when the counters wrap past 2^31", async () => {
    const lock = new WriterLock();
    const counters = new Int32Array(lock.buffer);
    counters[0] = 2 ** 31 - 1;
    counters[1] = 2 ** 31 - 1;
    await lock.acquire(); // ticket 2^31 - 1; the next ticket wraps to -2^31.
    expect(lock.contended).to.equal(false);
    const waiting = new WriterLock(lock.buffer).acquire();
    expect(lock.contended).to.equal(true);
    lock.release();
    await waiting;
    expect(lock.contended).to.equal(false);
  });
});
