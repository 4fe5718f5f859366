/**
 * The demo skill backend (./demo-backend.ts) on a worker thread of its own (./demo-backend-thread.ts starts it, from an
 * esbuild bundle: ../threads.ts): npm start's seller serves its calls on another event loop than the gateway's.
 */
import { parentPort, workerData } from "node:worker_threads";
import { startDemoBackend } from "./demo-backend";

const port = parentPort!;
const start = workerData as { port: number; host: string };

startDemoBackend(start.port, start.host).then(
  (backend) => {
    port.on("message", (message: { kind: string; id?: number; path?: string; secret?: string }) => {
      if (message.kind === "secret") {
        void backend.setSecret(message.path!, message.secret!).then(() => port.postMessage({ kind: "secret_set", id: message.id }));
      } else if (message.kind === "close") {
        // Closing the server lets the thread's event loop run out: the worker exits on its own.
        void backend.close().then(() => port.close());
      }
    });
    port.postMessage({ kind: "ready", url: backend.url });
  },
  (error: unknown) => {
    // Cannot listen (the port is taken): said to the parent, whose startDemoBackendThread rejects with it.
    port.postMessage({ kind: "failed", message: error instanceof Error ? error.message : String(error) });
    port.close();
  },
);
