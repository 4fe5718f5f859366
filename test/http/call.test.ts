import { expect } from "chai";
import { SkillRegistry } from "../../server/catalog/skills";
import { SkillsStore } from "../../server/catalog/skills-store";
import { openDatabase } from "../../server/db/db";
import { PostgresDatabase } from "../../server/db/postgres/database";
import { createPostgresPool } from "../../server/db/postgres/pool";
import type { Database } from "../../server/db/sql";
import { SqliteDatabase } from "../../server/db/sqlite-database";
import { assertBalanced } from "../../server/ledger/invariants";
import { SCHEMA } from "../../server/schema";
import { describeEachEngine } from "../helpers/engines";
import { type TestStack, startStack } from "../helpers/gateway";
import { sqliteOf } from "../helpers/ledger";

/** The buyer's, the seller's and the platform's balances. */
const balances = async (stack: TestStack) => [await stack.available(), await stack.earned(), await stack.fees()];

/** Checks that nothing moved: the buyer, the seller and the platform hold what they held. */
async function expectNoCharge(stack: TestStack, action: () => Promise<unknown>): Promise<void> {
  const before = await balances(stack);
  await action();
  await stack.gw.db.durable();
  expect(await balances(stack)).to.deep.equal(before);
  expect((await stack.gw.ledger.balance(stack.buyerId)).heldMicros).to.equal(0n);
  await assertBalanced(stack.gw.db);
}

/** Makes every insert into `calls` fail, as a fault of the gateway's own database would. */
async function injectCallsFault(stack: TestStack): Promise<void> {
  if (stack.engine === "sqlite") {
    // In the file, not TEMP: the ledger writer's thread writes calls' lines on a connection of its own.
    sqliteOf(stack.gw.db).db.exec("CREATE TRIGGER injected_fault BEFORE INSERT ON calls BEGIN SELECT RAISE(ABORT, 'injected fault'); END");
  } else {
    await stack.gw.db.run(
      "CREATE FUNCTION injected_fault() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'injected fault'; END $$",
    );
    await stack.gw.db.run("CREATE TRIGGER injected_fault BEFORE INSERT ON calls FOR EACH ROW EXECUTE FUNCTION injected_fault()");
  }
}

async function removeCallsFault(stack: TestStack): Promise<void> {
  if (stack.engine === "sqlite") {
    sqliteOf(stack.gw.db).db.exec("DROP TRIGGER injected_fault");
  } else {
    await stack.gw.db.run("DROP TRIGGER injected_fault ON calls");
    await stack.gw.db.run("DROP FUNCTION injected_fault()");
  }
}

/** A second connection to the stack's tables, as another process (a replica, the register script) has. */
function otherConnection(stack: TestStack): Database {
  if (stack.engine === "sqlite") return new SqliteDatabase(openDatabase(stack.dbPath, SCHEMA));
  return new PostgresDatabase(createPostgresPool({ url: stack.databaseUrl, max: 2 }));
}

describeEachEngine("POST /v1/call", (engine) => {
  let stack: TestStack;
  beforeEach(async () => {
    stack = await startStack({ engine: engine.name });
  });
  afterEach(async () => {
    await stack.close();
  });

  it("calls the skill and answers the spec's envelope with snake_case metadata", async () => {
    const res = await stack.post("/v1/call", { skill_id: "echo", input: { hello: "world" } });
    expect(res.status).to.equal(200);
    expect(res.body).to.have.all.keys("success", "data", "metadata");
    expect(res.body.success).to.equal(true);
    expect(res.body.data).to.deep.equal({ hello: "world" });
    expect(res.body.metadata).to.have.all.keys("skill_id", "response_time_ms", "price_paid", "call_id");
    expect(res.body.metadata.skill_id).to.equal("echo");
    // The call's id in the body as well as the header (issue 26 section 3).
    expect(res.body.metadata.call_id).to.equal(res.headers.get("x-call-id"));
    expect(res.body.metadata.price_paid).to.equal(0.001);
    expect(res.body.metadata.response_time_ms).to.be.a("number").and.at.least(0);
  });

  it("takes exactly the price from the balance and splits it 90/10", async () => {
    await stack.post("/v1/call", { skill_id: "echo", input: {} });
    expect(await stack.available()).to.equal(10_000_000n - 1_000n);
    expect(await stack.earned()).to.equal(900n);
    expect(await stack.fees()).to.equal(100n);
  });

  it("resolves a skill by its UUID as well as its slug", async () => {
    const echo = stack.gw.skills.resolve("echo")!;
    const res = await stack.post("/v1/call", { skill_id: echo.id.toUpperCase(), input: { a: 1 } });
    expect(res.status).to.equal(200);
    expect(res.body.metadata.skill_id).to.equal("echo");
  });

  it("sets rate limit headers and a call id on a success", async () => {
    const res = await stack.post("/v1/call", { skill_id: "echo", input: {} });
    expect(res.headers.get("ratelimit-limit")).to.equal("100");
    expect(res.headers.get("ratelimit-remaining")).to.equal("99");
    expect(res.headers.get("x-call-id")).to.match(/^[0-9a-f-]{36}$/);
  });

  describe("refuses without charging", () => {
    const cases: Array<{ name: string; status: number; code: string; send: (s: TestStack) => Promise<{ status: number; body: any }> }> = [
      { name: "malformed JSON", status: 400, code: "invalid_json", send: (s) => s.post("/v1/call", '{"skill_id": "echo",') },
      { name: "a body that is not an object", status: 400, code: "invalid_request", send: (s) => s.post("/v1/call", "[1,2]") },
      { name: "a missing skill_id", status: 400, code: "invalid_request", send: (s) => s.post("/v1/call", { input: {} }) },
      { name: "an empty skill_id", status: 400, code: "invalid_request", send: (s) => s.post("/v1/call", { skill_id: " ", input: {} }) },
      { name: "a missing input", status: 400, code: "invalid_request", send: (s) => s.post("/v1/call", { skill_id: "echo" }) },
      {
        name: "an input that is an array",
        status: 400,
        code: "invalid_request",
        send: (s) => s.post("/v1/call", { skill_id: "echo", input: [1] }),
      },
      {
        name: "an input that is a string",
        status: 400,
        code: "invalid_request",
        send: (s) => s.post("/v1/call", { skill_id: "echo", input: "hi" }),
      },
      {
        name: "a missing Authorization header",
        status: 401,
        code: "unauthorized",
        send: (s) => s.post("/v1/call", { skill_id: "echo", input: {} }, { key: null }),
      },
      {
        name: "a key without the atom_ prefix",
        status: 401,
        code: "unauthorized",
        send: (s) => s.post("/v1/call", { skill_id: "echo", input: {} }, { key: "sk_live_123" }),
      },
      {
        name: "an unknown key",
        status: 401,
        code: "unauthorized",
        send: (s) => s.post("/v1/call", { skill_id: "echo", input: {} }, { key: `atom_${"1".repeat(44)}` }),
      },
      {
        name: "a Basic Authorization header",
        status: 401,
        code: "unauthorized",
        send: (s) => s.post("/v1/call", { skill_id: "echo", input: {} }, { key: null, headers: { authorization: `Basic ${s.key}` } }),
      },
      {
        name: "an unknown skill",
        status: 404,
        code: "skill_not_found",
        send: (s) => s.post("/v1/call", { skill_id: "no-such-skill", input: {} }),
      },
      {
        name: "an unknown skill UUID",
        status: 404,
        code: "skill_not_found",
        send: (s) => s.post("/v1/call", { skill_id: "00000000-0000-4000-8000-000000000000", input: {} }),
      },
      {
        name: "a body over the size limit",
        status: 413,
        code: "payload_too_large",
        send: (s) => s.post("/v1/call", { skill_id: "echo", input: { x: "y".repeat(300 * 1024) } }),
      },
      {
        name: "a backend 4xx (passed through as 400)",
        status: 400,
        code: "skill_rejected_input",
        send: (s) => s.post("/v1/call", { skill_id: "reject", input: {} }),
      },
      { name: "a backend 500", status: 502, code: "skill_error", send: (s) => s.post("/v1/call", { skill_id: "fail", input: {} }) },
      { name: "a backend 503", status: 502, code: "skill_error", send: (s) => s.post("/v1/call", { skill_id: "unavailable", input: {} }) },
      {
        name: "a backend answering HTML",
        status: 502,
        code: "skill_invalid_response",
        send: (s) => s.post("/v1/call", { skill_id: "notjson", input: {} }),
      },
    ];
    for (const c of cases) {
      it(`answers ${c.status} ${c.code} to ${c.name}`, async () => {
        await expectNoCharge(stack, async () => {
          const res = await c.send(stack);
          expect(res.status).to.equal(c.status);
          expect(res.body.success).to.equal(false);
          expect(res.body.error).to.be.a("string").and.not.empty;
          expect(res.body.code).to.equal(c.code);
        });
      });
    }

    it("answers 401 to a revoked key", async () => {
      const { key, record } = await stack.gw.keys.create(stack.buyerId);
      expect((await stack.post("/v1/call", { skill_id: "echo", input: {} }, { key })).status).to.equal(200);
      await stack.gw.keys.revoke(record.id);
      await expectNoCharge(stack, async () => {
        const res = await stack.post("/v1/call", { skill_id: "echo", input: {} }, { key });
        expect(res.status).to.equal(401);
      });
    });

    it("answers 402 when the balance is below the price, and says how much is missing", async () => {
      const poor = await stack.addBuyer("0.0005");
      const before = await stack.available(poor.accountId);
      const res = await stack.post("/v1/call", { skill_id: "echo", input: {} }, { key: poor.key });
      expect(res.status).to.equal(402);
      expect(res.body).to.include({ success: false, code: "insufficient_balance" });
      expect(res.body.error).to.contain("0.001").and.contain("0.0005");
      expect(res.body.metadata.price_paid).to.equal(0);
      expect(await stack.available(poor.accountId)).to.equal(before);
      expect(stack.backend.hits.get("/echo") ?? 0).to.equal(0);
    });

    it("answers 400 with the schema's complaint when the input does not fit", async () => {
      await stack.addSkill("typed", "/echo", {
        inputSchema: { type: "object", properties: { n: { type: "integer" } }, required: ["n"] },
      });
      await expectNoCharge(stack, async () => {
        const res = await stack.post("/v1/call", { skill_id: "typed", input: { n: "seven" } });
        expect(res.status).to.equal(400);
        expect(res.body.code).to.equal("invalid_input");
        expect(res.body.error).to.contain("/n must be integer");
      });
      expect((await stack.post("/v1/call", { skill_id: "typed", input: { n: 7 } })).status).to.equal(200);
    });

    it("answers 502 with price_paid 0 when the backend times out", async () => {
      await stack.addSkill("hang", "/hang", { timeoutMs: 200 });
      await expectNoCharge(stack, async () => {
        const res = await stack.post("/v1/call", { skill_id: "hang", input: {} });
        expect(res.status).to.equal(502);
        expect(res.body.code).to.equal("skill_timeout");
        expect(res.body.metadata).to.deep.include({ skill_id: "hang", price_paid: 0 });
      });
    });

    it("answers 502 when the backend refuses the connection", async () => {
      await stack.close();
      // Allowlisted, so that the connection is attempted (and refused by the closed port).
      stack = await startStack({ engine: engine.name, config: { skillBackendAllowlist: ["http://127.0.0.1:1"] } });
      await stack.addSkill("gone", "/echo", { backendUrl: "http://127.0.0.1:1/echo" });
      await expectNoCharge(stack, async () => {
        const res = await stack.post("/v1/call", { skill_id: "gone", input: {} });
        expect(res.status).to.equal(502);
        expect(res.body.code).to.equal("skill_unreachable");
      });
    });

    it("answers 502 when the backend's answer is over the size cap", async () => {
      await stack.close();
      stack = await startStack({ engine: engine.name, config: { maxResponseBytes: 16 * 1024 } });
      await expectNoCharge(stack, async () => {
        const res = await stack.post("/v1/call", { skill_id: "big", input: {} });
        expect(res.status).to.equal(502);
        expect(res.body.code).to.equal("skill_invalid_response");
      });
    });

    it("answers 500 and releases the hold when the gateway itself fails after the backend answered", async () => {
      await injectCallsFault(stack);
      await expectNoCharge(stack, async () => {
        const res = await stack.post("/v1/call", { skill_id: "echo", input: {} });
        expect(res.status).to.equal(500);
        expect(res.body).to.deep.equal({
          success: false,
          error: "Internal server error: the call was not charged.",
          code: "internal_error",
          request_id: res.headers.get("x-request-id"),
        });
      });
      expect(stack.backend.hits.get("/echo")).to.equal(1);
      await removeCallsFault(stack);
      expect((await stack.post("/v1/call", { skill_id: "echo", input: {} })).status).to.equal(200);
    });
  });

  it("releases the hold and answers 502 when a backend's answer is too deeply nested to be sent on", async () => {
    await stack.addSkill("deep", "/deep");
    await expectNoCharge(stack, async () => {
      const res = await stack.post("/v1/call", { skill_id: "deep", input: {} });
      expect(res.status).to.equal(502);
      expect(res.body).to.include({ success: false, code: "skill_invalid_response" });
      expect(res.body.error).to.include("nested too deeply");
      expect(res.body.metadata).to.include({ skill_id: "deep", price_paid: 0 });
    });
    expect(await stack.gw.db.value("SELECT COUNT(*) FROM holds WHERE status = 'open'")).to.equal(0n);
  });

  it("answers 400 to a malformed percent-escape in the path, and keeps serving", async () => {
    const res = await stack.post("/v1/skills/%E0%A4%A/call", {});
    expect(res.status).to.equal(400);
    expect(res.body.code).to.equal("invalid_request");
    const unauthenticated = await stack.post("/v1/skills/%E0%A4%A/call", {}, { key: null });
    expect(unauthenticated.status).to.equal(401);
    const read = await stack.get("/v1/skills/%E0", null);
    expect(read.status).to.equal(400);
    expect((await stack.post("/v1/call", { skill_id: "echo", input: {} })).status).to.equal(200);
  });

  it("serves a skill registered by another process once the catalogue reloads", async () => {
    const other = otherConnection(stack);
    try {
      const registry = await SkillRegistry.open(new SkillsStore(other), { pollMs: 0 });
      try {
        await registry.upsert({
          slug: "late",
          name: "late",
          priceMicros: 2_000n,
          sellerAccountId: stack.sellerId,
          backendUrl: `${stack.backend.url}/echo`,
          timeoutMs: 1_000,
        });
      } finally {
        await registry.close();
      }
      await other.durable();
    } finally {
      await other.close();
    }
    expect(await stack.gw.skills.refreshIfChanged()).to.equal(true);
    expect(await stack.gw.skills.refreshIfChanged()).to.equal(false);
    const res = await stack.post("/v1/call", { skill_id: "late", input: {} });
    expect(res.status).to.equal(200);
    expect(res.body.metadata.price_paid).to.equal(0.002);
  });

  it("passes a backend's 4xx message through to the caller", async () => {
    const res = await stack.post("/v1/call", { skill_id: "reject", input: {} });
    expect(res.body.error).to.equal("field x is required");
  });

  it("answers 404 in the envelope for an unknown route", async () => {
    const res = await stack.post("/v2/call", { skill_id: "echo", input: {} });
    expect(res.status).to.equal(404);
    expect(res.body).to.include({ success: false, code: "not_found" });
  });
});

describeEachEngine("POST /v1/skills/:skillId/call", (engine) => {
  let stack: TestStack;
  beforeEach(async () => {
    stack = await startStack({ engine: engine.name });
  });
  afterEach(async () => {
    await stack.close();
  });

  it("takes the skill's parameters flat and answers camelCase metadata", async () => {
    const res = await stack.post("/v1/skills/echo/call", { text: "hi" });
    expect(res.status).to.equal(200);
    expect(res.body.data).to.deep.equal({ text: "hi" });
    expect(res.body.metadata).to.have.all.keys("skillId", "cost", "responseTime", "callId");
    expect(res.body.metadata).to.include({ skillId: "echo", cost: 0.001, callId: res.headers.get("x-call-id") });
    expect(await stack.available()).to.equal(10_000_000n - 1_000n);
  });

  it("accepts the skill's UUID in the path", async () => {
    const { id } = stack.gw.skills.resolve("echo")!;
    expect((await stack.post(`/v1/skills/${id}/call`, {})).status).to.equal(200);
  });

  it("treats an empty body as no parameters", async () => {
    const res = await stack.post("/v1/skills/echo/call", undefined);
    expect(res.status).to.equal(200);
    expect(res.body.data).to.deep.equal({});
  });

  it("answers 502 with cost 0 in camelCase when the backend fails", async () => {
    const res = await stack.post("/v1/skills/fail/call", {});
    expect(res.status).to.equal(502);
    expect(res.body.metadata).to.deep.include({ skillId: "fail", cost: 0 });
    expect(await stack.available()).to.equal(10_000_000n);
  });

  it("answers 404 for an unknown skill and 400 for a body that is not an object", async () => {
    expect((await stack.post("/v1/skills/nope/call", {})).status).to.equal(404);
    const res = await stack.post("/v1/skills/echo/call", "[1]");
    expect(res.status).to.equal(400);
    expect(res.body.code).to.equal("invalid_request");
  });
});
