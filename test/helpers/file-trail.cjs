// With SKILL_GATEWAY_TEST_TRAIL naming a file, each mocha process appends "start <pid> <test file>" as it begins a
// test file and "end <pid> <test file>" once the file's tests are done. A mocha worker that dies (a crash of Node
// itself: the parallel runner then reports only "Worker terminated Unexpectedly") leaves a start without its end,
// which names the file it was running: .ci/run prints those after a failed run. Loaded by .mocharc.cjs.
"use strict";
const fs = require("node:fs");

const trail = process.env.SKILL_GATEWAY_TEST_TRAIL;
/** The file of the root suite's first suite: the test file being run (one per root suite in parallel mode). */
const fileOf = (context) => context.test?.parent?.suites?.[0]?.file ?? context.test?.parent?.file ?? "(unknown file)";
const note = (what, context) => fs.appendFileSync(trail, `${what} ${process.pid} ${fileOf(context)}\n`);

exports.mochaHooks = trail
  ? {
      beforeAll() {
        note("start", this);
      },
      afterAll() {
        note("end", this);
      },
    }
  : {};
