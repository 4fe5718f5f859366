/**
 * Inside the SQLite ledger writer's thread (./ledger-writer.ts starts it): a connection of its own to the gateway's
 * file, its own group commit (synchronous=FULL: the COMMIT's fsync blocks this thread, not the event loop), and the
 * keyed calls' holds, captures and releases run by the same code as on the event loop (LedgerHolds, writeCall), as
 * the event loop asks for them. The file's write lock (../db/writer-lock.ts) is shared with the event loop's
 * connection, which keeps every other write of the gateway.
 *
 * The thread serves one file at a time, from an `open` to a `close`, and everything it holds for that file lives in
 * the `Session` the `open` makes: once a close has committed and closed the connection cleanly, the thread waits for
 * the next `open` (the event loop keeps it for the next gateway of its process: starting a thread costs more than most
 * of what it then does in a test). After a failure nothing runs any more, and the event loop stops the thread.
 */
import { parentPort } from "node:worker_threads";
import { openSqliteWriterConnection } from "../db/sqlite-database";
import { WriterLock } from "../db/writer-lock";
import { Ledger } from "../ledger/ledger";
import { CallsStore } from "./calls-store";
import { type CallWrite, type CallWriteStores, writeCall } from "./call-write";
import { IdempotencyStore } from "./idempotency-store";
import { LedgerHolds } from "./ledger-payment";
import type { RecordCall } from "./payment";
import type { WriterMessage, WriterReply, WriterRequest, WriterStart } from "./ledger-writer-protocol";

/** How long a batch nobody awaits (holds, releases) stays open for more, at most: the event loop may wait that long for the file. */
const MAX_BATCH_DELAY_MS = 2;

const port = parentPort!;

/**
 * The replies decided since the last were sent, sent together, in order: one message, and one wake-up of the event
 * loop, for every answer a commit released. They leave at the end of the loop's turn, and sooner whenever the thread
 * is about to block or take on more work: before it waits for the file's lock, before each COMMIT (its fsync), and
 * before it reads the next message.
 */
let outbox: WriterReply[] = [];
function reply(message: WriterReply): void {
  if (outbox.push(message) === 1) setImmediate(sendReplies);
}
function sendReplies(): void {
  if (outbox.length === 0) return;
  const batch = outbox;
  outbox = [];
  try {
    port.postMessage(batch);
  } catch (error) {
    // An answer that cannot be copied to the event loop (never expected: answers are plain data). What the thread
    // wrote and what the event loop hears no longer agree: the writer's end, as a failed commit is.
    broken ??= error;
    port.postMessage([{ kind: "fatal", error: describe(error) }] satisfies WriterReply[]);
  }
}

/** One file's connection and the operations on it, from an `open` to its `close`. */
interface Session {
  run(request: WriterRequest): Promise<unknown>;
  close(): Promise<void>;
}

/** After a failure the thread's books are not what its answers said: nothing runs any more (the event loop stops the thread). */
let broken: unknown;
function fatal(error: unknown): void {
  broken ??= error;
  reply({ kind: "fatal", error: describe(error) });
}

async function open(start: WriterStart): Promise<Session> {
  const db = openSqliteWriterConnection(start.file, new WriterLock(start.lock), {
    onCommitError: fatal,
    maxDelayMs: MAX_BATCH_DELAY_MS,
    beforeBlocking: sendReplies,
  });
  const ledger = await Ledger.open(db);
  // The event loop's exits module notes a new shortfall in its own Ledger, not this one: every hold and release here
  // checks for one (an indexed query) rather than miss it.
  ledger.noteExitShortfall();
  // Told from here on: the event loop's start() waits for "ready" as the first message.
  db.commit.onCommit = (stats) => reply({ kind: "commit", stats });
  const holds = new LedgerHolds(ledger);
  const stores: CallWriteStores = { calls: new CallsStore(db), idempotency: new IdempotencyStore(db) };
  const record = (write: CallWrite): RecordCall => ({ write, run: (tx) => writeCall(stores, write, tx) });
  return {
    async run(request) {
      switch (request.op) {
        case "hold":
          return holds.hold(request.input);
        case "settle":
          return holds.settle(request.holdId, request.key, record(request.write), request.captured);
        case "void":
          // Answered once committed: the event loop reads what is committed, and a failed call's answer says its
          // money is back.
          await holds.void(request.holdId, record(request.write));
          return db.durable();
        case "release":
          await holds.release(request.holdId);
          return db.durable();
        case "caught_up":
          return db.durable();
      }
    },
    close: () => db.close(),
  };
}

let session: Session | undefined;
/** The operations whose answers are not yet posted: "closed" is posted after them, so no answer follows it. */
const answering = new Set<Promise<void>>();
port.on("message", (messages: WriterMessage[]) => {
  // What is decided leaves before the new work starts.
  sendReplies();
  for (const message of messages) receive(message);
});

function receive(message: WriterMessage): void {
  switch (message.op) {
    case "open":
      if (broken !== undefined || session !== undefined) {
        fatal(new Error("the ledger writer's thread was opened while it was not idle"));
        return;
      }
      open(message).then(
        (opened) => {
          session = opened;
          reply({ kind: "ready" });
        },
        (error: unknown) => fatal(error),
      );
      return;
    case "close": {
      const closing = session;
      session = undefined;
      (closing?.close() ?? Promise.resolve())
        .then(() => Promise.all(answering))
        .then(
          () => reply(broken === undefined ? { kind: "closed" } : { kind: "fatal", error: describe(broken) }),
          (error: unknown) => {
            fatal(error);
            sendReplies();
            port.close();
          },
        );
      return;
    }
    default: {
      const request = message;
      const running =
        broken !== undefined
          ? Promise.reject(broken)
          : session
            ? session.run(request)
            : Promise.reject(new Error("the ledger writer has no file open"));
      const answered = running.then(
        (value) => reply({ kind: "done", id: request.id, value }),
        (error: unknown) => reply({ kind: "failed", id: request.id, error: describe(error) }),
      );
      answering.add(answered);
      const forget = () => void answering.delete(answered);
      answered.then(forget, forget);
    }
  }
}

/** An error as a message can carry it: its class's name, message and SQLite code. */
function describe(error: unknown): { name: string; message: string; code?: string } {
  if (!(error instanceof Error)) return { name: "Error", message: String(error) };
  const { code } = error as { code?: unknown };
  return { name: error.name, message: error.message, ...(typeof code === "string" ? { code } : {}) };
}
