import path from "node:path";
import { buildOpenApiDocument } from "./document";

/** Where the committed copy of the document lives. */
export const OPENAPI_FILE = path.join(__dirname, "..", "..", "..", "docs", "openapi.json");

/** The committed file's exact text: the document, two-space indented, with a final newline. */
export function openApiFileText(): string {
  return `${JSON.stringify(buildOpenApiDocument(), null, 2)}\n`;
}
