import { expect } from "chai";
import { checkDisplayName } from "../../server/identity/display-name";
import { type TestStack, startStack } from "../helpers/gateway";
import { type TestSession, send, signedIn } from "../helpers/session";

/**
 * A seller's display name (issue 16): set with PATCH /v1/account, read back in GET /v1/me, and shown as the
 * seller of the account's skills in GET /v1/skills instead of its shortened address or its e-mail.
 */
describe("PATCH /v1/account (the seller's display name)", () => {
  let stack: TestStack;
  let seller: TestSession;

  before(async () => {
    stack = await startStack();
    seller = await signedIn(stack, "ada@example.com");
    const listed = await seller.request("POST", "/v1/seller/skills", {
      slug: "ada-echo",
      name: "Ada's echo",
      price: "0.01",
      backend_url: `${stack.backend.url}/echo`,
    });
    expect(listed.status, JSON.stringify(listed.body)).to.equal(201);
  });
  after(async () => {
    await stack.close();
  });

  const sellerShown = async () => {
    const skills = (await send(`${stack.url}/v1/skills`, "GET", {})).body.data as { slug: string; seller: { name: string } }[];
    return skills.find((s) => s.slug === "ada-echo")!.seller.name;
  };

  it("needs a session and its CSRF token", async () => {
    expect((await send(`${stack.url}/v1/account`, "PATCH", {}, JSON.stringify({ display_name: "X" }))).status).to.equal(401);
    expect((await seller.request("PATCH", "/v1/account", { display_name: "X" }, { csrf: false })).status).to.equal(403);
  });

  it("shows an e-mail seller without a display name by neither its e-mail nor a name it did not choose", async () => {
    expect((await seller.request("GET", "/v1/me")).body.data.display_name).to.equal(null);
    const shown = await sellerShown();
    expect(shown).to.not.include("@");
  });

  it("sets a trimmed display name that /v1/me reads back and the marketplace shows as the seller", async () => {
    const set = await seller.request("PATCH", "/v1/account", { display_name: "  Ada Labs  " });
    expect(set.status, JSON.stringify(set.body)).to.equal(200);
    expect(set.body.data).to.deep.equal({ account_id: seller.accountId, display_name: "Ada Labs" });
    expect((await seller.request("GET", "/v1/me")).body.data).to.include({ display_name: "Ada Labs", name: "ada@example.com" });
    expect(await sellerShown()).to.equal("Ada Labs");
    expect((await send(`${stack.url}/v1/skills/ada-echo`, "GET", {})).body.data.seller.name).to.equal("Ada Labs");
  });

  const refused: [string, unknown][] = [
    ["an empty name", ""],
    ["only spaces", "   "],
    ["61 characters", "x".repeat(61)],
    ["a newline", "Ada\nLabs"],
    ["a right-to-left override", "Ada\u202ELabs"],
    ["a number", 42],
    ["no display_name at all", undefined],
  ];
  for (const [what, value] of refused) {
    it(`refuses ${what} with 400 invalid_request, keeping the name it had`, async () => {
      const reply = await seller.request("PATCH", "/v1/account", value === undefined ? {} : { display_name: value });
      expect(reply.status).to.equal(400);
      expect(reply.body).to.include({ success: false, code: "invalid_request" });
      expect(reply.body.error).to.match(/display.name/i);
      expect(await sellerShown()).to.equal("Ada Labs");
    });
  }

  it("removes the display name with null: the marketplace falls back to the address", async () => {
    const cleared = await seller.request("PATCH", "/v1/account", { display_name: null });
    expect(cleared.body.data).to.deep.equal({ account_id: seller.accountId, display_name: null });
    expect(await sellerShown())
      .to.not.equal("Ada Labs")
      .and.not.include("@");
  });
});

describe("checkDisplayName", () => {
  it("counts characters, not UTF-16 units: 60 emoji fit, 61 do not", () => {
    expect(checkDisplayName("🙂".repeat(60))).to.deep.equal({ ok: true, name: "🙂".repeat(60) });
    expect(checkDisplayName("🙂".repeat(61)).ok).to.equal(false);
  });

  it("refuses names that show nothing or hide characters: fillers, format marks, separators, piled-up accents", () => {
    for (const name of ["\u3164", "\u2800", "a\u061Cb", "a\u00ADb", "a\u2028b", "a\u{E0041}b", "e\u0301\u0301\u0301\u0301\u0301\u0301"]) {
      expect(checkDisplayName(name).ok, JSON.stringify(name)).to.equal(false);
    }
    expect(checkDisplayName("e\u0301").ok).to.equal(true);
  });

  it("keeps inner spaces and accents", () => {
    expect(checkDisplayName(" Zoë  Café ")).to.deep.equal({ ok: true, name: "Zoë  Café" });
  });
});
