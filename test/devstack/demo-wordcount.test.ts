import { expect } from "chai";
import { privateKeyToAddress, generatePrivateKey } from "viem/accounts";
import { type DemoBackend, startDemoBackend } from "../../server/devstack/demo-backend";
import { seedDemo } from "../../server/devstack/seed";
import { assertBalanced } from "../../server/ledger/invariants";
import { type TestStack, startStack } from "../helpers/gateway";

/**
 * The demo seller's `wordcount`, as `npm start` seeds it (issue 27): usage-priced, $0.0001 a word of `text`, at most
 * $0.01 a call, its charge reported and signed by the demo backend with signCharge.
 */
describe("the demo's wordcount (npm start)", () => {
  let stack: TestStack;
  let backend: DemoBackend;
  beforeEach(async () => {
    backend = await startDemoBackend();
    stack = await startStack({ config: { skillBackendAllowlist: [backend.url] } });
    await seedDemo(stack.gw, backend, {
      buyer: privateKeyToAddress(generatePrivateKey()),
      seller: privateKeyToAddress(generatePrivateKey()),
    });
  });
  afterEach(async () => {
    await stack.close();
    await backend.close();
  });

  it("is listed as usage-priced up to $0.01, and charges $0.0001 a word, never more than $0.01", async () => {
    const listed = await stack.get("/v1/skills/wordcount", null);
    expect(listed.body.data).to.include({ pricing: "usage", max_price: 0.01 });

    const three = await stack.post("/v1/call", { skill_id: "wordcount", input: { text: "one two  three" } });
    expect(three.status, JSON.stringify(three.body)).to.equal(200);
    expect(three.body.data).to.deep.equal({ words: 3 });
    expect(three.body.metadata.price_paid).to.equal(0.0003);

    const many = await stack.post("/v1/skills/wordcount/call", { text: "word ".repeat(250) });
    expect(many.body.data).to.deep.equal({ words: 250 });
    expect(many.body.metadata.cost).to.equal(0.01);

    const none = await stack.post("/v1/skills/wordcount/call", { text: "   " });
    expect(none.body.metadata.cost).to.equal(0);
    await stack.gw.db.durable();
    expect(await stack.available()).to.equal(10_000_000n - 300n - 10_000n);
    await assertBalanced(stack.gw.db);
  });
});
