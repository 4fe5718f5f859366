// A stand-in for the SQLite ledger writer's thread (server/gateway/ledger-writer-thread.ts) that fails as a real one
// can: it answers a hold, reports a failed commit (a "fatal") at a settle, and dies at a release. Messages are lists
// both ways, as the real thread's are (server/gateway/ledger-writer-protocol.ts).
"use strict";
const { parentPort } = require("node:worker_threads");
const reply = (message) => parentPort.postMessage([message]);
parentPort.on("message", (messages) => {
  for (const message of messages) {
    if (message.op === "open") reply({ kind: "ready" });
    else if (message.op === "hold") reply({ kind: "done", id: message.id, value: { ok: true, hold: { id: "h1" } } });
    else if (message.op === "settle")
      reply({ kind: "fatal", error: { name: "SqliteError", message: "disk I/O error", code: "SQLITE_IOERR" } });
    else if (message.op === "release") process.exit(3);
    else if (message.op === "close") parentPort.close();
  }
});
