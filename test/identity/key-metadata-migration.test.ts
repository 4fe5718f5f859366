import { expect } from "chai";
import { describeMigration, oldKeysMigrated } from "../helpers/migrations";
import { ApiKeysStore } from "../../server/identity/api-keys-store";

/**
 * SQLite version 24 and PostgreSQL migration 0010 give keys their metadata (docs/keys.md, Keys made by code). A key
 * made before them keeps everything it had (its scopes, allowed skills, expiry, revocation) and has no metadata; a
 * key changed afterwards stores its metadata on either engine.
 */
const OLD_KEY =
  "INSERT INTO api_keys (id, account_id, name, prefix, hash, rate_limit_per_min, created_at, revoked_at, last_used_at, scopes, allowed_skills, expires_at)" +
  " VALUES (?, 'ada', 'agent', 'atom_abc', ?, NULL, 1, ?, NULL, 'calls usage:read', '[\"echo\"]', 4102444800000)";

describeMigration("API keys made before metadata, migrated", { sqlite: 24, postgres: 10 }, (at) => {
  beforeEach(() => oldKeysMigrated(at, OLD_KEY));

  it("keeps what each key could do and when it was revoked, with no metadata", async () => {
    const store = new ApiKeysStore(at().current());
    for (const [id, revokedAtMs] of [
      ["old", null],
      ["revoked", 5],
    ] as const) {
      expect(await store.byId(id)).to.deep.include({
        scopes: ["calls", "usage:read"],
        allowedSkills: ["echo"],
        expiresAtMs: 4102444800000,
        revokedAtMs,
        metadata: {},
      });
    }
  });

  it("stores the metadata a migrated key is given, and none again when it is emptied", async () => {
    const store = new ApiKeysStore(at().current());
    expect(await store.update("old", { metadata: { agent: "researcher-7", end_user: "u_42" } })).to.equal(true);
    expect((await store.byId("old"))!.metadata).to.deep.equal({ agent: "researcher-7", end_user: "u_42" });
    expect(await at().current().value("SELECT metadata FROM api_keys WHERE id = 'old'")).to.equal(
      '{"agent":"researcher-7","end_user":"u_42"}',
    );
    expect(await store.update("old", { metadata: {} })).to.equal(true);
    expect(await at().current().value("SELECT metadata FROM api_keys WHERE id = 'old'")).to.equal(null);
    expect(await store.update("revoked", { metadata: { agent: "x" } })).to.equal(false);
  });
});
