import { expect } from "chai";
import type { FuzzStep } from "./cases";
import { type Answer, violation } from "./checks";

const step = (overrides: Partial<FuzzStep> = {}): FuzzStep => ({
  request: { transport: "fetch", method: "POST", path: "/v1/call", headers: {} },
  role: "call",
  ...overrides,
});
const answer = (status: number, body: unknown, headers: Record<string, string> = {}): Answer => ({
  status,
  headers,
  body: Buffer.from(typeof body === "string" ? body : JSON.stringify(body)),
});
const error = (code: string, extra: object = {}) => ({ success: false, error: "x", code, ...extra });

/** [what, step, method, path, answer, the rule it breaks or undefined]. */
const TABLE: [string, FuzzStep, string, string, Answer, RegExp | undefined][] = [
  [
    "a charged 200 from a call endpoint",
    step(),
    "POST",
    "/v1/call",
    answer(200, { success: true, data: {}, metadata: { price_paid: 0.001 } }),
    undefined,
  ],
  [
    "a backend's own 502, uncharged",
    step(),
    "POST",
    "/v1/call",
    answer(502, error("skill_error", { metadata: { price_paid: 0 } })),
    undefined,
  ],
  [
    "an egress refusal, 502 skill_backend_forbidden",
    step({ role: "hostile_call" }),
    "POST",
    "/v1/call",
    answer(502, error("skill_backend_forbidden")),
    undefined,
  ],
  [
    "a CSV file's 200 (GET /v1/usage.csv)",
    step({ role: "other" }),
    "GET",
    "/v1/usage.csv",
    answer(200, "created_at,call_id\r\n"),
    undefined,
  ],
  [
    "a CSV file's refusal that is not the JSON envelope",
    step({ role: "other" }),
    "GET",
    "/v1/usage.csv",
    answer(400, "created_at,call_id\r\n"),
    /not a JSON object/,
  ],
  ["the gateway's own 500", step(), "POST", "/v1/call", answer(500, error("internal_error")), /answered 500 internal_error/],
  ["a 502 that names no backend failure", step(), "POST", "/v1/call", answer(502, error("internal_error")), /only a backend's own failure/],
  [
    "503 chain_not_configured on a route that needs the chain",
    step({ role: "other" }),
    "POST",
    "/v1/withdrawals",
    answer(503, error("chain_not_configured")),
    undefined,
  ],
  [
    "503 chain_unavailable (a fault, not the configuration) on a route that needs the chain",
    step({ role: "other" }),
    "POST",
    "/v1/withdrawals",
    answer(503, error("chain_unavailable")),
    /answered 503 chain_unavailable/,
  ],
  [
    "503 chain_not_configured anywhere else",
    step({ role: "other" }),
    "GET",
    "/v1/balance",
    answer(503, error("chain_not_configured")),
    /answered 503/,
  ],
  ["a text body", step({ role: "other" }), "OPTIONS", "/v1/balance", answer(200, "GET, HEAD"), /not a JSON object/],
  ["JSON without success", step({ role: "other" }), "GET", "/v1/balance", answer(200, { data: 1 }), /boolean `success`/],
  ["success:true on a 4xx", step({ role: "other" }), "GET", "/v1/balance", answer(400, { success: true }), /success:true with status 400/],
  ["an error without its message", step({ role: "other" }), "GET", "/v1/balance", answer(401, { success: false }), /`error` string/],
  ["no body at all (Node's own 400)", step(), "POST", "/v1/call", answer(400, ""), undefined],
  ["the dashboard's HTML", step({ role: "other" }), "GET", "/wallet", answer(200, "<html></html>"), undefined],
  [
    "the page a mailed sign-in link opens",
    step({ role: "other" }),
    "GET",
    "/auth/email/callback?token=x",
    answer(200, "<html></html>"),
    undefined,
  ],
  ["HTML from an API route", step({ role: "other" }), "GET", "/v1/skills", answer(200, "<html></html>"), /not a JSON object/],
  ["a redirect's text", step({ role: "other" }), "GET", "/auth/email/callback", answer(303, "See Other"), undefined],
  [
    "a 200 that charged nothing",
    step(),
    "POST",
    "/v1/call",
    answer(200, { success: true, data: {}, metadata: { price_paid: 0 } }),
    /charged 0/,
  ],
  [
    "a failure that says it charged",
    step(),
    "POST",
    "/v1/call",
    answer(502, error("skill_error", { metadata: { cost: 0.001 } })),
    /says it charged/,
  ],
  [
    "an accepted listing of an internal URL",
    step({ role: "hostile_listing" }),
    "POST",
    "/v1/seller/skills",
    answer(201, { success: true, data: {} }),
    /internal backend URL was accepted/,
  ],
  [
    "a 200 from a skill at an internal address",
    step({ role: "hostile_call" }),
    "POST",
    "/v1/call",
    answer(200, { success: true, data: {}, metadata: { cost: 0.001 } }),
    /reached an internal service/,
  ],
  [
    "a bad credential let through",
    step({ mustRefuse: true }),
    "POST",
    "/v1/call",
    answer(200, { success: true, data: {}, metadata: { cost: 0.001 } }),
    /must be refused/,
  ],
  ["a bad credential refused", step({ mustRefuse: true }), "POST", "/v1/call", answer(401, error("unauthorized")), undefined],
  [
    "a SQLite error in a message",
    step({ role: "other" }),
    "GET",
    "/v1/usage",
    answer(400, error("invalid_request", { error: "SQLITE_ERROR: no such column" })),
    /internal detail/,
  ],
];

describe("the fuzz harness's rules for an answer", () => {
  for (const [what, s, method, path, a, broken] of TABLE) {
    it(`${broken ? "flags" : "passes"} ${what}`, () => {
      const found = violation(s, method, path, a);
      if (broken) expect(found).to.match(broken);
      else expect(found).to.equal(undefined);
    });
  }
});
