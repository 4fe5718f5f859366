import fs from "node:fs";
import { expect } from "chai";
import { type TestStack, startStack } from "../helpers/gateway";
import { sqliteOf } from "../helpers/ledger";
import { type TestSession, send, signedIn } from "../helpers/session";

describe("API keys from a session (/v1/keys)", () => {
  let stack: TestStack;
  let ada: TestSession;
  const logged: string[] = [];
  const consoleMethods = ["log", "info", "warn", "error", "debug"] as const;
  const saved = new Map<string, (...args: unknown[]) => void>();

  beforeEach(async () => {
    logged.length = 0;
    // Everything the gateway logs, through its logger or the console, is captured here.
    for (const m of consoleMethods) {
      saved.set(m, console[m]);
      console[m] = (...args: unknown[]) => void logged.push(args.map(String).join(" "));
    }
    stack = await startStack({
      gateway: { log: (message, error) => void logged.push(`${message} ${error === undefined ? "" : String(error)}`) },
    });
    ada = await signedIn(stack, "ada@example.com");
    await stack.gw.ledger.credit(ada.accountId, 1_000_000n, "dev_credit", "test");
    await stack.gw.db.durable();
  });
  afterEach(async () => {
    await stack.close();
    for (const m of consoleMethods) console[m] = saved.get(m)!;
  });

  const call = (key: string) => stack.post("/v1/call", { skill_id: "echo", input: { hello: "world" } }, { key });

  it("needs a session, and its CSRF token to change anything", async () => {
    const anonymous = await send(`${stack.url}/v1/keys`, "GET", {});
    expect(anonymous.status).to.equal(401);
    expect(anonymous.body).to.include({ success: false, code: "unauthorized" });
    // An API key is not a session: it needs keys:manage (docs/keys.md, Keys made by code), which no key made before had.
    const keyed = await send(`${stack.url}/v1/keys`, "GET", { authorization: `Bearer ${stack.key}` });
    expect([keyed.status, keyed.body.code]).to.deep.equal([403, "scope_missing"]);
    expect(keyed.body.error).to.include("keys:manage");
    const forged = await ada.request("POST", "/v1/keys", { name: "x" }, { csrf: false });
    expect(forged.status).to.equal(403);
    expect(forged.body.code).to.equal("csrf_failed");
    expect(await stack.gw.keys.listForAccount(ada.accountId)).to.deep.equal([]);
  });

  it("creates a key, shows it whole once, and lists it by prefix, name, creation and last use", async () => {
    const created = await ada.request("POST", "/v1/keys", { name: "laptop" });
    expect(created.status).to.equal(201);
    const { key, id, prefix } = created.body.data;
    expect(key).to.match(/^atom_[1-9A-HJ-NP-Za-km-z]{32,48}$/);
    expect(prefix).to.equal(key.slice(0, prefix.length)).and.have.length.below(key.length);
    expect(created.body.data).to.include({ name: "laptop", last_used_at: null });

    const listed = await ada.request("GET", "/v1/keys");
    expect(listed.status).to.equal(200);
    const noLimit = {
      spend_limit_usd: null,
      spend_limit_base_units: null,
      spend_limit_period: null,
      spent_usd: null,
      spent_base_units: null,
      resets_at: null,
    };
    expect(listed.body.data).to.deep.equal([
      {
        id,
        prefix,
        name: "laptop",
        created_at: created.body.data.created_at,
        last_used_at: null,
        ...noLimit,
        // The least by default: a key made without asking for scopes calls skills, and reads only its own calls.
        scopes: ["calls"],
        allowed_skills: null,
        expires_at: null,
        metadata: {},
      },
    ]);
    expect(JSON.stringify(listed.body)).to.not.include(key);

    expect((await call(key)).status).to.equal(200);
    const used = (await ada.request("GET", "/v1/keys")).body.data[0];
    expect(Date.parse(used.last_used_at)).to.be.closeTo(Date.now(), 5_000);
  });

  it("keys belong to the account: a call with one is billed to it", async () => {
    const { key } = (await ada.request("POST", "/v1/keys", { name: "ci" })).body.data;
    const before = await stack.available(ada.accountId);
    const reply = await call(key);
    expect(reply.status).to.equal(200);
    expect(await stack.available(ada.accountId)).to.equal(before - 1_000n);
  });

  it("revokes a key at once: the next call with it gets 401, and it leaves the list", async () => {
    const { key, id } = (await ada.request("POST", "/v1/keys", { name: "old" })).body.data;
    expect((await call(key)).status).to.equal(200); // now in the authentication cache
    const revoked = await ada.request("DELETE", `/v1/keys/${id}`);
    expect(revoked.status).to.equal(200);
    expect(revoked.body.data).to.deep.equal({ id, revoked: true });
    const after = await call(key);
    expect(after.status).to.equal(401);
    expect(after.body.code).to.equal("unauthorized");
    expect((await ada.request("GET", "/v1/keys")).body.data).to.deep.equal([]);
    expect((await ada.request("DELETE", `/v1/keys/${id}`)).status).to.equal(404);
  });

  it("answers 404 for another account's key, which keeps working", async () => {
    const bob = await signedIn(stack, "bob@example.com");
    const { id } = (await ada.request("POST", "/v1/keys", { name: "ada's" })).body.data;
    const reply = await bob.request("DELETE", `/v1/keys/${id}`);
    expect(reply.status).to.equal(404);
    expect(reply.body).to.include({ success: false, code: "not_found" });
    expect((await bob.request("GET", "/v1/keys")).body.data).to.deep.equal([]);
    expect((await stack.gw.keys.get(id))!.revokedAtMs).to.equal(null);
    expect((await ada.request("DELETE", "/v1/keys/not-a-key")).status).to.equal(404);
  });

  it("refuses a name that is not a short string", async () => {
    for (const name of [42, "x".repeat(65), ["a"]]) {
      const reply = await ada.request("POST", "/v1/keys", { name });
      expect(reply.status, JSON.stringify(name)).to.equal(400);
      expect(reply.body.code).to.equal("invalid_request");
    }
  });

  it("never stores or logs the raw key", async () => {
    const { key } = (await ada.request("POST", "/v1/keys", { name: "secret" })).body.data;
    await call(key);
    await call(`${key}x`); // a wrong key: logged paths must not echo it either
    await stack.gw.db.transaction((tx) => stack.gw.keys.flushLastUsed(tx));
    await stack.gw.db.durable();
    sqliteOf(stack.gw.db).db.pragma("wal_checkpoint(TRUNCATE)");
    for (const file of [stack.dbPath, `${stack.dbPath}-wal`]) {
      if (!fs.existsSync(file)) continue;
      const bytes = fs.readFileSync(file);
      expect(bytes.includes(Buffer.from(key)), file).to.equal(false);
      expect(bytes.includes(Buffer.from(key.slice(5))), `${file} (secret part)`).to.equal(false);
    }
    expect(logged.filter((line) => line.includes(key.slice(5)))).to.deep.equal([]);
  });
});
