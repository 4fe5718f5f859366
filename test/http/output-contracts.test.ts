import { expect } from "chai";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { assertBalanced } from "../../server/ledger/invariants";
import { SCHEMA_LIMITS } from "../../server/catalog/schema-guard";
import { describeEachEngine } from "../helpers/engines";
import { type TestStack, startStack } from "../helpers/gateway";
import { signedIn } from "../helpers/session";

/**
 * Output contracts (issue 27 §2): a skill's `output_schema` is what its 2xx answers promise to be. An answer that
 * keeps the promise is charged as any success; one that breaks it is a 502 skill_bad_output, charged to nobody,
 * logged with its own outcome, and shown to the seller with the first problem found and nothing of the buyer's.
 */

/** The promise of the demo's strict-echo: an object with a string `text`. */
const TEXT_PROMISE = { type: "object", properties: { text: { type: "string" } }, required: ["text"] };

/** The buyer's, the seller's and the platform's balances, and the buyer's holds. */
const money = async (stack: TestStack) => [
  await stack.available(),
  await stack.earned(),
  await stack.fees(),
  (await stack.gw.ledger.balance(stack.buyerId)).heldMicros,
];

/** The calls log's line of a call. */
const lineOf = (stack: TestStack, callId: string) =>
  stack.gw.db.one<{ outcome: string; http_status: bigint; charged_micros: bigint }>(
    "SELECT outcome, http_status, charged_micros FROM calls WHERE id = ?",
    [callId],
  );

describeEachEngine("output contracts on the call endpoints", (engine) => {
  let stack: TestStack;
  beforeEach(async () => {
    stack = await startStack({ engine: engine.name });
    await stack.addSkill("strict", "/echo", { outputSchema: TEXT_PROMISE });
  });
  afterEach(async () => {
    await stack.close();
  });

  it("POST /v1/call charges an answer that keeps the promise, and answers 502 skill_bad_output to one that breaks it, charging nothing", async () => {
    const kept = await stack.post("/v1/call", { skill_id: "strict", input: { text: "hi" } });
    expect(kept.status).to.equal(200);
    expect(kept.body.data).to.deep.equal({ text: "hi" });
    expect(kept.body.metadata.price_paid).to.equal(0.001);
    await stack.gw.db.durable();
    expect(await stack.available()).to.equal(10_000_000n - 1_000n);
    expect(await lineOf(stack, kept.headers.get("x-call-id")!)).to.deep.equal({
      outcome: "success",
      http_status: 200n,
      charged_micros: 1_000n,
    });

    const before = await money(stack);
    const res = await stack.post("/v1/call", { skill_id: "strict", input: { x: 1 } });
    expect(res.status).to.equal(502);
    expect(res.body).to.include({ success: false, code: "skill_bad_output" });
    expect(res.body.error).to.contain("the skill answered something it promised not to");
    expect(res.body.error).to.match(/You were not charged\.$/);
    // The failed call's metadata, as the other 502s carry it: nothing paid.
    expect(res.body.metadata).to.include({ skill_id: "strict", price_paid: 0 });
    await stack.gw.db.durable();
    expect(await money(stack)).to.deep.equal(before);
    expect(await lineOf(stack, res.headers.get("x-call-id")!)).to.deep.equal({
      outcome: "skill_bad_output",
      http_status: 502n,
      charged_micros: 0n,
    });
    await assertBalanced(stack.gw.db);
  });

  it("POST /v1/skills/:id/call charges a kept promise and not a broken one, with camelCase metadata", async () => {
    const kept = await stack.post("/v1/skills/strict/call", { text: "hi" });
    expect(kept.status).to.equal(200);
    expect(kept.body.metadata).to.include({ skillId: "strict", cost: 0.001 });
    await stack.gw.db.durable();
    const before = await money(stack);
    const broken = await stack.post("/v1/skills/strict/call", { x: 1 });
    expect(broken.status).to.equal(502);
    expect(broken.body).to.include({ success: false, code: "skill_bad_output" });
    expect(broken.body.metadata).to.include({ skillId: "strict", cost: 0 });
    await stack.gw.db.durable();
    expect(await money(stack)).to.deep.equal(before);
    expect((await lineOf(stack, broken.headers.get("x-call-id")!))?.outcome).to.equal("skill_bad_output");
    await assertBalanced(stack.gw.db);
  });

  it("gives the idempotency key up after a broken promise, so a retry runs again", async () => {
    const headers = { "idempotency-key": "retry-me" };
    const first = await stack.post("/v1/call", { skill_id: "strict", input: { x: 1 } }, { headers });
    expect(first.status).to.equal(502);
    const second = await stack.post("/v1/call", { skill_id: "strict", input: { x: 1 } }, { headers });
    expect(second.status).to.equal(502);
    expect(second.headers.get("x-call-id")).to.not.equal(first.headers.get("x-call-id"));
  });

  it("checks a schema the workers run (one with a $ref) the same way", async () => {
    await stack.addSkill("strict-ref", "/echo", {
      outputSchema: {
        $defs: { text: { type: "string" } },
        type: "object",
        properties: { text: { $ref: "#/$defs/text" } },
        required: ["text"],
      },
    });
    expect((await stack.post("/v1/call", { skill_id: "strict-ref", input: { text: "hi" } })).status).to.equal(200);
    const before = await money(stack);
    const broken = await stack.post("/v1/call", { skill_id: "strict-ref", input: { text: 7 } });
    expect(broken.status).to.equal(502);
    expect(broken.body.code).to.equal("skill_bad_output");
    await stack.gw.db.durable();
    expect(await money(stack)).to.deep.equal(before);
  });

  it("hosted MCP (/mcp): a kept promise is charged, a broken one is isError skill_bad_output and charged nothing", async () => {
    const client = new Client({ name: "output-contracts-test", version: "1.0.0" });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${stack.url}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${stack.key}` } },
      }),
    );
    try {
      const kept = (await client.callTool({ name: "strict", arguments: { text: "hi" } })) as CallToolResult;
      expect(kept.isError ?? false).to.equal(false);
      expect((kept.structuredContent as { metadata: Record<string, unknown> }).metadata).to.include({ price_paid: 0.001 });
      await stack.gw.db.durable();
      expect(await stack.available()).to.equal(10_000_000n - 1_000n);

      const before = await money(stack);
      const broken = (await client.callTool({ name: "strict", arguments: { x: 1 } })) as CallToolResult;
      expect(broken.isError).to.equal(true);
      expect(broken.structuredContent).to.deep.include({ code: "skill_bad_output" });
      const text = broken.content.map((c) => (c.type === "text" ? c.text : "")).join("\n");
      expect(text).to.contain("the skill answered something it promised not to");
      await stack.gw.db.durable();
      expect(await money(stack)).to.deep.equal(before);
      const outcomes = await stack.gw.db.all<{ outcome: string }>("SELECT outcome FROM calls WHERE skill_id = ? ORDER BY created_at", [
        stack.gw.skills.resolve("strict")!.id,
      ]);
      expect(outcomes.map((o) => o.outcome)).to.deep.equal(["success", "skill_bad_output"]);
      await assertBalanced(stack.gw.db);
    } finally {
      await client.close();
    }
  });

  it("the dashboard's try-it (POST /v1/skills/:id/try): a kept promise is charged, a broken one is not", async () => {
    const buyer = await signedIn(stack, "buyer@example.com");
    await stack.gw.ledger.credit(buyer.accountId, 1_000_000n, "dev_credit", "test");
    const keyId = (await buyer.request("POST", "/v1/keys", { name: "try" })).body.data.id;
    const kept = await buyer.request("POST", "/v1/skills/strict/try", { key_id: keyId, input: { text: "hi" } });
    expect(kept.status).to.equal(200);
    expect(kept.body.metadata).to.include({ cost: 0.001 });
    await stack.gw.db.durable();
    const before = await stack.available(buyer.accountId);
    expect(before).to.equal(1_000_000n - 1_000n);
    const broken = await buyer.request("POST", "/v1/skills/strict/try", { key_id: keyId, input: { x: 1 } });
    expect(broken.status).to.equal(502);
    expect(broken.body).to.include({ success: false, code: "skill_bad_output" });
    expect(broken.body.metadata).to.include({ cost: 0 });
    await stack.gw.db.durable();
    expect(await stack.available(buyer.accountId)).to.equal(before);
    expect((await stack.gw.ledger.balance(buyer.accountId)).heldMicros).to.equal(0n);
  });

  it("returns output_schema in the skill's record when it has one, and no such field otherwise", async () => {
    const strict = await stack.get("/v1/skills/strict", null);
    expect(strict.body.data.output_schema).to.deep.equal(TEXT_PROMISE);
    const echo = await stack.get("/v1/skills/echo", null);
    expect(echo.body.data).to.not.have.property("output_schema");
    const list = await stack.get("/v1/skills", null);
    const listed = (list.body.data as { slug: string; output_schema?: unknown }[]).find((s) => s.slug === "strict");
    expect(listed?.output_schema).to.deep.equal(TEXT_PROMISE);
  });
});

describeEachEngine("output contracts, as their seller sees them", (engine) => {
  let stack: TestStack;
  beforeEach(async () => {
    stack = await startStack({ engine: engine.name });
  });
  afterEach(async () => {
    await stack.close();
  });

  /** A seller's listing of the test backend's echo route, with `overrides`. */
  const listing = (overrides: Record<string, unknown> = {}) => ({
    slug: "strict",
    name: "Strict",
    price: "0.001",
    backend_url: `${stack.backend.url}/echo`,
    output_schema: TEXT_PROMISE,
    ...overrides,
  });

  it("lists a skill with an output schema, shows it in its views, and can take it off again", async () => {
    const seller = await signedIn(stack, "seller@example.com");
    const created = await seller.request("POST", "/v1/seller/skills", listing());
    expect(created.status).to.equal(201);
    expect(created.body.data.output_schema).to.deep.equal(TEXT_PROMISE);
    expect((await seller.request("GET", "/v1/seller/skills")).body.data[0].output_schema).to.deep.equal(TEXT_PROMISE);
    const cleared = await seller.request("PATCH", "/v1/seller/skills/strict", { output_schema: null });
    expect(cleared.status).to.equal(200);
    expect(cleared.body.data).to.not.have.property("output_schema");
    // Without the promise, the answer that broke it is an ordinary success.
    expect((await stack.post("/v1/call", { skill_id: "strict", input: { x: 1 } })).status).to.equal(200);
    const set = await seller.request("PATCH", "/v1/seller/skills/strict", { output_schema: TEXT_PROMISE });
    expect(set.body.data.output_schema).to.deep.equal(TEXT_PROMISE);
    expect((await stack.post("/v1/call", { skill_id: "strict", input: { x: 1 } })).status).to.equal(502);
  });

  describe("refuses at listing an output schema held to the input schema's bounds", () => {
    let nested: Record<string, unknown> = { type: "string" };
    // Two levels a step (the schema, its properties): past the schema's bound, within the request body's.
    for (let i = 0; i <= SCHEMA_LIMITS.depthMax / 2; i++) nested = { type: "object", properties: { a: nested } };
    const cases: [string, unknown, RegExp][] = [
      ["too deep", nested, /invalid output schema: output_schema is nested too deeply/],
      [
        "too big",
        { type: "object", description: "x".repeat(SCHEMA_LIMITS.bytesMax) },
        new RegExp(`invalid output schema: output_schema is larger than ${SCHEMA_LIMITS.bytesMax} bytes`),
      ],
      ["a pattern RE2 cannot run", { type: "string", pattern: "^(a)\\1$" }, /invalid output schema/],
      ["a $ref outside the schema", { $ref: "https://elsewhere.example/s" }, /output_schema's \$ref .* must point inside the schema/],
      ["not an object", [1], /output_schema must be a JSON Schema object or null/],
    ];
    for (const [what, schema, message] of cases) {
      it(`${what}: 400, nothing listed; nor as an edit`, async () => {
        const seller = await signedIn(stack, "seller@example.com");
        const refused = await seller.request("POST", "/v1/seller/skills", listing({ output_schema: schema }));
        expect(refused.status).to.equal(400);
        expect(refused.body.code).to.equal("invalid_request");
        expect(refused.body.error).to.match(message);
        expect((await seller.request("GET", "/v1/seller/skills")).body.data).to.deep.equal([]);
        await seller.request("POST", "/v1/seller/skills", listing({ output_schema: null }));
        const edit = await seller.request("PATCH", "/v1/seller/skills/strict", { output_schema: schema });
        expect(edit.status).to.equal(400);
        expect(edit.body.error).to.match(message);
        expect((await seller.request("GET", "/v1/seller/skills")).body.data[0]).to.not.have.property("output_schema");
      });
    }
  });

  it("shows the seller the first problem of each broken promise, and nothing of the buyer's", async () => {
    const seller = await signedIn(stack, "seller@example.com");
    await seller.request("POST", "/v1/seller/skills", listing());
    // The buyer's data, in values and in keys: none of it may reach the seller.
    const secret = "buyer-secret-4242";
    const input = { text: { [secret]: secret }, [`key-${secret}`]: secret };
    const broken = await stack.post("/v1/call", { skill_id: "strict", input });
    expect(broken.status).to.equal(502);
    const kept = await stack.post("/v1/call", { skill_id: "strict", input: { text: "fine" } });
    expect(kept.status).to.equal(200);
    const missing = await stack.post("/v1/skills/strict/call", { [`key-${secret}`]: 1 });
    expect(missing.status).to.equal(502);

    const failures = await seller.request("GET", "/v1/seller/skills/strict/output-failures");
    expect(failures.status).to.equal(200);
    expect(failures.body.data).to.have.length(2);
    const [newest, oldest] = failures.body.data;
    expect(newest).to.deep.include({
      call_id: missing.headers.get("x-call-id"),
      endpoint: "skill_call",
      problem: "#/required: must have required property 'text'",
    });
    expect(oldest).to.deep.include({
      call_id: broken.headers.get("x-call-id"),
      endpoint: "call",
      problem: "#/properties/text/type: must be string",
    });
    expect(JSON.stringify(failures.body)).to.not.contain(secret);
    expect(JSON.stringify(failures.body)).to.not.contain(stack.buyerId);

    // Another seller, or nobody, sees none of it.
    const other = await signedIn(stack, "other@example.com");
    expect((await other.request("GET", "/v1/seller/skills/strict/output-failures")).status).to.equal(404);
    expect((await stack.get("/v1/seller/skills/strict/output-failures", null)).status).to.equal(401);
  });
});
