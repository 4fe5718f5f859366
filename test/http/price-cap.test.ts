import { expect } from "chai";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { assertBalanced } from "../../server/ledger/invariants";
import { describeEachEngine } from "../helpers/engines";
import { type TestStack, startStack } from "../helpers/gateway";

/**
 * A price cap on every call (issue 24, section 3): max_price in POST /v1/call's body, X-Max-Price on the per-skill
 * endpoint, _meta.max_price on hosted MCP. A skill priced above it is 409 price_above_max naming the current price:
 * nothing forwarded, held, charged, logged, rate-counted or remembered under an idempotency key.
 */
describeEachEngine("a call's max_price", (engine) => {
  let stack: TestStack;
  beforeEach(async () => {
    stack = await startStack({ engine: engine.name });
  });
  afterEach(async () => {
    await stack.close();
  });

  /** Runs `action` and checks that it moved no money, left no hold, reached no backend and wrote no line. */
  const nothingHappens = async (action: () => Promise<void>, accountId = stack.buyerId) => {
    const before = [await stack.available(accountId), await stack.earned(), await stack.fees()];
    const hits = stack.backend.hits.get("/echo") ?? 0;
    const lines = (await stack.gw.calls.recent(accountId, 100)).length;
    await action();
    await stack.gw.db.durable();
    expect([await stack.available(accountId), await stack.earned(), await stack.fees()]).to.deep.equal(before);
    expect((await stack.gw.ledger.balance(accountId)).heldMicros).to.equal(0n);
    expect(stack.backend.hits.get("/echo") ?? 0).to.equal(hits);
    expect((await stack.gw.calls.recent(accountId, 100)).length).to.equal(lines);
    await assertBalanced(stack.gw.db);
  };

  const REFUSAL = `The skill "echo" costs $0.001 per call, above this call's max_price of $0.0009: nothing was charged. Accept the new price with a max_price of at least $0.001.`;

  describe("POST /v1/call, max_price in the body", () => {
    it("refuses a skill priced above it with 409 price_above_max naming the price, and charges nothing", async () => {
      await nothingHappens(async () => {
        for (const maxPrice of ["0.0009", 0.0009]) {
          const res = await stack.post("/v1/call", { skill_id: "echo", input: {}, max_price: maxPrice });
          expect(res.status).to.equal(409);
          expect(res.body).to.deep.include({ success: false, code: "price_above_max", error: REFUSAL });
          expect(res.body.details).to.deep.equal({ price: 0.001, max_price: 0.0009 });
          expect(res.headers.has("x-call-id")).to.equal(false);
        }
      });
    });

    it("calls a skill priced at or below it, and any price without one (null: none)", async () => {
      for (const maxPrice of ["0.001", 0.001, "0.5", null, undefined]) {
        const res = await stack.post("/v1/call", { skill_id: "echo", input: { n: 1 }, max_price: maxPrice });
        expect(res.status, `${maxPrice}: ${JSON.stringify(res.body)}`).to.equal(200);
        expect(res.body.metadata.price_paid).to.equal(0.001);
      }
    });

    it("holds to the X-Max-Price header too, the lower of the two deciding", async () => {
      await nothingHappens(async () => {
        const res = await stack.post("/v1/call", { skill_id: "echo", input: {}, max_price: "1" }, { headers: { "x-max-price": "0.0009" } });
        expect([res.status, res.body.code]).to.deep.equal([409, "price_above_max"]);
        const other = await stack.post(
          "/v1/call",
          { skill_id: "echo", input: {}, max_price: "0.0009" },
          { headers: { "x-max-price": "1" } },
        );
        expect([other.status, other.body.code]).to.deep.equal([409, "price_above_max"]);
      });
      const both = await stack.post("/v1/call", { skill_id: "echo", input: {}, max_price: "0.001" }, { headers: { "x-max-price": "1" } });
      expect(both.status).to.equal(200);
    });

    it("refuses a max_price that is not a positive USD amount of at most 6 decimals and 1000000, with 400 naming it", async () => {
      const refused = [
        0,
        "0",
        "-0.001",
        -1,
        "0.0000001",
        1e-7,
        "1e-3",
        " 0.001",
        "0.001 ",
        "abc",
        "",
        "1000000.000001",
        0.1 + 0.2,
        true,
        {},
        [],
      ];
      await nothingHappens(async () => {
        for (const maxPrice of refused) {
          const res = await stack.post("/v1/call", { skill_id: "echo", input: {}, max_price: maxPrice });
          expect(res.status, JSON.stringify(maxPrice)).to.equal(400);
          expect(res.body.code).to.equal("invalid_request");
          expect(res.body.error).to.match(/^max_price must be a USD amount above 0 and at most 1000000, with at most 6 decimals/);
        }
      });
      expect((await stack.post("/v1/call", { skill_id: "echo", input: {}, max_price: "1000000" })).status).to.equal(200);
    });

    it("compares what the call would charge: the price with the fee when it is charged on top", async () => {
      await stack.close();
      stack = await startStack({ engine: engine.name, config: { feeMode: "on_top" } });
      await nothingHappens(async () => {
        const res = await stack.post("/v1/call", { skill_id: "echo", input: {}, max_price: "0.001" });
        expect([res.status, res.body.code]).to.deep.equal([409, "price_above_max"]);
        expect(res.body.error).to.contain("costs $0.0011 per call");
        expect(res.body.details).to.deep.equal({ price: 0.0011, max_price: 0.001 });
      });
      const paid = await stack.post("/v1/call", { skill_id: "echo", input: {}, max_price: "0.0011" });
      expect([paid.status, paid.body.metadata.price_paid]).to.deep.equal([200, 0.0011]);
    });

    it("follows a price raised after the caller looked: the call that names the old price is refused", async () => {
      expect((await stack.post("/v1/call", { skill_id: "echo", input: {}, max_price: "0.001" })).status).to.equal(200);
      await stack.addSkill("echo", "/echo", { priceMicros: 200_000n });
      await nothingHappens(async () => {
        const res = await stack.post("/v1/call", { skill_id: "echo", input: {}, max_price: "0.001" });
        expect(res.status).to.equal(409);
        expect(res.body.error).to.contain("costs $0.20 per call");
      });
    });
  });

  describe("POST /v1/skills/:skillId/call, X-Max-Price", () => {
    it("refuses a skill priced above it with 409 price_above_max, and calls one at or below it", async () => {
      await nothingHappens(async () => {
        const res = await stack.post("/v1/skills/echo/call", { n: 1 }, { headers: { "x-max-price": "0.0009" } });
        expect(res.status).to.equal(409);
        expect(res.body).to.deep.include({ code: "price_above_max", error: REFUSAL, details: { price: 0.001, max_price: 0.0009 } });
      });
      const ok = await stack.post("/v1/skills/echo/call", { n: 1 }, { headers: { "x-max-price": "0.001" } });
      expect([ok.status, ok.body.metadata.cost]).to.deep.equal([200, 0.001]);
      // The body is the skill's own: a max_price there is a parameter of the skill, passed on, not a cap.
      const inBody = await stack.post("/v1/skills/echo/call", { max_price: "0.0001" });
      expect([inBody.status, inBody.body.data]).to.deep.equal([200, { max_price: "0.0001" }]);
    });

    it("refuses a header that is not a USD amount with 400, naming X-Max-Price", async () => {
      await nothingHappens(async () => {
        for (const value of ["0", "abc", "0.0000001", "0.001, 0.002", "1e-3"]) {
          const res = await stack.post("/v1/skills/echo/call", {}, { headers: { "x-max-price": value } });
          expect([res.status, res.body.code], value).to.deep.equal([400, "invalid_request"]);
          expect(res.body.error).to.match(/^X-Max-Price must be a USD amount/);
        }
      });
    });

    it("keeps no idempotency record and counts no rate limit: the same call with the price accepted then runs", async () => {
      const { key } = await stack.gw.keys.create(stack.buyerId, { rateLimitPerMin: 1 });
      const headers = { "idempotency-key": "cap-then-accept", "x-max-price": "0.0009" };
      await nothingHappens(async () => {
        for (let i = 0; i < 3; i++) {
          expect((await stack.post("/v1/skills/echo/call", { n: 1 }, { key, headers })).body.code).to.equal("price_above_max");
        }
      });
      // Had the 409 been remembered under the key, this would replay it; had it been counted, this would be 429.
      const accepted = await stack.post("/v1/skills/echo/call", { n: 1 }, { key, headers: { ...headers, "x-max-price": "0.001" } });
      expect(accepted.status, JSON.stringify(accepted.body)).to.equal(200);
      expect(accepted.headers.has("idempotent-replayed")).to.equal(false);
      const replay = await stack.post("/v1/skills/echo/call", { n: 1 }, { key, headers: { ...headers, "x-max-price": "0.001" } });
      expect([replay.status, replay.headers.get("idempotent-replayed")]).to.deep.equal([200, "true"]);
      expect((await stack.post("/v1/call", { skill_id: "echo", input: {} }, { key })).status).to.equal(429);
    });
  });

  describe("hosted MCP, _meta.max_price", () => {
    it("answers a dearer skill with an error result price_above_max, and calls one at or below it", async () => {
      const client = new Client({ name: "price-cap-test", version: "1.0.0" });
      await client.connect(
        new StreamableHTTPClientTransport(new URL(`${stack.url}/mcp`), {
          requestInit: { headers: { authorization: `Bearer ${stack.key}` } },
        }),
      );
      const call = async (meta: Record<string, unknown>) =>
        (await client.callTool({ name: "echo", arguments: { n: 1 }, _meta: meta })) as CallToolResult;
      try {
        await nothingHappens(async () => {
          for (const maxPrice of ["0.0009", 0.0009]) {
            const refused = await call({ max_price: maxPrice });
            expect(refused.isError).to.equal(true);
            expect(refused.structuredContent).to.deep.include({
              code: "price_above_max",
              error: REFUSAL,
              details: { price: 0.001, max_price: 0.0009 },
            });
            // The refusal says nothing was charged, once (issue 26 section 4).
            expect(refused.content).to.deep.equal([{ type: "text", text: REFUSAL }]);
          }
          const invalid = await call({ max_price: "0" });
          expect(invalid.structuredContent).to.deep.include({ code: "invalid_request" });
        });
        const paid = await call({ max_price: "0.001" });
        expect(paid.isError).to.equal(undefined);
        expect((paid.structuredContent as { metadata: { price_paid: number } }).metadata.price_paid).to.equal(0.001);
      } finally {
        await client.close();
      }
    });
  });
});
