/**
 * Writes the API's OpenAPI 3.1 document to docs/openapi.json (`npm run openapi`), from the
 * declarations in server/http/contract/. The gateway serves the same document at
 * GET /openapi.json; test/http/openapi.test.ts fails when the committed file is stale.
 */
import fs from "node:fs";
import path from "node:path";
import { OPENAPI_FILE, openApiFileText } from "../server/http/contract/file";

fs.writeFileSync(OPENAPI_FILE, openApiFileText());
console.log(`wrote ${path.relative(process.cwd(), OPENAPI_FILE)}`);
