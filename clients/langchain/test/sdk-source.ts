/**
 * Tests run from a fresh clone, where the SDK workspace is not built: resolve
 * `@skill-gateway/sdk` to its TypeScript source (ts-node compiles it), as the bin launcher does.
 * Import this first.
 */
import Module from "node:module";
import path from "node:path";

try {
  require.resolve("@skill-gateway/sdk");
} catch {
  const sdkSource = path.join(__dirname, "..", "..", "typescript", "src", "index.ts");
  const mod = Module as unknown as { _resolveFilename: (request: string, ...rest: unknown[]) => string };
  const resolve = mod._resolveFilename;
  mod._resolveFilename = function (this: unknown, request: string, ...rest: unknown[]) {
    return resolve.call(this, request === "@skill-gateway/sdk" ? sdkSource : request, ...rest);
  };
}
