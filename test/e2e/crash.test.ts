import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import Database from "better-sqlite3";
import { expect } from "chai";
import { loadConfig } from "../../server/config";
import { createGateway } from "../../server/index";
import { assertBalanced } from "../../server/ledger/invariants";
import { type TestBackend, startTestBackend } from "../helpers/backend";
import { startCrashChild } from "../helpers/crash-child-process";

describe("a gateway process that dies mid-call", () => {
  let dir: string;
  let backend: TestBackend;
  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "skill-gw-crash-"));
    backend = await startTestBackend();
  });
  after(async () => {
    await backend.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("leaves an open hold that the next start releases, so the caller is not charged", async function () {
    this.timeout(30_000);
    const dbPath = path.join(dir, "gateway.db");
    const { url, key, kill } = await startCrashChild({
      dbPath,
      env: {},
      buyer: { id: "buyer", creditMicros: "1000000" },
      sellerId: "seller",
      skills: [{ slug: "hang", backendUrl: `${backend.url}/hang`, priceMicros: "250000", timeoutMs: 60_000 }],
    });

    const reached = backend.nextRequest("/hang");
    fetch(`${url}/v1/call`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ skill_id: "hang", input: {} }),
    }).catch(() => {});
    await reached;
    // The hold committed before the call was forwarded; give the group commit a moment anyway.
    await new Promise((resolve) => setTimeout(resolve, 100));
    await kill();

    const raw = new Database(dbPath, { readonly: true });
    raw.defaultSafeIntegers(true);
    const open = raw.prepare("SELECT account_id, amount FROM holds WHERE status = 'open'").all();
    const held = raw.prepare("SELECT balance FROM ledger_accounts WHERE account_id = 'buyer' AND bucket = 'held'").pluck().get();
    raw.close();
    expect(open).to.deep.equal([{ account_id: "buyer", amount: 250_000n }]);
    expect(held).to.equal(250_000n);

    const gw = await createGateway(loadConfig({}, { port: 0, dbPath, logLevel: "silent" }), { log: () => {} });
    try {
      expect(gw.recovered.holds).to.equal(1);
      expect(await gw.ledger.balance("buyer")).to.deep.equal({ availableMicros: 1_000_000n, heldMicros: 0n });
      expect(await gw.ledger.balanceOf("seller", "earned")).to.equal(0n);
      await assertBalanced(gw.db);
    } finally {
      await gw.close();
    }
  });
});
