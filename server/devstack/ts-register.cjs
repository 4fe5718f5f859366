// `ts-node/register/transpile-only` with its output cached on disk (./ts-transpile-cache.cjs): what the
// test suites and the child processes they start (`npm run serve`, crash children, `npm start`) preload
// to run TypeScript, so that each process does not compile again the files the last one compiled.
"use strict";
require("ts-node").register({ transpileOnly: true, transpiler: require.resolve("./ts-transpile-cache.cjs") });
