import fs from "node:fs";
import { expect } from "chai";
import { OPERATIONS } from "../../server/http/contract/document";
import { OPENAPI_FILE, openApiFileText } from "../../server/http/contract/file";
import { assertValidOpenApi } from "../helpers/openapi";

describe("docs/openapi.json", () => {
  it("is the document the declarations make now (run `npm run openapi` after changing server/http/contract/)", () => {
    const committed = fs.existsSync(OPENAPI_FILE) ? fs.readFileSync(OPENAPI_FILE, "utf8") : "";
    expect(committed === openApiFileText(), "docs/openapi.json is stale: run `npm run openapi` and commit it").to.equal(true);
  });

  it("is a valid OpenAPI 3.1 document", async () => {
    await assertValidOpenApi(JSON.parse(fs.readFileSync(OPENAPI_FILE, "utf8")));
  });

  it("writes each error answer once, under components/responses, and every operation refers to it", () => {
    const document = JSON.parse(openApiFileText()) as {
      paths: Record<string, Record<string, { responses: Record<string, { $ref?: string }> }>>;
      components: { responses: Record<string, unknown> };
    };
    const referred = new Set<string>();
    for (const [path, item] of Object.entries(document.paths)) {
      for (const [method, op] of Object.entries(item)) {
        for (const [status, response] of Object.entries(op.responses)) {
          if (Number(status) < 400) continue;
          expect(response.$ref, `${method} ${path} ${status}`).to.match(/^#\/components\/responses\//);
          const name = response.$ref!.split("/").pop()!;
          expect(document.components.responses, response.$ref).to.have.property(name);
          referred.add(name);
        }
      }
    }
    const components = Object.entries(document.components.responses);
    expect([...referred].sort()).to.deep.equal(components.map(([name]) => name).sort());
    const bodies = components.map(([, response]) => JSON.stringify(response));
    expect(new Set(bodies).size, "two components/responses are the same answer").to.equal(bodies.length);
  });

  it("declares each operation once, with at least one answer besides its errors or a 405", () => {
    const names = OPERATIONS.map((op) => `${op.method} ${op.path}`);
    expect(new Set(names).size).to.equal(names.length);
    for (const op of OPERATIONS)
      expect(op.responses.length > 0 || op.errors.includes("method_not_allowed"), `${op.method} ${op.path}`).to.equal(true);
  });
});
