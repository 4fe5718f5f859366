import { expect } from "chai";
import { describeEachEngine } from "../helpers/engines";
import { type TestStack, startStack } from "../helpers/gateway";
import { DAY_MS, fromNow, listedKeys, sessionKey, withKey } from "../helpers/keys";
import { type TestSession, signedIn } from "../helpers/session";

/**
 * Keys made by code (issue 24, section 4; docs/keys.md): the same /v1/keys endpoints the dashboard uses, taken by an
 * API key with keys:manage, plus metadata, and PATCH changing everything a key has, in one transaction, in effect at
 * the key's next request even while its authentication is cached. What a management key may NOT do is in
 * ./keys-escalation.test.ts.
 */
describeEachEngine("keys made by code (/v1/keys with a keys:manage key)", (engine) => {
  let stack: TestStack;
  let ada: TestSession;

  beforeEach(async () => {
    // A long authentication cache: what a change does at once cannot be the cache running out.
    stack = await startStack({ engine: engine.name, config: { keyCacheTtlMs: 600_000 } });
    ada = await signedIn(stack, "ada@example.com");
    await stack.gw.ledger.credit(ada.accountId, 1_000_000n, "dev_credit", "test");
    await stack.gw.db.durable();
  });
  afterEach(async () => {
    await stack.close();
  });

  const callEcho = (key: string, skill = "echo") => withKey(stack, key)("POST", "/v1/call", { skill_id: skill, input: { n: 1 } });

  it("makes a key for an agent, lists it, changes it and revokes it, with no session and no CSRF token", async () => {
    const manager = await sessionKey(ada, { name: "provisioner", scopes: ["keys:manage"] });
    const asManager = withKey(stack, manager.key);

    const created = await asManager("POST", "/v1/keys", {
      name: "agent for u_42",
      spend_limit_usd: "0.50",
      spend_limit_period: "day",
      allowed_skills: ["echo"],
      expires_at: fromNow(7 * DAY_MS),
      metadata: { agent: "researcher-7", end_user: "u_42" },
    });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const agent = created.body.data;
    expect(agent).to.deep.include({
      name: "agent for u_42",
      scopes: ["calls"],
      allowed_skills: ["echo"],
      spend_limit_usd: 0.5,
      spend_limit_period: "day",
      metadata: { agent: "researcher-7", end_user: "u_42" },
    });
    expect(agent.key).to.match(/^atom_/);

    // The agent's key calls, billed to the account; the management key itself calls nothing.
    const before = await stack.available(ada.accountId);
    expect((await callEcho(agent.key)).status).to.equal(200);
    expect(await stack.available(ada.accountId)).to.equal(before - 1_000n);
    const refused = await callEcho(manager.key);
    expect([refused.status, refused.body.code]).to.deep.equal([403, "scope_missing"]);

    const listed = await asManager("GET", "/v1/keys");
    expect(listed.status).to.equal(200);
    expect(listed.body.data.map((k: { id: string }) => k.id)).to.deep.equal([manager.id, agent.id]);
    expect(listed.body.data[1]).to.deep.include({ metadata: { agent: "researcher-7", end_user: "u_42" }, spent_usd: 0.001 });

    const changed = await asManager("PATCH", `/v1/keys/${agent.id}`, { name: "agent for u_43", metadata: { end_user: "u_43" } });
    expect(changed.status, JSON.stringify(changed.body)).to.equal(200);
    expect(changed.body.data).to.deep.include({ name: "agent for u_43", metadata: { end_user: "u_43" }, allowed_skills: ["echo"] });
    // The dashboard sees what the code did.
    expect((await listedKeys(ada)).get(agent.id)).to.deep.include({ name: "agent for u_43", metadata: { end_user: "u_43" } });

    const revoked = await asManager("DELETE", `/v1/keys/${agent.id}`);
    expect(revoked.body).to.deep.equal({ success: true, data: { id: agent.id, revoked: true } });
    expect((await callEcho(agent.key)).status).to.equal(401);
    expect([...(await listedKeys(ada)).keys()]).to.deep.equal([manager.id]);
  });

  it("takes metadata on create and change, and refuses what is out of bounds with a 400 that names it", async () => {
    const limits = {
      entries: Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`k${i}`, `v${i}`])),
      longest: { ["n".repeat(40)]: "v".repeat(500), "a.b:c-d_e": "" },
    };
    for (const metadata of Object.values(limits)) {
      const made = await sessionKey(ada, { metadata });
      expect(made.metadata).to.deep.equal(metadata);
    }
    // Normalized as names are (NFC, trimmed); null and {} both mean none.
    expect((await sessionKey(ada, { metadata: { who: "  Zoe\u0301  " } })).metadata).to.deep.equal({ who: "Zo\u00e9" });
    expect((await sessionKey(ada, { metadata: null })).metadata).to.deep.equal({});

    const bad: [unknown, RegExp][] = [
      [["agent"], /^metadata must be an object of at most 20 entries/],
      ["agent", /^metadata must be an object/],
      [Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`k${i}`, "v"])), /^metadata has 21 entries; at most 20\.$/],
      [{ ["n".repeat(41)]: "v" }, /^metadata: the name "n{41}" is not 1 to 40 letters/],
      [{ "end user": "v" }, /^metadata: the name "end user" is not/],
      [{ "": "v" }, /^metadata: the name "" is not/],
      [{ _private: "v" }, /^metadata: the name "_private" is not .* starting with a letter or a digit\.$/],
      [{ agent: 7 }, /^metadata\.agent must be a string\.$/],
      [{ agent: null }, /^metadata\.agent must be a string\.$/],
      [{ agent: { nested: "v" } }, /^metadata\.agent must be a string\.$/],
      [{ agent: "v".repeat(501) }, /^metadata\.agent must be at most 500 characters/],
      [{ agent: "bad\u0000byte" }, /^metadata\.agent must not contain control or invisible characters/],
      [{ agent: "line\nbreak" }, /^metadata\.agent must not contain control or invisible characters/],
    ];
    const target = await sessionKey(ada, { name: "target", metadata: { keep: "me" } });
    const count = (await listedKeys(ada)).size;
    for (const [metadata, message] of bad) {
      for (const [method, path] of [
        ["POST", "/v1/keys"],
        ["PATCH", `/v1/keys/${target.id}`],
      ]) {
        const reply = await ada.request(method, path, { metadata });
        expect([reply.status, reply.body.code], `${method} ${JSON.stringify(metadata)}`).to.deep.equal([400, "invalid_request"]);
        expect(reply.body.error, `${method} ${JSON.stringify(metadata)}`).to.match(message);
      }
    }
    // A name JSON.parse makes an own property of, "__proto__", is refused like any other unsafe name.
    const proto = await ada.request("POST", "/v1/keys", '{"metadata":{"__proto__":{"polluted":"yes"}}}');
    expect([proto.status, proto.body.error]).to.deep.equal([
      400,
      'metadata: the name "__proto__" is not 1 to 40 letters, digits, "_", ".", ":" or "-" starting with a letter or a digit.',
    ]);
    expect(({} as Record<string, unknown>).polluted).to.equal(undefined);
    // Nothing was made or changed by a refused request.
    const after = await listedKeys(ada);
    expect(after.size).to.equal(count);
    expect(after.get(target.id)!.metadata).to.deep.equal({ keep: "me" });
  });

  it("PATCH changes name, spending limit and period, scopes, allowed skills, expiry and metadata at once", async () => {
    const key = await sessionKey(ada, { name: "old", scopes: ["calls"] });
    const expiresAt = fromNow(30 * DAY_MS);
    const changed = await ada.request("PATCH", `/v1/keys/${key.id}`, {
      name: "new",
      spend_limit_usd: "2.5",
      spend_limit_period: "month",
      scopes: ["calls", "usage:read"],
      allowed_skills: ["fail"],
      expires_at: expiresAt,
      metadata: { agent: "a-9" },
    });
    expect(changed.status, JSON.stringify(changed.body)).to.equal(200);
    const expected = {
      id: key.id,
      name: "new",
      spend_limit_usd: 2.5,
      spend_limit_base_units: "2500000",
      spend_limit_period: "month",
      scopes: ["calls", "usage:read"],
      allowed_skills: ["fail"],
      expires_at: new Date(Date.parse(expiresAt)).toISOString(),
      metadata: { agent: "a-9" },
    };
    expect(changed.body.data).to.deep.include(expected);
    expect((await listedKeys(ada)).get(key.id)).to.deep.include(expected);
    // In effect at once: echo is no longer allowed, usage:read now is.
    const echo = await callEcho(key.key);
    expect([echo.status, echo.body.code]).to.deep.equal([403, "skill_not_allowed"]);
    expect((await withKey(stack, key.key)("GET", "/v1/balance")).status).to.equal(200);

    // A period alone keeps the amount; null removes limit, expiry and restrictions; {} empties the metadata.
    const period = await ada.request("PATCH", `/v1/keys/${key.id}`, { spend_limit_period: "total" });
    expect(period.body.data).to.deep.include({ spend_limit_usd: 2.5, spend_limit_period: "total" });
    const cleared = await ada.request("PATCH", `/v1/keys/${key.id}`, {
      spend_limit_usd: null,
      allowed_skills: null,
      expires_at: null,
      metadata: {},
    });
    expect(cleared.body.data).to.deep.include({ spend_limit_usd: null, allowed_skills: null, expires_at: null, metadata: {}, name: "new" });
    expect((await callEcho(key.key)).status).to.equal(200);
  });

  it("PATCH is all or nothing: a request refused in any part changes nothing", async () => {
    const key = await sessionKey(ada, { name: "steady", metadata: { agent: "a-1" } });
    const before = (await listedKeys(ada)).get(key.id);
    const refusals: [Record<string, unknown>, number, RegExp][] = [
      // Refused inside the change's transaction, after the key is read: its name and metadata are not kept either.
      [{ name: "changed", metadata: { agent: "a-2" }, spend_limit_period: "month" }, 400, /^spend_limit_period alone changes the period/],
      [{ name: "changed", expires_at: new Date(Date.now() - 1_000).toISOString() }, 400, /^expires_at must be in the future\.$/],
      [{ name: "changed", allowed_skills: ["no-such-skill"] }, 400, /^allowed_skills: no listed skill "no-such-skill"\.$/],
      [{ name: "changed", allowed_skill: ["echo"] }, 400, /^Unknown field "allowed_skill": a key's fields are name, spend_limit_usd/],
      [
        {},
        400,
        /^Send at least one field to change: name, spend_limit_usd, spend_limit_period, scopes, allowed_skills, expires_at, metadata\.$/,
      ],
      [{ name: "changed", scopes: [] }, 400, /^scopes must be a list of at least one of calls, usage:read, funds:withdraw, keys:manage/],
    ];
    for (const [body, status, message] of refusals) {
      const reply = await ada.request("PATCH", `/v1/keys/${key.id}`, body);
      expect([reply.status, reply.body.error], JSON.stringify(body)).to.satisfy(
        ([s, e]: [number, string]) => s === status && message.test(e),
        `${JSON.stringify(body)} → ${reply.status} ${reply.body.error}`,
      );
    }
    expect((await listedKeys(ada)).get(key.id)).to.deep.equal(before);
    // A create with a misspelt field is refused the same way, rather than making a key wider than meant.
    const typo = await ada.request("POST", "/v1/keys", { allowed_skill: ["echo"] });
    expect([typo.status, typo.body.error]).to.deep.equal([
      400,
      'Unknown field "allowed_skill": a key\'s fields are name, spend_limit_usd, spend_limit_period, scopes, allowed_skills, expires_at, metadata.',
    ]);
  });

  it("stops what a narrowed key may no longer do at its next request, though its authentication is cached", async () => {
    const key = await sessionKey(ada, { scopes: ["calls", "usage:read"] });
    const asKey = withKey(stack, key.key);
    expect((await callEcho(key.key)).status).to.equal(200); // cached from here on (for ten minutes)
    expect((await asKey("GET", "/v1/balance")).status).to.equal(200);

    await ada.request("PATCH", `/v1/keys/${key.id}`, { scopes: ["calls"] });
    const balance = await asKey("GET", "/v1/balance");
    expect([balance.status, balance.body.code]).to.deep.equal([403, "scope_missing"]);

    await ada.request("PATCH", `/v1/keys/${key.id}`, { allowed_skills: ["fail"] });
    expect((await callEcho(key.key)).body.code).to.equal("skill_not_allowed");

    await ada.request("PATCH", `/v1/keys/${key.id}`, { allowed_skills: null, expires_at: fromNow(1_000) });
    expect((await callEcho(key.key)).status).to.equal(200);
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    const expired = await callEcho(key.key);
    expect([expired.status, expired.body.code]).to.deep.equal([401, "key_expired"]);
    // An expired key is given a new life by a later expiry.
    expect((await ada.request("PATCH", `/v1/keys/${key.id}`, { expires_at: fromNow(DAY_MS) })).status).to.equal(200);
    expect((await callEcho(key.key)).status).to.equal(200);
  });

  it("holds a management key narrowed or revoked by the dashboard to it at its next request, though it is cached", async () => {
    const manager = await sessionKey(ada, { scopes: ["keys:manage"] });
    const asManager = withKey(stack, manager.key);
    expect((await asManager("GET", "/v1/keys")).status).to.equal(200); // cached
    await ada.request("PATCH", `/v1/keys/${manager.id}`, { scopes: ["calls"] });
    const refused = await asManager("POST", "/v1/keys", { name: "x" });
    expect([refused.status, refused.body.code]).to.deep.equal([403, "scope_missing"]);
    await ada.request("PATCH", `/v1/keys/${manager.id}`, { scopes: ["keys:manage"] });
    expect((await asManager("POST", "/v1/keys", { name: "y" })).status).to.equal(201);
    await ada.request("DELETE", `/v1/keys/${manager.id}`);
    expect((await asManager("POST", "/v1/keys", { name: "z" })).status).to.equal(401);
  });
});
