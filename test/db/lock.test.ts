import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { expect } from "chai";
import { loadConfig } from "../../server/config";
import { createGateway } from "../../server/index";
import { DatabaseLockedError, lockDatabase } from "../../server/db/lock";
import { rejectionOf } from "../helpers/ledger";

describe("one gateway per ledger file", () => {
  let dir: string;
  let dbPath: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "skill-gw-lock-"));
    dbPath = path.join(dir, "gateway.db");
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it("refuses a second gateway on a file another live process owns", async () => {
    // A live process that is not this one: the test runner's parent shell stands in.
    fs.writeFileSync(`${dbPath}.lock`, String(process.ppid));
    const error = await rejectionOf(createGateway(loadConfig({}, { dbPath, logLevel: "silent" }), { log: () => {} }));
    expect(error).to.be.instanceOf(DatabaseLockedError);
    expect(error.message).to.include(`pid ${process.ppid}`);
    // The lock is still the other process's.
    expect(fs.readFileSync(`${dbPath}.lock`, "utf8")).to.equal(String(process.ppid));
  });

  it("takes over a lock whose process is gone, as after a crash", async () => {
    const dead = spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"]).stdout.toString();
    fs.writeFileSync(`${dbPath}.lock`, dead);
    const gw = await createGateway(loadConfig({}, { dbPath, logLevel: "silent" }), { log: () => {} });
    expect(fs.readFileSync(`${dbPath}.lock`, "utf8")).to.equal(String(process.pid));
    await gw.close();
    expect(fs.existsSync(`${dbPath}.lock`)).to.equal(false);
  });

  it("frees the file when the gateway closes, so the next one can start", async () => {
    const first = await createGateway(loadConfig({}, { dbPath, logLevel: "silent" }), { log: () => {} });
    await first.close();
    const second = await createGateway(loadConfig({}, { dbPath, logLevel: "silent" }), { log: () => {} });
    await second.close();
  });

  it("does not lock an in-memory database", () => {
    const release = lockDatabase(":memory:");
    release();
    expect(fs.readdirSync(dir)).to.deep.equal([]);
  });
});
