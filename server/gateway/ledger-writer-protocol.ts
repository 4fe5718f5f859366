import type { CommitStats } from "../db/group-commit";
import type { Charge } from "../ledger/fees";
import type { HoldInput } from "../ledger/ledger";
import type { CallWrite } from "./call-write";

/**
 * What opens a gateway's file on the SQLite ledger writer's thread (./ledger-writer.ts): the file and the write lock's
 * memory. A thread serves one file at a time, from its `open` to its `close`; a thread closed cleanly may be opened
 * again, for the next gateway of its process.
 */
export interface WriterStart {
  op: "open";
  file: string;
  lock: SharedArrayBuffer;
}

/** What the event loop asks of the writer thread: a HoldBook's operations (./ledger-payment.ts), as data. */
export type WriterRequest = { id: number } & (
  | { op: "hold"; input: HoldInput }
  | { op: "settle"; holdId: string; key: { apiKeyId: string; nowMs: number }; write: CallWrite; captured?: Charge }
  | { op: "void"; holdId: string; write: CallWrite }
  | { op: "release"; holdId: string }
  /** Answered once everything before it is committed (a read on the event loop's connection then sees it). */
  | { op: "caught_up" }
);

/** An error as it crosses threads. */
export interface WriterError {
  name: string;
  message: string;
  code?: string;
}

/**
 * Everything the event loop sends the writer thread; each message is a list of them, in order (the operations asked
 * for in one turn of the event loop travel together: one message, one wake-up of the thread).
 */
export type WriterMessage = WriterStart | WriterRequest | { op: "close" };

/**
 * What the writer thread answers: ready (the file is open), an operation's result or failure, a commit (for the
 * metrics), closed (everything committed, the file's connection closed: the thread may be opened again), or a failure
 * that ends it (a commit that failed). Each message is a list of them, in order: what the thread decided since its
 * last message (./ledger-writer-thread.ts sends them at the end of its loop's turn, or before it blocks).
 */
export type WriterReply =
  | { kind: "ready" }
  | { kind: "closed" }
  | { kind: "commit"; stats: CommitStats }
  | { kind: "done"; id: number; value: unknown }
  | { kind: "failed"; id: number; error: WriterError }
  | { kind: "fatal"; error: WriterError };
