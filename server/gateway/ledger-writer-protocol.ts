import type { CommitStats } from "../db/group-commit";
import type { Charge } from "../ledger/fees";
import type { HoldInput } from "../ledger/ledger";
import type { CallWrite } from "./call-write";

/** What starts the SQLite ledger writer's thread (./ledger-writer.ts): the gateway's file and the write lock's memory. */
export interface WriterStart {
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
 * What the writer thread answers: ready, an operation's result or failure, a commit (for the metrics), or a failure
 * that ends it (a commit that failed).
 */
export type WriterReply =
  | { kind: "ready" }
  | { kind: "commit"; stats: CommitStats }
  | { kind: "done"; id: number; value: unknown }
  | { kind: "failed"; id: number; error: WriterError }
  | { kind: "fatal"; error: WriterError };
