// Mocha's configuration for `npm run test:server` (and `npx mocha`): the server's and the clients' suites, in
// two worker processes.
//
// In parallel mode mocha hands the files to its workers in the order of `spec`, each worker taking the next
// file when it finishes one, so a long file that comes last runs alone at the end while the other worker
// idles. The longest files (as timed on the project's 2-core machine, 2026-11-29) are therefore listed first, and every
// other test file follows in alphabetical order. The list is only an order: a file missing from it runs in
// its alphabetical place, and a file named here that no longer exists is left out.
"use strict";
const fs = require("node:fs");
const path = require("node:path");

const LONGEST_FIRST = [
  // Packs the four clients and installs them into a scratch project: 98 to 127 s of a worker, mostly tsc, npm and pip.
  "test/e2e/packaging.test.ts",
  "test/e2e/dashboard/dashboard.test.ts",
  "test/e2e/start-local.test.ts",
  "clients/cli/test/e2e.test.ts",
  "test/e2e/cluster.test.ts",
  "test/http/call.test.ts",
  "test/e2e/dashboard/forms.test.ts",
  "test/e2e/chaos.test.ts",
  "test/e2e/start-cluster.test.ts",
  "test/e2e/dashboard/skill-page.test.ts",
  "test/catalog/skills.test.ts",
  "test/e2e/dashboard/sign-in-links.test.ts",
  "test/e2e/dashboard/siwe.test.ts",
  "test/http/sign-in-csrf.test.ts",
  "test/http/mcp-oauth.test.ts",
  "test/db/copy-to-postgres.test.ts",
  "test/e2e/money-path.test.ts",
  "test/e2e/serve-restart.test.ts",
];

/** The test files under `dir` (relative to this directory), sorted, in the form mocha is given them. */
function testFiles(dir) {
  if (!fs.existsSync(path.join(__dirname, dir))) return [];
  return fs
    .readdirSync(path.join(__dirname, dir), { recursive: true })
    .map((file) => path.posix.join(dir, file.split(path.sep).join("/")))
    .filter((file) => file.endsWith(".test.ts"))
    .sort();
}

const all = [
  // The contract suites are Hardhat's (npm run test:contracts).
  ...testFiles("test").filter((file) => !file.startsWith("test/contracts/")),
  ...fs
    .readdirSync(path.join(__dirname, "clients"))
    .sort()
    .flatMap((client) => testFiles(`clients/${client}/test`)),
];

module.exports = {
  require: ["./server/devstack/ts-register.cjs", "./test/helpers/file-trail.cjs"],
  extension: ["ts"],
  spec: [...LONGEST_FIRST.filter((file) => all.includes(file)), ...all.filter((file) => !LONGEST_FIRST.includes(file))],
  timeout: 20000,
  exit: true,
  parallel: true,
  jobs: 2,
};
