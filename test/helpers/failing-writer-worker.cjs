// A stand-in for the SQLite ledger writer's thread (server/gateway/ledger-writer-thread.ts) that fails as a real one
// can: it answers a hold, reports a failed commit (a "fatal") at a settle, and dies at a release.
"use strict";
const { parentPort } = require("node:worker_threads");
parentPort.on("message", (message) => {
  if (message.op === "open") parentPort.postMessage({ kind: "ready" });
  else if (message.op === "hold") parentPort.postMessage({ kind: "done", id: message.id, value: { ok: true, hold: { id: "h1" } } });
  else if (message.op === "settle")
    parentPort.postMessage({ kind: "fatal", error: { name: "SqliteError", message: "disk I/O error", code: "SQLITE_IOERR" } });
  else if (message.op === "release") process.exit(3);
  else if (message.op === "close") parentPort.close();
});
