import { mock } from "node:test";
import { expect } from "chai";
import { startHousekeeping } from "../server/housekeeping";

/** Lets the runs a tick started settle (their promises and the failure's log). */
const settle = () => new Promise((resolve) => setImmediate(resolve));

describe("startHousekeeping (server/housekeeping.ts): a module's named timers", () => {
  beforeEach(() => mock.timers.enable({ apis: ["setInterval"] }));
  afterEach(() => mock.timers.reset());

  it("runs each task every its own interval, logs a failure with the task's name, and keeps running it", async () => {
    const runs: string[] = [];
    const logged: string[] = [];
    const housekeeping = startHousekeeping(
      [
        { name: "every second", everyMs: 1_000, run: async () => void runs.push("second") },
        {
          name: "failing every 3 s",
          everyMs: 3_000,
          run: async () => {
            runs.push("failing");
            throw new Error("the store is down");
          },
        },
      ],
      (message) => logged.push(message),
    );
    mock.timers.tick(3_000);
    await settle();
    expect(runs.filter((r) => r === "second")).to.have.length(3);
    expect(runs.filter((r) => r === "failing")).to.have.length(1);
    expect(logged).to.deep.equal(["failing every 3 s failed"]);
    mock.timers.tick(3_000);
    await settle();
    expect(runs.filter((r) => r === "failing")).to.have.length(2);
    housekeeping.stop();
    mock.timers.tick(10_000);
    await settle();
    expect(runs).to.have.length(8);
  });

  it("stops the tasks it added later on their own, and all of them at stop()", async () => {
    let base = 0;
    let leader = 0;
    const housekeeping = startHousekeeping([{ name: "base", everyMs: 1_000, run: async () => void base++ }], () => {});
    const stopLeader = housekeeping.add([{ name: "leader", everyMs: 1_000, run: async () => void leader++ }]);
    mock.timers.tick(2_000);
    stopLeader();
    mock.timers.tick(2_000);
    expect({ base, leader }).to.deep.equal({ base: 4, leader: 2 });
    housekeeping.add([{ name: "leader again", everyMs: 1_000, run: async () => void leader++ }]);
    housekeeping.stop();
    mock.timers.tick(5_000);
    expect({ base, leader }).to.deep.equal({ base: 4, leader: 2 });
  });
});
