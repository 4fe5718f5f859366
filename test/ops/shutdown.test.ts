import { spawn } from "node:child_process";
import path from "node:path";
import { expect } from "chai";
import { shutDown } from "../../server/ops/shutdown";

const never = () => new Promise<never>(() => {});

describe("shutDown (server/ops/shutdown.ts): every process's stop, bounded by a deadline", () => {
  it("stops the steps in order, logs one that fails, and goes on to the next", async () => {
    const order: string[] = [];
    const lines: string[] = [];
    const outcome = await shutDown(
      [
        { name: "a", stop: async () => void order.push("a") },
        {
          name: "b",
          stop: async () => {
            order.push("b");
            throw new Error("socket already closed");
          },
        },
        { name: "c", stop: () => void order.push("c") },
      ],
      { deadlineMs: 5_000, log: (line) => lines.push(line), watchdog: false },
    );
    expect(order).to.deep.equal(["a", "b", "c"]);
    expect(outcome).to.deep.equal({ stopped: ["a", "c"], failed: [{ name: "b", message: "socket already closed" }], unfinished: [] });
    expect(lines).to.deep.equal(["shutdown: b failed to stop: socket already closed"]);
  });

  it("at the deadline, names the step that did not stop and those after it, and returns", async () => {
    const lines: string[] = [];
    let laterRan = false;
    const outcome = await shutDown(
      [
        { name: "the gateway", stop: async () => {} },
        { name: "the bundler", stop: never },
        { name: "the local chain", stop: () => void (laterRan = true) },
      ],
      { deadlineMs: 200, log: (line) => lines.push(line), watchdog: false },
    );
    expect(outcome.stopped).to.deep.equal(["the gateway"]);
    expect(outcome.unfinished).to.deep.equal(["the bundler", "the local chain"]);
    expect(laterRan).to.equal(false);
    expect(lines).to.deep.equal(["shutdown: not stopped within 200 ms: the bundler, the local chain; exiting without them"]);
  });

  it("kills the process from its watchdog thread when the main thread is blocked (a futex wait), saying in which step", async () => {
    // A child whose step blocks its main thread for good: no timer of its event loop can fire, only the watchdog's.
    const script = `
      const { shutDown } = require(${JSON.stringify(path.join(__dirname, "../../server/ops/shutdown"))});
      void shutDown([{ name: "a blocked step", stop: () => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0) }], { deadlineMs: 300 });
    `;
    const child = spawn(process.execPath, ["-r", "ts-node/register/transpile-only", "-e", script], {
      cwd: path.join(__dirname, "../.."),
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const exit = await new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.once("exit", (code, signal) => resolve({ code, signal })),
    );
    expect(exit.signal, stderr).to.equal("SIGKILL");
    expect(stderr).to.match(
      /^shutdown: still running 2300 ms after it was asked to stop, in step "a blocked step"; killing it \(SIGKILL\)$/m,
    );
  });
});
