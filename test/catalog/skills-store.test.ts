import { expect } from "chai";
import { SqliteSkillsStore, type SkillWrite } from "../../server/catalog/skills-store";
import { type Db, openDatabase } from "../../server/db/db";
import { SCHEMA } from "../../server/schema";
import { Ledger } from "../../server/ledger/ledger";

const ID = "00000000-0000-4000-8000-0000000000aa";
const skill = (overrides: Partial<SkillWrite> = {}): SkillWrite => ({
  id: ID,
  slug: "echo",
  name: "Echo",
  description: "",
  priceMicros: 5n,
  sellerAccountId: "ada",
  backendUrl: "http://127.0.0.1:1/",
  timeoutMs: 1000,
  rateLimitPerMin: null,
  inputSchemaJson: '{"type":"object"}',
  signingSecret: "secret",
  ...overrides,
});

describe("SkillsStore on a real SQLite database", () => {
  let db: Db;
  let store: SqliteSkillsStore;

  beforeEach(() => {
    db = openDatabase(":memory:", SCHEMA);
    new Ledger(db).ensureAccount({ id: "ada", kind: "seller", name: "Ada" });
    store = new SqliteSkillsStore(db);
  });
  afterEach(() => db.close());

  it("upserts by slug keeping the id, and the change stamp moves with each write", () => {
    const before = store.changeStamp();
    store.upsert(skill(), 1);
    const afterInsert = store.changeStamp();
    expect(afterInsert).to.not.equal(before);
    store.upsert(skill({ id: "00000000-0000-4000-8000-0000000000bb", priceMicros: 7n }), 2);
    expect(store.listed()).to.have.length(1);
    expect(store.listed()[0]).to.include({ id: ID, priceMicros: 7n, inputSchemaJson: '{"type":"object"}' });
    expect(store.idAndSecretOf("echo")).to.deep.equal({ id: ID, signingSecret: "secret" });
    expect(store.changeStamp()).to.not.equal(afterInsert);
  });

  it("inserts a seller's skill only under a free slug, finds it by UUID or slug, updates and unlists it", () => {
    expect(store.insertIfSlugFree(skill(), 1)).to.equal(true);
    expect(store.insertIfSlugFree(skill({ id: "00000000-0000-4000-8000-0000000000cc" }), 1)).to.equal(false);
    expect(store.ownListing("ada", ID.toUpperCase())?.slug).to.equal("echo");
    expect(store.ownListing("ada", "echo")?.listed).to.equal(true);
    expect(store.ownListing("bob", "echo")).to.equal(undefined);
    const { id, slug, sellerAccountId, signingSecret, ...fields } = skill({ name: "Echo 2" });
    store.updateOwn("ada", ID, { ...fields, listed: false }, 3);
    expect(store.ownListing("ada", "echo")).to.include({ name: "Echo 2", listed: false, updatedAtMs: 3 });
    expect(store.listed()).to.deep.equal([]);
    store.updateOwn("ada", ID, { ...fields, listed: true }, 4);
    store.unlist(ID, 5);
    expect(store.listingsOf("ada").map((s) => [s.slug, s.listed])).to.deep.equal([["echo", false]]);
  });
});
