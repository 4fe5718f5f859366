// The demo skill backend (./demo-backend.ts) on a worker thread of its own (./demo-backend-thread.ts): npm start's
// seller serves its calls on another event loop than the gateway's. Plain CommonJS, so a worker can start it
// whatever loaded the main thread; the backend itself is loaded through the transpile cache, as npm start is.
"use strict";
const { parentPort, workerData } = require("node:worker_threads");

if (!require.extensions[".ts"]) require("./ts-register.cjs");
const { startDemoBackend } = require("./demo-backend.ts");

startDemoBackend(workerData.port, workerData.host).then(
  (backend) => {
    parentPort.on("message", (message) => {
      if (message.kind === "secret") {
        void backend.setSecret(message.path, message.secret).then(() => parentPort.postMessage({ kind: "secret_set", id: message.id }));
      } else if (message.kind === "close") {
        // Closing the server lets the thread's event loop run out: the worker exits on its own.
        void backend.close().then(() => parentPort.close());
      }
    });
    parentPort.postMessage({ kind: "ready", url: backend.url });
  },
  (error) => {
    // Cannot listen (the port is taken): said to the parent, whose startDemoBackendThread rejects with it.
    parentPort.postMessage({ kind: "failed", message: error instanceof Error ? error.message : String(error) });
    parentPort.close();
  },
);
