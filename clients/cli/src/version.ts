import fs from "node:fs";
import path from "node:path";

/**
 * The CLI's version, read from its own package.json (one folder up from src/ and from dist/ alike), so that
 * `--version` and the MCP server's version are the published package's and never a second copy of it.
 */
export const CLI_VERSION: string = (JSON.parse(fs.readFileSync(path.join(__dirname, "..", "package.json"), "utf8")) as { version: string })
  .version;
