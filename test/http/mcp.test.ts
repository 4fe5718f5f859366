import { expect } from "chai";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { assertBalanced } from "../../server/ledger/invariants";
import { describeEachEngine } from "../helpers/engines";
import { type TestStack, startStack } from "../helpers/gateway";

/** The official SDK's client, connected to the gateway's hosted MCP server with `key`. */
async function connect(stack: TestStack, key: string | null = stack.key, query = ""): Promise<Client> {
  const client = new Client({ name: "mcp-test", version: "1.0.0" });
  const headers: Record<string, string> = key === null ? {} : { authorization: `Bearer ${key}` };
  await client.connect(new StreamableHTTPClientTransport(new URL(`${stack.url}/mcp${query}`), { requestInit: { headers } }));
  return client;
}

async function call(
  client: Client,
  name: string,
  args: Record<string, unknown> = {},
  meta?: Record<string, unknown>,
): Promise<CallToolResult> {
  return (await client.callTool({ name, arguments: args, ...(meta ? { _meta: meta } : {}) })) as CallToolResult;
}

function texts(result: CallToolResult): string {
  return result.content.map((c) => (c.type === "text" ? c.text : "")).join("\n");
}

/** Checks that nothing moved for `accountId`, and that no hold is left open. */
async function expectNoCharge(stack: TestStack, action: () => Promise<unknown>, accountId = stack.buyerId): Promise<void> {
  const balances = async () => [await stack.available(accountId), await stack.earned(), await stack.fees()];
  const before = await balances();
  await action();
  await stack.gw.db.durable();
  expect(await balances()).to.deep.equal(before);
  expect((await stack.gw.ledger.balance(accountId)).heldMicros).to.equal(0n);
  await assertBalanced(stack.gw.db);
}

describeEachEngine("POST /mcp (hosted MCP server)", (engine) => {
  let stack: TestStack;
  let client: Client | undefined;
  beforeEach(async () => {
    stack = await startStack({ engine: engine.name });
  });
  afterEach(async () => {
    await client?.close();
    client = undefined;
    await stack.close();
  });

  describe("tools", () => {
    it("lists every listed skill as a tool named by its slug, with its price in the description", async () => {
      client = await connect(stack);
      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name)).to.include.members(["echo", "fail", "reject"]);
      const echo = tools.find((t) => t.name === "echo")!;
      expect(echo.description).to.contain("$0.001 per call");
      expect(echo.inputSchema).to.deep.equal({ type: "object" });
    });

    it("says a usage-priced skill costs up to its max_price per call", async () => {
      await stack.addSkill("metered", "/echo", { pricing: "usage", priceMicros: 10_000n, description: "Counts." });
      client = await connect(stack);
      const metered = (await client.listTools()).tools.find((t) => t.name === "metered")!;
      expect(metered.description).to.equal(
        "Counts.\n\nPrice: up to $0.01 per call (charged for what the call used), only when the call succeeds. Too few calls this week to measure its success rate.",
      );
    });

    it("passes a skill's input schema on as the tool's inputSchema", async () => {
      const schema = { type: "object", properties: { text: { type: "string" } }, required: ["text"] };
      await stack.addSkill("typed", "/echo", { inputSchema: schema, description: "Echoes text." });
      client = await connect(stack);
      const typed = (await client.listTools()).tools.find((t) => t.name === "typed")!;
      expect(typed.inputSchema).to.deep.equal(schema);
      expect(typed.description).to.match(/^Echoes text\.\n\nPrice: \$0\.001 per call/);
    });

    it("lists only the skills named in ?skills=, and will not call another", async () => {
      client = await connect(stack, stack.key, "?skills=echo,reject");
      expect((await client.listTools()).tools.map((t) => t.name)).to.have.members(["echo", "reject"]);
      await expectNoCharge(stack, async () => {
        const result = await call(client!, "fail");
        expect(result.isError).to.equal(true);
        expect(texts(result)).to.contain('Unknown tool "fail"');
      });
    });

    it("refuses a ?skills= that names a skill not listed: 404 in the envelope", async () => {
      const res = await stack.post("/mcp?skills=echo,nope", { jsonrpc: "2.0", id: 1, method: "tools/list" });
      expect(res.status).to.equal(404);
      expect(res.body).to.deep.include({ success: false, code: "skill_not_found" });
      expect(res.body.error).to.contain('"nope"');
    });
  });

  describe("calls, billed as POST /v1/call", () => {
    it("charges exactly the price of a successful call and reports it in the result", async () => {
      client = await connect(stack);
      const before = await stack.available();
      const result = await call(client, "echo", { hello: "world" });
      await stack.gw.db.durable();
      expect(await stack.available()).to.equal(before - 1_000n);
      expect(result.isError).to.not.equal(true);
      expect(JSON.parse((result.content[0] as { text: string }).text)).to.deep.equal({ hello: "world" });
      expect(texts(result)).to.contain("Charged $0.001 for echo");
      const structured = result.structuredContent as { data: unknown; metadata: Record<string, unknown> };
      expect(structured.data).to.deep.equal({ hello: "world" });
      expect(structured.metadata).to.include({ skill_id: "echo", price_paid: 0.001 });
      expect(structured.metadata.call_id).to.be.a("string");
      await assertBalanced(stack.gw.db);
    });

    it("does not charge when the skill fails: isError with the gateway's message", async () => {
      client = await connect(stack);
      await expectNoCharge(stack, async () => {
        const result = await call(client!, "fail");
        expect(result.isError).to.equal(true);
        // Said once: the gateway's message already says nothing was charged (issue 26 section 4).
        expect(texts(result)).to.match(/^Skill error: .*You were not charged\. You may retry, or do without it\.$/s);
        expect(result.structuredContent).to.deep.include({ code: "skill_error" });
      });
    });

    it("does not charge a caller with a zero balance: isError naming the shortfall", async () => {
      const broke = await stack.addBuyer("0");
      client = await connect(stack, broke.key);
      await expectNoCharge(
        stack,
        async () => {
          const result = await call(client!, "echo", { hello: "world" });
          expect(result.isError).to.equal(true);
          expect(texts(result)).to.contain("Insufficient balance: this call costs $0.001 and $0.00 is available");
          expect(result.structuredContent).to.deep.include({ code: "insufficient_balance" });
        },
        broke.accountId,
      );
    });

    it("does not charge a key at its spending limit: isError naming the limit, its period and when it resets", async () => {
      const limited = await stack.gw.keys.create(stack.buyerId, { spendLimit: { limitMicros: 1_000n, period: "month" } });
      client = await connect(stack, limited.key);
      expect((await call(client, "echo", { hello: "world" })).isError).to.equal(undefined);
      await expectNoCharge(stack, async () => {
        const result = await call(client!, "echo", { hello: "world" });
        expect(result.isError).to.equal(true);
        expect(texts(result)).to.match(
          /^This key's spending limit of \$0\.001 per month is reached \(\$0\.001 spent, this call costs \$0\.001\); it resets at \d{4}-\d\d-01T00:00:00Z\. Nothing was charged\. Paid calls with this API key are refused until the limit allows them\.$/,
        );
        expect(result.structuredContent).to.deep.include({ code: "key_spend_limit_reached" });
      });
    });

    it("does not charge an input the skill's schema refuses", async () => {
      await stack.addSkill("typed", "/echo", {
        inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
      });
      client = await connect(stack);
      await expectNoCharge(stack, async () => {
        const result = await call(client!, "typed", { text: 42 });
        expect(result.isError).to.equal(true);
        expect(result.structuredContent).to.deep.include({ code: "invalid_input" });
      });
    });

    it("charges once for two calls under one _meta idempotency_key, and replays the first answer", async () => {
      client = await connect(stack);
      const before = await stack.available();
      const first = await call(client, "echo", { n: 1 }, { idempotency_key: "mcp-retry-1" });
      const second = await call(client, "echo", { n: 1 }, { idempotency_key: "mcp-retry-1" });
      await stack.gw.db.durable();
      expect(await stack.available()).to.equal(before - 1_000n);
      expect((second.structuredContent as { data: unknown }).data).to.deep.equal((first.structuredContent as { data: unknown }).data);
      const replayedMetadata = (second.structuredContent as { metadata: Record<string, unknown> }).metadata;
      expect(replayedMetadata.replayed).to.equal(true);
      // A replay names the call it replays and says it was already paid, never "Charged" (issue 26 section 3).
      const firstId = (first.structuredContent as { metadata: Record<string, unknown> }).metadata.call_id;
      expect(replayedMetadata.call_id).to.equal(firstId);
      expect(texts(second)).to.not.contain("Charged");
      expect(texts(second)).to.contain(`Already paid: $0.001 for echo (call ${firstId as string}, replayed).`);
      const reused = await call(client, "echo", { n: 2 }, { idempotency_key: "mcp-retry-1" });
      expect(reused.isError).to.equal(true);
      expect(texts(reused)).to.contain("different request body");
    });

    it("records the call in the account's usage, like POST /v1/call", async () => {
      client = await connect(stack);
      await call(client, "echo", {});
      const usage = await stack.get("/v1/usage");
      expect(usage.status).to.equal(200);
      expect(JSON.stringify(usage.body.data)).to.contain("echo");
    });
  });

  describe("HTTP refusals, in the spec's envelope, before MCP runs", () => {
    const initialize = {
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } },
    };
    const mcpHeaders = { accept: "application/json, text/event-stream" };

    it("answers 401 without a key, or with an invalid one", async () => {
      for (const key of [null, "atom_not-a-real-key", "not-even-atom"]) {
        const res = await stack.post("/mcp", initialize, { key, headers: mcpHeaders });
        expect(res.status, String(key)).to.equal(401);
        expect(res.body).to.deep.include({ success: false, code: "unauthorized" });
      }
      let refused: unknown;
      await connect(stack, "atom_not-a-real-key").catch((error: unknown) => (refused = error));
      expect(refused).to.be.an("error");
    });

    it("counts requests without a valid key against the address's public limit", async () => {
      await stack.close();
      stack = await startStack({ engine: engine.name, config: { publicRateLimitPerMin: 2 } });
      const statuses: number[] = [];
      for (let i = 0; i < 3; i++) statuses.push((await stack.post("/mcp", initialize, { key: "atom_wrong", headers: mcpHeaders })).status);
      expect(statuses).to.deep.equal([401, 401, 429]);
      // A valid key is not counted there.
      expect((await stack.post("/mcp", initialize, { headers: mcpHeaders })).status).to.equal(200);
    });

    for (const method of ["GET", "DELETE", "PUT"]) {
      it(`answers ${method} /mcp with 405 and Allow: POST (the server is stateless)`, async () => {
        const res = await fetch(`${stack.url}/mcp`, {
          method,
          headers: { authorization: `Bearer ${stack.key}`, accept: "text/event-stream" },
        });
        expect(res.status).to.equal(405);
        expect(res.headers.get("allow")).to.equal("POST");
        expect(await res.json()).to.deep.include({ success: false, code: "method_not_allowed" });
      });
    }

    it("refuses a body over MAX_REQUEST_BYTES (413) and one nested too deep (400)", async () => {
      const big = await stack.post("/mcp", { ...initialize, pad: "x".repeat(stack.gw.config.maxRequestBytes) }, { headers: mcpHeaders });
      expect(big.status).to.equal(413);
      expect(big.body).to.deep.include({ success: false, code: "payload_too_large" });
      const deep = await stack.post(
        "/mcp",
        `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":${"[".repeat(100)}${"]".repeat(100)}}`,
        { headers: mcpHeaders },
      );
      expect(deep.status).to.equal(400);
      expect(deep.body).to.deep.include({ success: false, code: "invalid_json" });
    });

    it("leaves a body that is not an MCP message to the SDK's transport: a JSON-RPC error, nothing charged", async () => {
      await expectNoCharge(stack, async () => {
        const post = (body?: string) =>
          fetch(`${stack.url}/mcp`, {
            method: "POST",
            headers: { authorization: `Bearer ${stack.key}`, "content-type": "application/json", ...mcpHeaders },
            body,
          });
        for (const body of [undefined, "{}"]) {
          const res = await post(body);
          expect(res.status, String(body)).to.be.within(400, 499);
          expect(await res.json()).to.have.property("jsonrpc", "2.0");
        }
        // A request without its params is answered by the protocol layer: a JSON-RPC error, no tool run.
        const noParams = await post('{"jsonrpc":"2.0","id":1,"method":"tools/call"}');
        expect(await noParams.json()).to.have.nested.property("error.code");
      });
    });
  });
});
