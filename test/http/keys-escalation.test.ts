import { expect } from "chai";
import { describeEachEngine } from "../helpers/engines";
import { type TestStack, startStack } from "../helpers/gateway";
import { DAY_MS, fromNow, listedKeys, sessionKey, withKey } from "../helpers/keys";
import { type TestSession, signedIn } from "../helpers/session";

/**
 * What a keys:manage key cannot do (docs/keys.md, "Keys made by code"; server/identity/key-authority.ts), tried as an
 * attacker holding one would: one table of attempts, each on a fresh account with a fresh management key, each
 * checked to be refused with its code and message and to have changed nothing, or let through with what it says.
 * A dashboard session may do all of it (the last test).
 */

/** A management key held to some skills, an expiry and a spending limit, with usage:read to hand on. */
const EXPIRES_IN_30_DAYS = fromNow(30 * DAY_MS);
const RESTRICTED = {
  scopes: ["keys:manage", "usage:read"],
  allowed_skills: ["echo", "fail"],
  expires_at: EXPIRES_IN_30_DAYS,
  spend_limit_usd: "1.00",
  spend_limit_period: "day",
};
/** A key as the restricted management key could have made it. */
const WITHIN_RESTRICTED = { allowed_skills: ["echo"], expires_at: fromNow(DAY_MS), spend_limit_usd: "0.50", spend_limit_period: "day" };
/** Every key made before scopes holds these (the scopes' migration, docs/accounts.md): more than a management key may grant. */
const LEGACY = { scopes: ["calls", "usage:read", "funds:withdraw"] };

interface Attempt {
  title: string;
  /** The management key's fields (a session makes it); keys:manage alone when left out. */
  manager?: Record<string, unknown>;
  action: "create" | "change" | "revoke";
  /** The key changed or revoked: made by the session with these fields, the management key itself, or another account's. */
  target?: Record<string, unknown> | "itself" | "another account's";
  body?: Record<string, unknown>;
  /** The refusal expected; absent: let through. */
  refused?: { status: number; code: string; message: RegExp };
  /** What the key made or changed shows, when let through. */
  shows?: Record<string, unknown>;
}

const AUTHORITY = (message: RegExp) => ({ status: 403, code: "authority_exceeded", message });

const ATTEMPTS: Attempt[] = [
  // Making keys: scopes.
  { title: "mints a calls key", action: "create", body: { scopes: ["calls"] }, shows: { scopes: ["calls"] } },
  { title: "mints a key with no scopes asked: calls", action: "create", body: {}, shows: { scopes: ["calls"] } },
  {
    title: "mints another management key",
    action: "create",
    body: { scopes: ["keys:manage"] },
    refused: AUTHORITY(/^A keys:manage key cannot give a key the keys:manage scope: only a dashboard session can\.$/),
  },
  {
    title: "mints a key that withdraws",
    action: "create",
    body: { scopes: ["calls", "funds:withdraw"] },
    refused: AUTHORITY(/^A keys:manage key cannot give a key the funds:withdraw scope/),
  },
  {
    title: "mints a key that reads the account's usage, not holding usage:read",
    action: "create",
    body: { scopes: ["calls", "usage:read"] },
    refused: AUTHORITY(/^This keys:manage key cannot give a key the usage:read scope, which it does not hold itself\.$/),
  },
  {
    title: "mints a usage:read key, holding usage:read",
    manager: { scopes: ["keys:manage", "usage:read"] },
    action: "create",
    body: { scopes: ["usage:read"] },
    shows: { scopes: ["usage:read"] },
  },
  // Making keys: a restricted management key's restrictions.
  {
    title: "mints under a restricted management key: its restrictions are the defaults",
    manager: RESTRICTED,
    action: "create",
    body: { metadata: { agent: "a-1" } },
    shows: {
      allowed_skills: ["echo", "fail"],
      expires_at: new Date(Date.parse(EXPIRES_IN_30_DAYS)).toISOString(),
      spend_limit_usd: 1,
      spend_limit_period: "day",
      metadata: { agent: "a-1" },
    },
  },
  { title: "mints within them", manager: RESTRICTED, action: "create", body: WITHIN_RESTRICTED, shows: { allowed_skills: ["echo"] } },
  {
    title: "mints a key for every skill",
    manager: RESTRICTED,
    action: "create",
    body: { allowed_skills: null },
    refused: AUTHORITY(/^This keys:manage key may call only echo, fail: a key it makes may not call every skill/),
  },
  {
    title: "mints a key for a skill outside its own",
    manager: RESTRICTED,
    action: "create",
    body: { allowed_skills: ["echo", "reject"] },
    refused: AUTHORITY(/^This keys:manage key may call only echo, fail: "reject" is not one of them\.$/),
  },
  {
    title: "mints a key that never expires",
    manager: RESTRICTED,
    action: "create",
    body: { expires_at: null },
    refused: AUTHORITY(/^This keys:manage key expires at .*: a key it makes or changes must expire no later\.$/),
  },
  {
    title: "mints a key that outlives it",
    manager: RESTRICTED,
    action: "create",
    body: { expires_at: fromNow(31 * DAY_MS) },
    refused: AUTHORITY(/must expire no later/),
  },
  {
    title: "mints a key without a spending limit",
    manager: RESTRICTED,
    action: "create",
    body: { spend_limit_usd: null },
    refused: AUTHORITY(
      /^This keys:manage key may spend \$1\.00 per day: a key it makes or changes needs a spending limit of at most that, per day or per month or in total\.$/,
    ),
  },
  {
    title: "mints a key with a higher limit",
    manager: RESTRICTED,
    action: "create",
    body: { spend_limit_usd: "1.000001", spend_limit_period: "day" },
    refused: AUTHORITY(/may spend \$1\.00 per day/),
  },
  {
    title: "mints a key with the same amount over a longer period",
    manager: RESTRICTED,
    action: "create",
    body: { spend_limit_usd: "1", spend_limit_period: "month" },
    shows: { spend_limit_usd: 1, spend_limit_period: "month" },
  },
  {
    title: "mints a key with the same amount over a shorter period",
    manager: { scopes: ["keys:manage"], spend_limit_usd: "1", spend_limit_period: "month" },
    action: "create",
    body: { spend_limit_usd: "1", spend_limit_period: "day" },
    refused: AUTHORITY(/may spend \$1\.00 per month: .* per month or in total\.$/),
  },
  // Changing keys.
  {
    title: "changes a calls key it could have made",
    action: "change",
    target: { scopes: ["calls"] },
    body: { name: "agent-2", allowed_skills: ["echo"], expires_at: fromNow(DAY_MS), metadata: { end_user: "u_2" } },
    shows: { name: "agent-2", allowed_skills: ["echo"], metadata: { end_user: "u_2" } },
  },
  {
    title: "gives a key keys:manage",
    action: "change",
    target: { scopes: ["calls"] },
    body: { scopes: ["calls", "keys:manage"] },
    refused: AUTHORITY(/cannot give a key the keys:manage scope/),
  },
  {
    title: "gives a key funds:withdraw",
    action: "change",
    target: { scopes: ["calls"] },
    body: { scopes: ["funds:withdraw"] },
    refused: AUTHORITY(/cannot give a key the funds:withdraw scope/),
  },
  {
    title: "widens its own scopes",
    action: "change",
    target: "itself",
    body: { scopes: ["keys:manage", "funds:withdraw"] },
    refused: AUTHORITY(/^A keys:manage key cannot change itself: only a dashboard session can\.$/),
  },
  {
    title: "lifts its own restrictions",
    manager: RESTRICTED,
    action: "change",
    target: "itself",
    body: { spend_limit_usd: null, allowed_skills: null, expires_at: null },
    refused: AUTHORITY(/cannot change itself/),
  },
  {
    title: "renames a key made before scopes, which can withdraw",
    action: "change",
    target: LEGACY,
    body: { name: "mine now" },
    refused: AUTHORITY(
      /^This key may do more than this keys:manage key may grant, so only a dashboard session can change it\. \(This keys:manage key cannot give a key the usage:read scope, which it does not hold itself\.\)$/,
    ),
  },
  {
    title: "narrows a key made before scopes to what it may grant",
    action: "change",
    target: LEGACY,
    body: { scopes: ["calls"] },
    refused: AUTHORITY(/only a dashboard session can change it/),
  },
  {
    title: "demotes another management key",
    action: "change",
    target: { scopes: ["keys:manage"] },
    body: { scopes: ["calls"] },
    refused: AUTHORITY(/only a dashboard session can change it\. \(A keys:manage key cannot give a key the keys:manage scope/),
  },
  {
    title: "changes a key wider than its own restrictions",
    manager: RESTRICTED,
    action: "change",
    target: { scopes: ["calls"] },
    body: { name: "x" },
    refused: AUTHORITY(/only a dashboard session can change it\. \(This keys:manage key may call only echo, fail/),
  },
  {
    title: "raises a key's limit past its own",
    manager: RESTRICTED,
    action: "change",
    target: WITHIN_RESTRICTED,
    body: { spend_limit_usd: "5" },
    refused: AUTHORITY(/may spend \$1\.00 per day/),
  },
  {
    title: "removes a key's limit",
    manager: RESTRICTED,
    action: "change",
    target: WITHIN_RESTRICTED,
    body: { spend_limit_usd: null },
    refused: AUTHORITY(/may spend \$1\.00 per day/),
  },
  {
    title: "lifts a key's expiry",
    manager: RESTRICTED,
    action: "change",
    target: WITHIN_RESTRICTED,
    body: { expires_at: null },
    refused: AUTHORITY(/must expire no later/),
  },
  {
    title: "opens a key to every skill",
    manager: RESTRICTED,
    action: "change",
    target: WITHIN_RESTRICTED,
    body: { allowed_skills: null },
    refused: AUTHORITY(/may not call every skill/),
  },
  {
    title: "raises a key's limit up to its own",
    manager: RESTRICTED,
    action: "change",
    target: WITHIN_RESTRICTED,
    body: { spend_limit_usd: "1", allowed_skills: ["fail"] },
    shows: { spend_limit_usd: 1, allowed_skills: ["fail"] },
  },
  {
    title: "changes another account's key",
    action: "change",
    target: "another account's",
    body: { name: "x" },
    refused: { status: 404, code: "not_found", message: /^No such key on this account\.$/ },
  },
  // Revoking keys.
  { title: "revokes a calls key it could have made", action: "revoke", target: { scopes: ["calls"] } },
  {
    title: "revokes a key made before scopes",
    action: "revoke",
    target: LEGACY,
    refused: AUTHORITY(/^This key may do more than this keys:manage key may grant, so only a dashboard session can revoke it\./),
  },
  {
    title: "revokes another management key",
    action: "revoke",
    target: { scopes: ["keys:manage"] },
    refused: AUTHORITY(/can revoke it/),
  },
  {
    title: "revokes a key wider than its restrictions",
    manager: RESTRICTED,
    action: "revoke",
    target: { scopes: ["calls"] },
    refused: AUTHORITY(/can revoke it/),
  },
  { title: "revokes itself", action: "revoke", target: "itself" },
  {
    title: "revokes another account's key",
    action: "revoke",
    target: "another account's",
    refused: { status: 404, code: "not_found", message: /^No such key on this account\.$/ },
  },
];

/** The account's keys as listed, less their last use (the management key's own request moves it). */
const keysOf = async (session: TestSession) =>
  [...(await listedKeys(session)).values()].map(({ last_used_at: _lastUsed, ...rest }) => rest);

describeEachEngine("what a keys:manage key cannot do", (engine) => {
  let stack: TestStack;
  let bob: TestSession;
  let accounts = 0;

  before(async () => {
    stack = await startStack({ engine: engine.name });
    bob = await signedIn(stack, "bob@example.com");
  });
  after(async () => {
    await stack.close();
  });

  for (const attempt of ATTEMPTS) {
    const outcome = attempt.refused ? `refused ${attempt.refused.status} ${attempt.refused.code}` : "let through";
    it(`${attempt.title}: ${outcome}`, async () => {
      const owner = await signedIn(stack, `owner-${++accounts}@example.com`);
      const manager = await sessionKey(owner, { name: "manager", scopes: ["keys:manage"], ...attempt.manager });
      const target =
        attempt.target === "itself"
          ? manager
          : attempt.target === "another account's"
            ? await sessionKey(bob, { name: "bob's" })
            : attempt.target && (await sessionKey(owner, { name: "target", ...attempt.target }));
      const before = { owner: await keysOf(owner), bob: await keysOf(bob) };

      const asManager = withKey(stack, manager.key);
      const reply =
        attempt.action === "create"
          ? await asManager("POST", "/v1/keys", attempt.body)
          : attempt.action === "change"
            ? await asManager("PATCH", `/v1/keys/${target!.id}`, attempt.body)
            : await asManager("DELETE", `/v1/keys/${target!.id}`);

      if (attempt.refused) {
        expect([reply.status, reply.body.code], JSON.stringify(reply.body)).to.deep.equal([attempt.refused.status, attempt.refused.code]);
        expect(reply.body.error).to.match(attempt.refused.message);
        // Nothing was made, changed or revoked, on either account.
        expect(await keysOf(owner)).to.deep.equal(before.owner);
        expect(await keysOf(bob)).to.deep.equal(before.bob);
        return;
      }
      expect(reply.status, JSON.stringify(reply.body)).to.equal(attempt.action === "create" ? 201 : 200);
      if (attempt.shows) expect(reply.body.data).to.deep.include(attempt.shows);
      if (attempt.action === "revoke") expect((await listedKeys(owner)).has(target!.id)).to.equal(false);
    });
  }

  it("a key it made, or any key without keys:manage, makes no key: 403 scope_missing", async () => {
    const owner = await signedIn(stack, `owner-${++accounts}@example.com`);
    const manager = await sessionKey(owner, { scopes: ["keys:manage"] });
    const made = (await withKey(stack, manager.key)("POST", "/v1/keys", {})).body.data;
    for (const key of [made.key, (await sessionKey(owner, LEGACY)).key]) {
      for (const [method, path, body] of [
        ["POST", "/v1/keys", { scopes: ["calls"] }],
        ["GET", "/v1/keys", undefined],
        ["PATCH", `/v1/keys/${made.id}`, { name: "x" }],
        ["DELETE", `/v1/keys/${made.id}`, undefined],
      ] as const) {
        const reply = await withKey(stack, key)(method, path, body);
        expect([reply.status, reply.body.code], `${method} ${path}`).to.deep.equal([403, "scope_missing"]);
        expect(reply.body.error).to.include("keys:manage");
      }
    }
  });

  it("a management key calls no skill, through either endpoint or MCP, and moves no money", async () => {
    const owner = await signedIn(stack, `owner-${++accounts}@example.com`);
    await stack.gw.ledger.credit(owner.accountId, 1_000_000n, "dev_credit", "test");
    const manager = await sessionKey(owner, { scopes: ["keys:manage"] });
    const asManager = withKey(stack, manager.key);
    const before = await stack.available(owner.accountId);
    for (const [path, body] of [
      ["/v1/call", { skill_id: "echo", input: {} }],
      ["/v1/skills/echo/call", {}],
      ["/v1/withdrawals", { amount: "0.10" }],
    ] as const) {
      const reply = await asManager("POST", path, body);
      expect([reply.status, reply.body.code], path).to.deep.equal([403, "scope_missing"]);
    }
    expect(await stack.available(owner.accountId)).to.equal(before);
  });

  it("a dashboard session may do every one of those things", async () => {
    const owner = await signedIn(stack, `owner-${++accounts}@example.com`);
    const key = await sessionKey(owner, { scopes: ["keys:manage", "funds:withdraw", "calls", "usage:read"], expires_at: null });
    const changed = await owner.request("PATCH", `/v1/keys/${key.id}`, {
      scopes: ["keys:manage"],
      allowed_skills: null,
      spend_limit_usd: null,
    });
    expect(changed.status).to.equal(200);
    const legacy = await sessionKey(owner, LEGACY);
    expect(
      (await owner.request("PATCH", `/v1/keys/${legacy.id}`, { name: "renamed", scopes: ["calls", "funds:withdraw"] })).status,
    ).to.equal(200);
    expect((await owner.request("DELETE", `/v1/keys/${legacy.id}`)).status).to.equal(200);
  });
});
