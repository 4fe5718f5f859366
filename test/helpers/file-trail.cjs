// With SKILL_GATEWAY_TEST_TRAIL naming a file, each mocha process appends "start <pid> <test file>" as it begins a
// test file's tests and "end <pid> <test file>" once it moves on to another file or finishes. A mocha worker that dies
// (a crash of Node itself: the parallel runner then reports only "Worker terminated Unexpectedly") leaves a start
// without its end, which names the file it was running: .ci/run prints those after a failed run. Loaded by
// .mocharc.cjs; the same in parallel mode (a root suite per file) and serial (one root suite for every file).
"use strict";
const fs = require("node:fs");

const trail = process.env.SKILL_GATEWAY_TEST_TRAIL;
let current;
const note = (what, file) => fs.appendFileSync(trail, `${what} ${process.pid} ${file}\n`);
const ended = () => {
  if (current !== undefined) note("end", current);
  current = undefined;
};

exports.mochaHooks = trail
  ? {
      beforeEach() {
        const file = this.currentTest?.file ?? "(unknown file)";
        if (file === current) return;
        ended();
        current = file;
        note("start", file);
      },
      afterAll: ended,
    }
  : {};
