#!/usr/bin/env node
"use strict";
// The skill-gateway command. The package (built on pack) runs dist/cli.js; a fresh clone of the
// repository (no build step) runs src/cli.ts through ts-node, against the SDK's source when the
// SDK is not built either.
const fs = require("node:fs");
const path = require("node:path");

const built = path.join(__dirname, "..", "dist", "cli.js");
let cli;
if (fs.existsSync(built)) {
  cli = require(built);
} else {
  let tsNode;
  try {
    tsNode = require("ts-node");
  } catch {
    process.stderr.write(
      `skill-gateway: this copy of @skill-gateway/cli has no ${built}: build it (npm run build:cli in the gateway's repository), or install the packed package (npm run pack:clients).\n`,
    );
    process.exit(1);
  }
  tsNode.register({ transpileOnly: true, project: path.join(__dirname, "..", "tsconfig.json") });
  require(path.join(__dirname, "..", "..", "typescript", "source.cjs"));
  cli = require(path.join(__dirname, "..", "src", "cli.ts"));
}
cli.run(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error) => {
    process.stderr.write(`skill-gateway: ${error?.message ? error.message : error}\n`);
    process.exitCode = 1;
  },
);
