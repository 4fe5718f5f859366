import { expect } from "chai";
import type { Database } from "../../server/db/sql";
import { SkillsStore, type SkillWrite } from "../../server/catalog/skills-store";
import { Ledger } from "../../server/ledger/ledger";
import { describeEachEngine } from "../helpers/engines";

const ID = "00000000-0000-4000-8000-0000000000aa";
const skill = (overrides: Partial<SkillWrite> = {}): SkillWrite => ({
  id: ID,
  slug: "echo",
  name: "Echo",
  description: "",
  pricing: "fixed",
  priceMicros: 5n,
  sellerAccountId: "ada",
  backendUrl: "http://127.0.0.1:1/",
  operatorListed: false,
  timeoutMs: 1000,
  rateLimitPerMin: null,
  inputSchemaJson: '{"type":"object"}',
  outputSchemaJson: null,
  signingSecret: "secret",
  ...overrides,
});

describeEachEngine("SkillsStore", (engine) => {
  let db: Database;
  let store: SkillsStore;

  beforeEach(async () => {
    db = await engine.open();
    await (await Ledger.open(db)).ensureAccount({ id: "ada", kind: "seller", name: "Ada" });
    store = new SkillsStore(db);
  });

  it("upserts by slug keeping the id (and the secret unless told to replace it), and the change stamp moves with each write", async () => {
    const before = await store.changeStamp();
    expect(await store.upsert(skill(), 1, true)).to.equal(ID);
    const afterInsert = await store.changeStamp();
    expect(afterInsert).to.not.equal(before);
    const other = "00000000-0000-4000-8000-0000000000bb";
    expect(await store.upsert(skill({ id: other, priceMicros: 7n, signingSecret: "new" }), 2, false)).to.equal(ID);
    expect(await store.listed()).to.have.length(1);
    expect((await store.listed())[0]).to.include({
      id: ID,
      priceMicros: 7n,
      inputSchemaJson: '{"type":"object"}',
      signingSecret: "secret",
    });
    expect(await store.changeStamp()).to.not.equal(afterInsert);
    await store.upsert(skill({ id: other, signingSecret: "rotated" }), 3, true);
    expect((await store.listed())[0]).to.include({ id: ID, signingSecret: "rotated" });
  });

  it("moves the change stamp for a write stamped earlier than the latest (a replica whose clock is behind)", async () => {
    await store.upsert(skill(), 100, true);
    await store.upsert(skill({ id: "00000000-0000-4000-8000-0000000000bb", slug: "other" }), 200, true);
    const before = await store.changeStamp();
    await store.unlist(ID, 150);
    expect(await store.changeStamp()).to.not.equal(before);
  });

  it("inserts a seller's skill only under a free slug, finds it by UUID or slug, updates and unlists it", async () => {
    expect(await store.insertIfSlugFree(skill(), 1)).to.equal(true);
    expect(await store.insertIfSlugFree(skill({ id: "00000000-0000-4000-8000-0000000000cc" }), 1)).to.equal(false);
    expect((await store.ownListing("ada", ID.toUpperCase()))?.slug).to.equal("echo");
    expect((await store.ownListing("ada", "echo"))?.listed).to.equal(true);
    expect(await store.ownListing("bob", "echo")).to.equal(undefined);
    const { id, slug, sellerAccountId, signingSecret, ...fields } = skill({ name: "Echo 2" });
    await store.updateOwn("ada", ID, { ...fields, listed: false }, 3);
    expect(await store.ownListing("ada", "echo")).to.include({ name: "Echo 2", listed: false, updatedAtMs: 3 });
    expect(await store.listed()).to.deep.equal([]);
    await store.updateOwn("ada", ID, { ...fields, listed: true }, 4);
    await store.unlist(ID, 5);
    expect((await store.listingsOf("ada")).map((s) => [s.slug, s.listed])).to.deep.equal([["echo", false]]);
  });

  it("keeps the operator's mark through a seller's edit that leaves the backend URL, and drops it for good when the seller sets another", async () => {
    await store.upsert(skill({ operatorListed: true }), 1, true);
    const { id, slug, sellerAccountId, signingSecret, operatorListed, ...fields } = skill();
    const operatorListedNow = async () => (await store.listed())[0].operatorListed;
    expect(await operatorListedNow()).to.equal(true);
    await store.updateOwn("ada", ID, { ...fields, priceMicros: 9n, listed: true }, 2);
    expect(await operatorListedNow()).to.equal(true);
    await store.updateOwn("ada", ID, { ...fields, backendUrl: "http://127.0.0.1:1/admin", listed: true }, 3);
    expect(await operatorListedNow()).to.equal(false);
    // Setting the operator's URL again does not bring the mark back: only the operator's registration does.
    await store.updateOwn("ada", ID, { ...fields, listed: true }, 4);
    expect(await operatorListedNow()).to.equal(false);
    await store.upsert(skill({ operatorListed: true }), 5, false);
    expect(await operatorListedNow()).to.equal(true);
  });

  it("reads a listing inside a transaction, locking it for the edit that follows", async () => {
    await store.insertIfSlugFree(skill(), 1);
    const name = await db.transaction(async (tx) => {
      const listing = await store.ownListing("ada", "echo", tx);
      const { id, slug, sellerAccountId, signingSecret, ...fields } = skill({ name: `${listing!.name} 2` });
      await store.updateOwn("ada", ID, { ...fields, listed: true }, 2, tx);
      return (await store.ownListing("ada", "echo", tx))!.name;
    });
    expect(name).to.equal("Echo 2");
  });
});
