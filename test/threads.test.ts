import { once } from "node:events";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { expect } from "chai";
import { startThread, threadScript } from "../server/threads";

const FIXTURES = path.join(__dirname, "fixtures", "threads");

describe("threads running the gateway's TypeScript (server/threads.ts)", () => {
  it("runs a TypeScript entry with its relative imports and its packages, from any working directory", async () => {
    const cwd = process.cwd();
    // An evaluated script's own require would resolve from the working directory: the bundle's must not.
    process.chdir(os.tmpdir());
    try {
      const worker = await startThread(path.join(FIXTURES, "echo-thread.ts"), { workerData: { word: "hello" } });
      const [message] = await once(worker, "message");
      expect(message).to.equal("HELLO!");
      await worker.terminate();
    } finally {
      process.chdir(cwd);
    }
  });

  it("builds an entry's bundle once per process", async () => {
    const entry = path.join(FIXTURES, "echo-thread.ts");
    expect(threadScript(entry)).to.equal(threadScript(entry));
    expect(await threadScript(entry)).to.include("toUpperCase");
  });

  it("fails to start a thread whose entry does not build, and builds again when asked again", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "threads-"));
    const entry = path.join(dir, "late-thread.ts");
    fs.writeFileSync(entry, 'import { missing } from "./no-such-module";\nmissing();\n');
    try {
      let failure: unknown;
      await startThread(entry).catch((error: unknown) => (failure = error));
      expect(String(failure)).to.match(/no-such-module/);
      // Mended on disk: the failed build was not kept.
      fs.writeFileSync(entry, 'import { parentPort } from "node:worker_threads";\nparentPort!.postMessage("mended");\n');
      const worker = await startThread(entry);
      const [message] = await once(worker, "message");
      expect(message).to.equal("mended");
      await worker.terminate();
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
