import { expect } from "chai";
import { type TestStack, startStack } from "../helpers/gateway";
import { type TestSession, signedIn } from "../helpers/session";
import { type ChargingBackend, startChargingBackend } from "../helpers/charging-backend";

/**
 * A seller's usage-priced listing (issue 27 §1): `pricing: "usage"` with a `max_price` (the bounds of a price), never a
 * `price`; a fixed-price skill has a `price`, never a `max_price`. Every refusal is a 400 invalid_request in the
 * envelope, with nothing saved.
 */
describe("usage pricing in the seller API (/v1/seller/skills)", () => {
  let stack: TestStack;
  let backend: ChargingBackend;
  let seller: TestSession;

  beforeEach(async () => {
    backend = await startChargingBackend();
    // The seller's backend is on loopback, standing in for one on the public internet (test/helpers/egress.ts).
    stack = await startStack({ publicStandIns: [backend.url] });
    seller = await signedIn(stack, "seller@example.com");
  });
  afterEach(async () => {
    await stack.close();
    await backend.close();
  });

  const listing = (overrides: Record<string, unknown> = {}) => ({
    slug: "metered",
    name: "Metered",
    pricing: "usage",
    max_price: "0.05",
    backend_url: `${backend.url}/charge`,
    ...overrides,
  });

  it("lists a usage-priced skill whose calls are charged what its backend reports, signed", async () => {
    const created = await seller.request("POST", "/v1/seller/skills", listing());
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    expect(created.body.data).to.include({ slug: "metered", pricing: "usage", max_price: 0.05 });
    expect(created.body.data).to.not.have.property("price");
    backend.setSecret(created.body.data.signing_secret);

    const listed = (await seller.request("GET", "/v1/seller/skills")).body.data[0];
    expect(listed).to.include({ pricing: "usage", max_price: 0.05 });
    const market = await stack.get("/v1/skills/metered", null);
    expect(market.body.data).to.include({ pricing: "usage", max_price: 0.05, price_per_call: 0.05 });

    const before = await stack.available();
    const call = await stack.post("/v1/call", { skill_id: "metered", input: { report: "0.0123" } });
    expect(call.status, JSON.stringify(call.body)).to.equal(200);
    expect(call.body.metadata.price_paid).to.equal(0.0123);
    await stack.gw.db.durable();
    expect(await stack.available()).to.equal(before - 12_300n);
    expect(await stack.earned(seller.accountId)).to.equal(11_070n);
  });

  const REFUSALS: Array<[string, Record<string, unknown>, string]> = [
    [
      "a price on a usage-priced skill",
      { price: "0.01" },
      "A usage-priced skill has a max_price (the most one call may cost), not a price",
    ],
    ["a usage-priced skill without max_price", { max_price: undefined }, "max_price is required for a usage-priced skill."],
    ["a max_price on a fixed-price skill", { pricing: "fixed", price: "0.01" }, "A fixed-price skill has a price, not a max_price"],
    ["a max_price without pricing", { pricing: undefined }, "A fixed-price skill has a price, not a max_price"],
    ["an unknown pricing", { pricing: "per_token" }, 'pricing must be "fixed" or "usage".'],
    ["a max_price above the price bounds", { max_price: "0.51" }, "max_price must be between $0.001 and $0.50."],
    ["a max_price below the price bounds", { max_price: "0" }, "max_price must be between $0.001 and $0.50."],
    ["a max_price of 7 decimals", { max_price: "0.0100001" }, "max_price must be a USD amount with at most 6 decimals"],
    ["a max_price that is no amount", { max_price: true }, "max_price must be a USD amount"],
  ];
  for (const [what, overrides, message] of REFUSALS) {
    it(`refuses ${what} with 400 invalid_request, saving nothing`, async () => {
      const reply = await seller.request("POST", "/v1/seller/skills", listing(overrides));
      expect(reply.status, JSON.stringify(reply.body)).to.equal(400);
      expect(reply.body).to.include({ success: false, code: "invalid_request" });
      expect(reply.body.error).to.contain(message);
      expect((await seller.request("GET", "/v1/seller/skills")).body.data).to.deep.equal([]);
    });
  }

  it("edits a usage-priced skill's max_price, and refuses a price for it", async () => {
    await seller.request("POST", "/v1/seller/skills", listing());
    const edited = await seller.request("PATCH", "/v1/seller/skills/metered", { max_price: 0.02 });
    expect(edited.status, JSON.stringify(edited.body)).to.equal(200);
    expect(edited.body.data).to.include({ pricing: "usage", max_price: 0.02 });
    const refused = await seller.request("PATCH", "/v1/seller/skills/metered", { price: 0.01 });
    expect(refused.status).to.equal(400);
    expect(refused.body.error).to.contain("A usage-priced skill has a max_price");
    const both = await seller.request("PATCH", "/v1/seller/skills/metered", { price: 0.01, max_price: 0.01 });
    expect(both.status).to.equal(400);
    expect(both.body.error).to.equal("Send price (a fixed price) or max_price (usage pricing), not both.");
    expect((await seller.request("GET", "/v1/seller/skills")).body.data[0]).to.include({ max_price: 0.02 });
  });

  it("switches a skill's pricing only with the amount the new pricing names", async () => {
    await seller.request("POST", "/v1/seller/skills", listing({ slug: "flat", pricing: "fixed", max_price: undefined, price: "0.01" }));
    const bare = await seller.request("PATCH", "/v1/seller/skills/flat", { pricing: "usage" });
    expect(bare.status).to.equal(400);
    expect(bare.body.error).to.equal('A change to "pricing": "usage" needs the skill\'s max_price too.');
    const switched = await seller.request("PATCH", "/v1/seller/skills/flat", { pricing: "usage", max_price: "0.03" });
    expect(switched.status, JSON.stringify(switched.body)).to.equal(200);
    expect(switched.body.data).to.include({ pricing: "usage", max_price: 0.03 });
    expect(switched.body.data).to.not.have.property("price");
    expect(stack.gw.skills.resolve("flat")).to.include({ pricing: "usage", priceMicros: 30_000n });
    const back = await seller.request("PATCH", "/v1/seller/skills/flat", { pricing: "fixed", price: "0.004" });
    expect(back.body.data).to.include({ pricing: "fixed", price: 0.004 });
  });
});
