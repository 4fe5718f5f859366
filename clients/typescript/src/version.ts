declare const require: (id: string) => unknown;

/**
 * The clients' version: the SDK's package.json `version` (one folder up from src/ and from dist/ alike), the one place
 * it is written. The CLI reports it (`--version`, its MCP server's version), and `npm run pack:clients` checks that
 * every other file npm or Python requires it in says the same.
 */
export const VERSION: string = (require("../package.json") as { version: string }).version;
