import path from "node:path";
import { startThread } from "../threads";
import type { DemoBackend } from "./demo-backend";

/**
 * The demo skill backend on a worker thread (`npm start`, `npm run start:cluster`): the seller's HTTP server, its
 * signature checks and JSON on an event loop of their own, so the gateway's carries only the gateway's work (with
 * it, npm start's main thread spent 685 µs a paid call; without it, 572: docs/benchmarks.md). The same backend as
 * startDemoBackend, which the tests run in-process; a route's secret is set by a message the thread acknowledges.
 */
export async function startDemoBackendThread(port = 0, host = "127.0.0.1"): Promise<DemoBackend> {
  const worker = await startThread(path.join(__dirname, "demo-backend-worker.ts"), { workerData: { port, host } });
  const acks = new Map<number, { resolve: () => void; reject: (error: Error) => void }>();
  let nextId = 1;
  let closing = false;
  let stopped = false;
  const url = await new Promise<string>((resolve, reject) => {
    const onMessage = (message: { kind: string; url?: string; message?: string }) => {
      if (message.kind === "failed") reject(new Error(`the demo backend could not start: ${message.message}`));
      if (message.kind !== "ready") return;
      worker.off("error", reject);
      worker.off("exit", onExit);
      resolve(message.url!);
    };
    const onExit = (code: number) => reject(new Error(`the demo backend's thread exited (code ${code}) before it listened`));
    worker.on("message", onMessage);
    worker.once("error", reject);
    worker.once("exit", onExit);
  });
  worker.on("message", (message: { kind: string; id?: number }) => {
    if (message.kind !== "secret_set") return;
    acks.get(message.id!)?.resolve();
    acks.delete(message.id!);
  });
  const exited = new Promise<void>((resolve) => worker.once("exit", () => resolve()));
  worker.on("error", (error) =>
    console.error(`the demo backend's thread failed: ${error instanceof Error ? error.message : String(error)}`),
  );
  void exited.then(() => {
    stopped = true;
    for (const ack of acks.values()) ack.reject(new Error("the demo backend's thread stopped before it took the secret"));
    acks.clear();
    if (!closing) console.error("the demo backend's thread stopped: the demo skills cannot answer");
  });
  return {
    url,
    setSecret: (route, secret) =>
      new Promise<void>((resolve, reject) => {
        if (closing || stopped) return reject(new Error(`the demo backend is ${closing ? "closed" : "stopped"}`));
        const id = nextId++;
        acks.set(id, { resolve, reject });
        worker.postMessage({ kind: "secret", id, path: route, secret });
      }),
    close: async () => {
      closing = true;
      worker.postMessage({ kind: "close" });
      // A thread that does not wind down on its own (a connection its close could not end) is stopped.
      const timer = setTimeout(() => void worker.terminate(), 5_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
