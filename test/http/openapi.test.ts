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

  it("declares each operation once, with at least one answer besides its errors or a 405", () => {
    const names = OPERATIONS.map((op) => `${op.method} ${op.path}`);
    expect(new Set(names).size).to.equal(names.length);
    for (const op of OPERATIONS)
      expect(op.responses.length > 0 || op.errors.includes("method_not_allowed"), `${op.method} ${op.path}`).to.equal(true);
  });
});
