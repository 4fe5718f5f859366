import { expect } from "chai";
import type { Target } from "./cases";
import { generateCase } from "./generator";

const target: Target = {
  keys: { rich: "atom_rich", poor: "atom_poor", limited: "atom_limited", revoked: "atom_revoked" },
  skills: [
    { slug: "fz-echo", id: "00000000-0000-4000-8000-000000000001" },
    { slug: "fz-const", id: "00000000-0000-4000-8000-000000000002" },
  ],
  schemaSkills: ["fz-schema-basic", "fz-schema-unique", "fz-schema-ref", "fz-schema-redos"],
  redosSkill: "fz-schema-redos",
  hostileSkills: ["fz-internal-0"],
  session: { cookie: "sg_session=s", csrf: "c", keyId: "k" },
  internalPorts: [1, 2],
  origin: "http://127.0.0.1:2",
  backendUrl: "http://127.0.0.1:3",
};

describe("the fuzz generator", () => {
  it("makes the same case from the same seed and index, so one case replays alone", () => {
    for (let index = 0; index < 300; index++) expect(generateCase(42, index, target)).to.deep.equal(generateCase(42, index, target));
  });

  it("makes other cases from another seed", () => {
    const labels = (seed: number) => Array.from({ length: 50 }, (_, i) => JSON.stringify(generateCase(seed, i, target).steps)).join("\n");
    expect(labels(1)).not.to.equal(labels(2));
  });

  it("covers every category within a few hundred cases", () => {
    const seen = new Set(Array.from({ length: 500 }, (_, i) => generateCase(7, i, target).category));
    expect([...seen].sort()).to.deep.equal([
      "auth_routes",
      "call_auth",
      "call_bytes",
      "call_json",
      "hostile_backend",
      "other_routes",
      "raw_http",
      "reads",
      "seller_schema",
      "seller_url",
    ]);
  });
});
