import { expect } from "chai";
import { DeferredWrites, NOT_YET_PATIENCE_MS } from "../../server/db/deferred-writes";
import { databaseUnavailable } from "../../server/db/sql";

/** Writes kept until the database answers again (server/db/deferred-writes.ts), with writes that fail as told. */
describe("writes deferred until the database answers (server/db/deferred-writes.ts)", () => {
  let writes: DeferredWrites;
  afterEach(() => writes?.close());

  /** A write that fails with database_unavailable `failures` times, then succeeds; `calls` counts its attempts. */
  function flaky(failures: number): { write: () => Promise<void>; calls: number; done: boolean } {
    const state = {
      calls: 0,
      done: false,
      write: async () => {
        state.calls++;
        if (state.calls <= failures) throw databaseUnavailable(new Error("no answer"));
        state.done = true;
      },
    };
    return state;
  }

  it("tries a write again until the database takes it, then forgets it", async () => {
    writes = new DeferredWrites({ retryMs: 5 });
    const release = flaky(3);
    writes.defer("release of hold h1", release.write);
    expect(writes.size).to.equal(1);
    while (writes.size > 0) await new Promise((resolve) => setTimeout(resolve, 5));
    expect(release).to.include({ calls: 4, done: true });
  });

  it("stops an attempt at the first write the database does not take, and keeps the rest for the next", async () => {
    writes = new DeferredWrites({ retryMs: 60_000 });
    const first = flaky(1);
    const second = flaky(0);
    writes.defer("a", first.write);
    writes.defer("b", second.write);
    expect(await writes.flush()).to.equal(2);
    expect(second.calls, "not tried while the database does not answer").to.equal(0);
    expect(await writes.flush()).to.equal(0);
    expect([first.done, second.done]).to.deep.equal([true, true]);
  });

  it("drops a write that fails otherwise, saying so, rather than retry a bug for ever", async () => {
    const logged: string[] = [];
    writes = new DeferredWrites({ retryMs: 60_000, log: (message) => logged.push(message) });
    writes.defer("release of hold h2", async () => {
      throw new Error("a bug");
    });
    expect(await writes.flush()).to.equal(0);
    expect(logged).to.deep.equal(["a deferred write (release of hold h2) failed; it is not tried again"]);
  });

  it(`keeps a write that says not_yet for ${NOT_YET_PATIENCE_MS} ms after the database first answered it, then drops it`, async () => {
    writes = new DeferredWrites({ retryMs: 60_000 });
    let answers = 0;
    writes.defer("release of hold h3, if it was taken", async () => {
      answers++;
      return "not_yet";
    });
    expect(await writes.flush()).to.equal(1);
    expect(await writes.flush()).to.equal(1);
    expect(answers).to.equal(2);
    const realNow = Date.now;
    Date.now = () => realNow() + NOT_YET_PATIENCE_MS;
    try {
      expect(await writes.flush()).to.equal(0);
    } finally {
      Date.now = realNow;
    }
  });

  it("takes nothing more once closed", async () => {
    writes = new DeferredWrites({ retryMs: 5 });
    writes.close();
    writes.defer("late", flaky(0).write);
    expect(writes.size).to.equal(0);
  });
});
