// For this repository's own use (tests, and the CLI run from a clone): when the SDK has not
// been built, `require("@skill-gateway/sdk")` resolves to its TypeScript source instead of the
// missing dist/ (ts-node, registered by the caller, compiles it). A built SDK is left alone.
// Not part of the published package (package.json "files" ships dist/ only).
"use strict";
const Module = require("node:module");
const path = require("node:path");

try {
  require.resolve("@skill-gateway/sdk");
} catch {
  const source = path.join(__dirname, "src", "index.ts");
  const resolve = Module._resolveFilename;
  Module._resolveFilename = function (request, ...rest) {
    return resolve.call(this, request === "@skill-gateway/sdk" ? source : request, ...rest);
  };
}
