import { expect } from "chai";
import { assertBalanced } from "../../server/ledger/invariants";
import { type TestStack, startStack } from "../helpers/gateway";
import { type Reply, type TestSession, assertDeclared, signedIn } from "../helpers/session";

/**
 * The review's high finding: a seller's schema with `"pattern": "^(a+)+$"` and an input of
 * 28 a's and a "!" blocked the event loop for 1.3 s, doubling with each character, for any
 * key with no balance at all. Here the inputs are far longer (100 a's would take longer than
 * the age of the universe to backtrack through), so a regression hangs the test rather than
 * slowing it: no timing is asserted.
 */
const EVIL = `${"a".repeat(100)}!`;
const nested = (depth: number) => "[".repeat(depth) + "]".repeat(depth);

describe("hostile schemas and inputs", () => {
  let stack: TestStack;
  let seller: TestSession;
  beforeEach(async () => {
    stack = await startStack();
    seller = await signedIn(stack, "seller@example.com");
  });
  afterEach(() => stack.close());

  const list = (slug: string, inputSchema: unknown) =>
    seller.request("POST", "/v1/seller/skills", {
      slug,
      name: slug,
      price: "0.01",
      backend_url: `${stack.backend.url}/echo`,
      input_schema: inputSchema,
    });
  /** The same, with the schema's JSON text as given (a test cannot JSON.stringify 5,000 levels either). */
  const listRaw = (slug: string, schemaJson: string) =>
    fetch(`${stack.url}/v1/seller/skills`, {
      method: "POST",
      headers: { "content-type": "application/json", cookie: seller.cookie, "x-csrf-token": seller.csrfToken },
      body: `{"slug":"${slug}","name":"${slug}","price":"0.01","backend_url":"${stack.backend.url}/echo","input_schema":${schemaJson}}`,
    }).then(async (r) => ({ status: r.status, body: await r.json() }));

  describe("a catastrophic-backtracking pattern", () => {
    it("runs on a linear-time engine: the call is refused with 400 at once, uncharged", async () => {
      expect((await list("evil-regex", { type: "object", properties: { text: { type: "string", pattern: "^(a+)+$" } } })).status).to.equal(
        201,
      );
      const before = await stack.available();
      const res = await stack.post("/v1/call", { skill_id: "evil-regex", input: { text: EVIL } });
      expect(res.status).to.equal(400);
      expect(res.body).to.include({ code: "invalid_input" });
      expect(res.body.error).to.include("must match pattern");
      expect(await stack.available()).to.equal(before);
      // The same pattern still accepts what it should.
      expect((await stack.post("/v1/call", { skill_id: "evil-regex", input: { text: "aaaa" } })).status).to.equal(200);
    });

    it("is refused with 400 for a key with no balance too, without freezing the gateway", async () => {
      await list("evil-regex", { type: "object", patternProperties: { "^(a|aa)+$": { type: "string" } }, additionalProperties: false });
      const broke = await stack.addBuyer("0");
      const res = await stack.post("/v1/call", { skill_id: "evil-regex", input: { [EVIL]: 1 } }, { key: broke.key });
      expect(res.status).to.equal(400);
      expect((await stack.get("/healthz", null)).status).to.equal(200);
    });
  });

  describe("a schema whose shared subschemas double the work at every level of the input", () => {
    // Three $refs, within every bound; validation of {"a":{"a":…}} doubles with each level.
    const exponential = {
      $ref: "#/definitions/n",
      definitions: {
        n: { anyOf: [{ $ref: "#/definitions/b" }, { $ref: "#/definitions/b" }] },
        b: { type: "object", required: ["a"], properties: { a: { $ref: "#/definitions/n" } } },
      },
    };
    const nestedA = (depth: number): unknown => (depth === 0 ? {} : { a: nestedA(depth - 1) });

    it("is validated off the event loop: the gateway answers others meanwhile, and the call is refused with 400, uncharged", async () => {
      expect((await list("exponential", exponential)).status).to.equal(201);
      const broke = await stack.addBuyer("0");
      const order: string[] = [];
      const hostile = stack.post("/v1/call", { skill_id: "exponential", input: nestedA(60) }, { key: broke.key }).then((res) => {
        order.push("hostile");
        return res;
      });
      const health = await stack.get("/healthz", stack.key);
      order.push("healthz");
      expect(health.status).to.equal(200);
      const res = await hostile;
      expect(order).to.deep.equal(["healthz", "hostile"]);
      expect(res.status).to.equal(400);
      expect(res.body).to.include({ success: false, code: "invalid_input" });
      expect(res.body.error).to.include("could not be checked against the skill's schema in time");
      // A shallow input is judged in time by a new worker (this schema accepts no finite input:
      // every level requires "a"), and nothing was charged along the way.
      const shallow = await stack.post("/v1/call", { skill_id: "exponential", input: nestedA(3) }, { key: broke.key });
      expect(shallow.status).to.equal(400);
      expect(shallow.body.error).to.include("must have required property 'a'");
      expect(await stack.available(broke.accountId)).to.equal(0n);
    });
  });

  describe("refuses at listing, with a 400 that says why", () => {
    const deepSchema = (depth: number) => {
      let schema: object = { type: "string" };
      for (let i = 0; i < depth; i++) schema = { type: "object", properties: { x: schema } };
      return schema;
    };
    const refChain = (length: number) => {
      const definitions: Record<string, object> = {};
      for (let i = 0; i < length; i++) definitions[`d${i}`] = i + 1 < length ? { $ref: `#/definitions/d${i + 1}` } : { type: "object" };
      return { $ref: "#/definitions/d0", definitions };
    };
    const refused: [string, unknown, string][] = [
      ["a pattern with a backreference (not regular)", { type: "string", pattern: "^(a)\\1$" }, "invalid input schema"],
      ["a pattern with lookahead", { type: "string", pattern: "^(?=a)" }, "invalid input schema"],
      ["a $ref chain 200 long", refChain(200), "more than 64 $refs"],
      ["a schema nested 20 deep", deepSchema(20), "nested too deeply"],
      ["a $ref to another document", { $ref: "https://evil.example.com/schema.json" }, "must point inside the schema"],
      ["uniqueItems without maxItems", { type: "array", items: { type: "object" }, uniqueItems: true }, "uniqueItems needs a maxItems"],
      ["uniqueItems over 100 objects", { type: "array", uniqueItems: true, maxItems: 1_000 }, "uniqueItems needs a maxItems"],
      ["a schema of 3,000 objects", { anyOf: Array.from({ length: 3_000 }, () => ({})) }, "more than 2000 objects"],
    ];
    for (const [what, schema, message] of refused) {
      it(`refuses ${what}`, async () => {
        const res = await list("hostile", schema);
        expect(res.status, JSON.stringify(res.body).slice(0, 300)).to.equal(400);
        expect(res.body.success).to.equal(false);
        expect(res.body.error).to.include(message);
      });
    }

    it("refuses a schema nested 5,000 deep before parsing it into anything", async () => {
      const res = await listRaw("deep", `${'{"not":'.repeat(5_000)}{}${"}".repeat(5_000)}`);
      expect(res.status).to.equal(400);
      expect(res.body).to.include({ code: "invalid_json" });
    });

    it("refuses a $ref chain 5,000 long as too large (413)", async () => {
      const res = await list("chain", refChain(5_000));
      expect(res.status).to.equal(413);
      expect(res.body).to.include({ success: false, code: "payload_too_large" });
    });

    it("accepts a recursive schema (a tree) and validates bounded input against it", async () => {
      const tree = {
        $ref: "#/definitions/node",
        definitions: {
          node: { type: "object", properties: { children: { type: "array", maxItems: 10, items: { $ref: "#/definitions/node" } } } },
        },
      };
      expect((await list("tree", tree)).status).to.equal(201);
      let input: object = {};
      for (let i = 0; i < 30; i++) input = { children: [input] };
      expect((await stack.post("/v1/call", { skill_id: "tree", input })).status).to.equal(200);
    });
  });

  describe("JSON nested beyond 64 levels", () => {
    const deepBodies: [string, string, string][] = [
      ["POST /v1/call", "/v1/call", `{"skill_id":"echo","input":{"x":${nested(5_000)}}}`],
      ["POST /v1/skills/echo/call", "/v1/skills/echo/call", `{"x":${nested(5_000)}}`],
      ["POST /v1/call, just past the bound", "/v1/call", `{"skill_id":"echo","input":{"x":${nested(64)}}}`],
    ];
    for (const [what, path, body] of deepBodies) {
      it(`refuses ${what} with 400 invalid_json before anything runs, uncharged`, async () => {
        const before = await stack.available();
        const res = await stack.post(path, body, { headers: { "content-type": "application/json" } });
        expect(res.status).to.equal(400);
        expect(res.body).to.include({ success: false, code: "invalid_json" });
        expect(res.body.error).to.include("64 levels");
        await stack.gw.db.durable();
        expect(await stack.available()).to.equal(before);
        await assertBalanced(stack.gw.db);
      });
    }

    it("accepts input nested 63 levels inside the body", async () => {
      const res = await stack.post("/v1/call", `{"skill_id":"echo","input":{"x":${nested(62)}}}`, {
        headers: { "content-type": "application/json" },
      });
      expect(res.status).to.equal(200);
    });

    it("does not count brackets inside strings", async () => {
      const res = await stack.post("/v1/call", { skill_id: "echo", input: { text: "[".repeat(5_000) + "{".repeat(5_000) } });
      expect(res.status).to.equal(200);
    });

    it("refuses a body in UTF-16, where the depth scan could not be trusted (a quote byte inside another character)", async () => {
      const text = `{"slug":"x","name":"\u2200${"[".repeat(5_000)}","input_schema":{"a":${nested(5_000)}}}`;
      const res = await fetch(`${stack.url}/v1/seller/skills`, {
        method: "POST",
        headers: { "content-type": "application/json; charset=utf-16le", cookie: seller.cookie, "x-csrf-token": seller.csrfToken },
        body: Buffer.from(text, "utf16le"),
      });
      expect(res.status).to.equal(400);
      expect(await res.json()).to.deep.include({
        success: false,
        code: "invalid_request",
        error: "Send the body as UTF-8 JSON (charset=utf-8).",
      });
    });

    it("refuses a deep body on an Express route (the seller's listing) with 400 too", async () => {
      const res = await seller.request("POST", "/v1/seller/skills", JSON.parse(`{"slug":"deep","input_schema":{"a":1}}`));
      expect(res.status).to.equal(400);
      const raw = await fetch(`${stack.url}/auth/email/start`, {
        method: "POST",
        headers: { "content-type": "application/json", origin: stack.url },
        body: `{"email":${nested(500)}}`,
      });
      expect(raw.status).to.equal(400);
      expect(await raw.json()).to.include({ success: false, code: "invalid_json" });
    });
  });

  describe("input JSON.parse would change: refused with 400, never rewritten and charged", () => {
    // The review's low finding: {"n":1e400} passed the schema as Infinity and reached the backend
    // as null, integers past 2^53 were rounded, and bytes that are not UTF-8 became U+FFFD; each
    // call was charged. Every route that takes a call's input reads it with the same parser.
    let buyer: TestSession;
    let keyId: string;
    beforeEach(async () => {
      buyer = await signedIn(stack, "buyer@example.com");
      await stack.gw.ledger.credit(buyer.accountId, 1_000_000n, "dev_credit", "test");
      keyId = (await buyer.request("POST", "/v1/keys", { name: "try" })).body.data.id;
    });

    const bytes = (...parts: (string | Buffer)[]) =>
      Buffer.concat(parts.map((part) => (typeof part === "string" ? Buffer.from(part) : part)));
    const postBytes = async (path: string, body: Buffer, headers: Record<string, string>) => {
      const url = stack.url + path;
      const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body });
      const reply: Reply = { status: res.status, headers: res.headers, body: await res.json() };
      assertDeclared("POST", url, reply);
      return reply;
    };
    const key = () => ({ authorization: `Bearer ${stack.key}` });

    /** Each route a call's input comes in by: where the input sits in its body, and its answer when the input is taken. */
    const routes: { name: string; at: string; taken: number; send: (input: Buffer) => ReturnType<typeof postBytes> }[] = [
      {
        name: "POST /v1/call",
        at: "input.",
        taken: 200,
        send: (input) => postBytes("/v1/call", bytes('{"skill_id":"echo","input":', input, "}"), key()),
      },
      { name: "POST /v1/skills/echo/call", at: "", taken: 200, send: (input) => postBytes("/v1/skills/echo/call", input, key()) },
      // Without an escrow chain, x402 answers 503 chain_not_configured, but only once the body is read.
      { name: "POST /x402/skills/echo/call", at: "", taken: 503, send: (input) => postBytes("/x402/skills/echo/call", input, {}) },
      {
        name: "POST /v1/skills/echo/try",
        at: "input.",
        taken: 200,
        send: (input) =>
          postBytes("/v1/skills/echo/try", bytes(`{"key_id":${JSON.stringify(keyId)},"input":`, input, "}"), {
            cookie: buyer.cookie,
            "x-csrf-token": buyer.csrfToken,
          }),
      },
      {
        name: "POST /mcp (tools/call)",
        at: "params.arguments.",
        taken: 200,
        send: (input) =>
          postBytes("/mcp", bytes('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":', input, "}}"), {
            ...key(),
            accept: "application/json, text/event-stream",
          }),
      },
    ];
    const refused: [string, Buffer, (at: string) => string][] = [
      [
        "a number beyond the largest double (JSON.parse makes it Infinity, forwarded as null)",
        bytes('{"n":1e400}'),
        (at) => `a number at ${at}n that cannot be read exactly as sent: 1e400 is beyond the largest JSON number`,
      ],
      [
        "an integer past 2^53 - 1 (JSON.parse rounds it)",
        bytes('{"n":12345678901234567890}'),
        (at) => `a number at ${at}n that cannot be read exactly as sent: 12345678901234567890 is an integer beyond 9007199254740991`,
      ],
      [
        "a byte that is not UTF-8 (decoding makes it U+FFFD)",
        Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d]),
        () => "Request body is not valid UTF-8",
      ],
    ];
    const taken: [string, string][] = [
      ["a decimal no double holds exactly, read as every JSON parser reads it", '{"n":0.1}'],
      ["the largest integer a double holds exactly", '{"n":9007199254740991}'],
    ];
    const books = async () => [await stack.available(), await stack.available(buyer.accountId), await stack.earned(), await stack.fees()];

    for (const route of routes) {
      for (const [what, input, message] of refused) {
        it(`refuses ${what} on ${route.name} with 400 invalid_json, before the backend is called or anything is charged`, async () => {
          const before = await books();
          const res = await route.send(input);
          expect(res.status).to.equal(400);
          expect(res.body).to.include({ success: false, code: "invalid_json" });
          expect(res.body.error).to.include(message(route.at));
          expect(stack.backend.received).to.deep.equal([]);
          await stack.gw.db.durable();
          expect(await books()).to.deep.equal(before);
          await assertBalanced(stack.gw.db);
        });
      }
      for (const [what, input] of taken) {
        it(`takes ${what} on ${route.name}${route.taken === 200 ? ", and the backend receives it as sent" : ""}`, async () => {
          const res = await route.send(Buffer.from(input));
          expect(res.status, JSON.stringify(res.body)).to.equal(route.taken);
          if (route.taken === 200) expect(stack.backend.received.map((r) => r.body)).to.deep.equal([input]);
          else expect(res.body).to.include({ code: "chain_not_configured" });
        });
      }
    }
  });

  it("leaves a stored skill whose schema today's rules refuse out of the catalogue, and keeps serving the others", async () => {
    await stack.gw.db.run("UPDATE skills SET input_schema = ?, updated_at = updated_at + 1 WHERE slug = 'fail'", [
      JSON.stringify({ type: "string", pattern: "(a)\\1" }),
    ]);
    await stack.gw.skills.refresh();
    expect((await stack.post("/v1/call", { skill_id: "fail", input: {} })).status).to.equal(404);
    expect((await stack.post("/v1/call", { skill_id: "echo", input: {} })).status).to.equal(200);
  });
});
