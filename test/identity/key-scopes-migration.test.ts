import { expect } from "chai";
import { describeMigration, oldKeysMigrated } from "../helpers/migrations";
import { authorize } from "../../server/http/auth";
import { takesApiKey } from "../../server/http/contract/common";
import { OPERATIONS } from "../../server/http/contract/document";
import { ApiKeysStore } from "../../server/identity/api-keys-store";

/**
 * SQLite version 23 and PostgreSQL migration 0009 give every key scopes. A key made before them could call skills,
 * read its account's books and make withdrawal vouchers, and nothing else an API key can reach: migrated, it keeps
 * exactly that (calls, usage:read, funds:withdraw), never keys:manage, every skill, no expiry. A key written after
 * them without naming its scopes gets the least, calls.
 */
const OLD_KEY =
  "INSERT INTO api_keys (id, account_id, name, prefix, hash, rate_limit_per_min, created_at, revoked_at, last_used_at) VALUES (?, 'ada', 'laptop', 'atom_abc', ?, NULL, 1, ?, NULL)";

describeMigration("API keys made before scopes, migrated", { sqlite: 23, postgres: 9, upTo: "latest" }, (at) => {
  beforeEach(() => oldKeysMigrated(at, OLD_KEY));

  it("keeps exactly what an old key could do: calls, usage:read and funds:withdraw, every skill, no expiry", async () => {
    const store = new ApiKeysStore(at().current());
    for (const id of ["old", "revoked"]) {
      const key = (await store.byId(id))!;
      expect(key).to.deep.include({ scopes: ["calls", "usage:read", "funds:withdraw"], allowedSkills: null, expiresAtMs: null });
    }
    const key = (await store.byId("old"))!;
    // Every operation an API key could reach before is still open to it...
    const keyed = OPERATIONS.filter(takesApiKey);
    for (const op of keyed.filter((o) => o.scope !== "keys:manage"))
      expect(authorize(key, op), `${op.method} ${op.path}`).to.deep.equal({});
    // ...and nothing new: keys:manage (the provisioning API, /v1/keys, which took only a session before) it never had.
    expect(key.scopes).to.not.include("keys:manage");
    const provisioning = keyed.filter((o) => o.scope === "keys:manage");
    expect(provisioning.map((o) => `${o.method} ${o.path}`)).to.include("post /v1/keys");
    for (const op of provisioning) expect(() => authorize(key, op), `${op.method} ${op.path}`).to.throw(/lacks the keys:manage scope/);
  });

  it("gives a key written afterwards without scopes the least: calls", async () => {
    const migrated = at().current();
    await migrated.run(OLD_KEY, ["new", "hash-new", null]);
    expect((await new ApiKeysStore(migrated).byId("new"))!.scopes).to.deep.equal(["calls"]);
  });
});
