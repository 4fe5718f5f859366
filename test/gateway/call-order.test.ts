import { expect } from "chai";
import { type TestStack, startStack } from "../helpers/gateway";

/**
 * The documented order of the call path's checks (server/gateway/call-service.ts): when a
 * request breaks several rules at once, the earliest check decides the answer. Each row
 * breaks its own rule and every later one, so it pins the position of its check.
 */
describe("the order of the call path's checks", () => {
  let stack: TestStack;
  let poorKey: string;
  let poorKey2: string;
  let limitedKey: string;
  let spentKey: string;
  let expiredKey: string;
  let managerKey: string;
  let echoOnlyKey: string;
  before(async () => {
    stack = await startStack({ config: { rateLimitPerMin: 1 } });
    await stack.addSkill("typed-fail", "/fail", { inputSchema: { type: "object", required: ["n"] } });
    poorKey = (await stack.addBuyer("0")).key;
    // A poor account whose key's spending limit is too small for the call as well: the balance is told first.
    const poor2 = await stack.addBuyer("0");
    poorKey2 = (await stack.gw.keys.create(poor2.accountId, { spendLimit: { limitMicros: 1n, period: "day" } })).key;
    // A funded account whose key's spending limit is too small for the call.
    const funded = await stack.addBuyer("1");
    spentKey = (await stack.gw.keys.create(funded.accountId, { spendLimit: { limitMicros: 1n, period: "total" } })).key;
    limitedKey = (await stack.addBuyer("0")).key;
    // Spend the limited key's one call per minute (it is refused for balance, but counted).
    await stack.post("/v1/call", { skill_id: "echo", input: {} }, { key: limitedKey });
    // A key past its expiry, and a key without the calls scope, each on an account that could not pay anyway.
    const idle = await stack.addBuyer("0");
    expiredKey = (await stack.gw.keys.create(idle.accountId, { expiresAtMs: Date.now() - 1_000, scopes: ["keys:manage"] })).key;
    managerKey = (await stack.gw.keys.create(idle.accountId, { scopes: ["keys:manage"] })).key;
    // A key that may call echo alone, its one call per minute spent on it.
    echoOnlyKey = (await stack.gw.keys.create(idle.accountId, { allowedSkills: ["echo"] })).key;
    await stack.post("/v1/call", { skill_id: "echo", input: {} }, { key: echoOnlyKey });
  });
  after(async () => {
    await stack.close();
  });

  /** A max_price below every paid skill's price (typed-fail costs $0.001): the rows up to 4b break the price cap too. */
  const BELOW = "0.000001";
  const rows: Array<{ check: string; status: number; code: string; key: () => string | null; body: unknown }> = [
    { check: "1. authentication", status: 401, code: "unauthorized", key: () => null, body: "{not json" },
    { check: "1a. the key's expiry", status: 401, code: "key_expired", key: () => expiredKey, body: "{not json" },
    { check: "1b. the key's scope (calls)", status: 403, code: "scope_missing", key: () => managerKey, body: "{not json" },
    { check: "2. body is JSON", status: 400, code: "invalid_json", key: () => limitedKey, body: "{not json" },
    {
      check: "3. body shape",
      status: 400,
      code: "invalid_request",
      key: () => limitedKey,
      body: { skill_id: "no-such", input: 1, max_price: BELOW },
    },
    {
      check: "4. skill exists",
      status: 404,
      code: "skill_not_found",
      key: () => echoOnlyKey,
      body: { skill_id: "no-such", input: {}, max_price: BELOW },
    },
    {
      check: "4a. the key's allowed skills",
      status: 403,
      code: "skill_not_allowed",
      key: () => echoOnlyKey,
      body: { skill_id: "typed-fail", input: {}, max_price: BELOW },
    },
    {
      check: "4b. the call's max_price",
      status: 409,
      code: "price_above_max",
      key: () => limitedKey,
      body: { skill_id: "typed-fail", input: {}, max_price: BELOW },
    },
    { check: "5. rate limit", status: 429, code: "rate_limited", key: () => limitedKey, body: { skill_id: "typed-fail", input: {} } },
    { check: "6. input schema", status: 400, code: "invalid_input", key: () => poorKey, body: { skill_id: "typed-fail", input: {} } },
    {
      check: "7. balance",
      status: 402,
      code: "insufficient_balance",
      key: () => poorKey2,
      body: { skill_id: "typed-fail", input: { n: 1 } },
    },
    {
      check: "8. the key's spending limit",
      status: 402,
      code: "key_spend_limit_reached",
      key: () => spentKey,
      body: { skill_id: "typed-fail", input: { n: 1 } },
    },
    { check: "9. the backend", status: 502, code: "skill_error", key: () => stack.key, body: { skill_id: "typed-fail", input: { n: 1 } } },
  ];

  for (const row of rows) {
    it(`answers ${row.status} ${row.code} first at step ${row.check}`, async () => {
      const res = await stack.post("/v1/call", row.body, { key: row.key() });
      expect(res.status).to.equal(row.status);
      expect(res.body.code).to.equal(row.code);
    });
  }
});
