import { expect } from "chai";
import { privateKeyToAddress, generatePrivateKey } from "viem/accounts";
import { type DemoBackend, startDemoBackend } from "../../server/devstack/demo-backend";
import { seedDemo } from "../../server/devstack/seed";
import { type TestStack, startStack } from "../helpers/gateway";

/**
 * The demo seller's `strict-echo`, as `npm start` seeds it (issue 27): it echoes any input and promises a string
 * `text`, so {"text":"hi"} keeps the promise (200, charged) and {"x":1} breaks it (502 skill_bad_output, not charged).
 */
describe("the demo's strict-echo (npm start)", () => {
  let stack: TestStack;
  let backend: DemoBackend;
  beforeEach(async () => {
    backend = await startDemoBackend();
    // The demo backend is on loopback: allowlisted for the operator's skills, as npm start does.
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

  it('charges {"text":"hi"} and not {"x":1}, which its seller sees as the first problem', async () => {
    const listed = await stack.get("/v1/skills/strict-echo", null);
    expect(listed.body.data.output_schema).to.deep.equal({ type: "object", properties: { text: { type: "string" } }, required: ["text"] });

    const kept = await stack.post("/v1/skills/strict-echo/call", { text: "hi" });
    expect(kept.status).to.equal(200);
    expect(kept.body.data).to.deep.equal({ text: "hi" });
    expect(kept.body.metadata.cost).to.equal(0.001);
    await stack.gw.db.durable();
    const before = await stack.available();
    expect(before).to.equal(10_000_000n - 1_000n);

    const broken = await stack.post("/v1/skills/strict-echo/call", { x: 1 });
    expect(broken.status).to.equal(502);
    expect(broken.body).to.include({ success: false, code: "skill_bad_output" });
    expect(broken.body.metadata.cost).to.equal(0);
    await stack.gw.db.durable();
    expect(await stack.available()).to.equal(before);
    const skill = stack.gw.skills.resolve("strict-echo")!;
    const [failure] = await stack.gw.calls.outputFailures(skill.id, 10);
    expect(failure).to.include({ callId: broken.headers.get("x-call-id"), problem: "#/required: must have required property 'text'" });

    // The plain echo beside it still echoes anything: each route checks its own skill's signature.
    expect((await stack.post("/v1/skills/echo/call", { x: 1 })).status).to.equal(200);
  });
});
