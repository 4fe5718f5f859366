// A stand-in for the SQLite ledger writer's thread (server/gateway/ledger-writer-thread.ts) that answers every hold at
// once, naming the hold after its operation's id and saying how many operations came in the message that carried it;
// all the answers to one message leave in one message, as the real thread's answers of one turn do.
"use strict";
const { parentPort } = require("node:worker_threads");
parentPort.on("message", (messages) => {
  const replies = [];
  for (const message of messages) {
    if (message.op === "open") replies.push({ kind: "ready" });
    else if (message.op === "hold")
      replies.push({ kind: "done", id: message.id, value: { ok: true, hold: { id: `h${message.id}` }, carriedWith: messages.length } });
    else if (message.op === "close") replies.push({ kind: "closed" });
  }
  parentPort.postMessage(replies);
});
