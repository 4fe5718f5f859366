/**
 * The CLI's version: the SDK's `VERSION` (its package.json's, the one place the clients' version is written), so that
 * `--version` and the MCP server's version are never a second copy. `npm run pack:clients` refuses to pack a CLI whose
 * package.json says another.
 */
export { VERSION as CLI_VERSION } from "@skill-gateway/sdk";
