// The SQLite ledger writer's thread (./ledger-writer.ts): the gateway runs its TypeScript through ts-node (npm start,
// npm run serve), and so does this thread, transpiling only, before it runs ./ledger-writer-thread.ts.
"use strict";
require("ts-node").register({ transpileOnly: true });
require("./ledger-writer-thread.ts");
