import fs from "node:fs";

/**
 * Makes what SQLite has written to its write-ahead log so far durable. The group commit (./group-commit.ts) asks it
 * after each COMMIT, and answers the batch's waiters only when it resolves.
 */
export interface WalSync {
  /** Resolves once every byte written to the `-wal` file before the call is on disk; rejects when the disk says no. */
  sync(): Promise<void>;
  /** Lets go of the file (after the connection's last commit is synced). */
  close(): void;
}

/**
 * The `-wal` file's fsync on libuv's thread pool, so that the event loop goes on routing calls while the disk
 * works. Paired with `synchronous=NORMAL` on the connection (the group commit sets it): SQLite then writes a
 * commit's frames with write(2) and returns at once, and this fsync of the same file, begun after COMMIT returned,
 * puts those frames, and every frame written before them, on disk. A transaction whose commit frame is on disk
 * survives a power cut: recovery replays the log up to the last valid commit frame.
 *
 * The file is opened once and kept. SQLite never replaces or deletes the log while this process's connection is
 * open (only the last connection to close deletes it, and a checkpoint's reset rewrites the same file from its
 * start, after syncing the database file), but should it happen all the same (an operator's hand, a tool that
 * switched the journal mode), the kept descriptor would name a file nobody reads: so each sync checks the file
 * still has a name (its link count), and if not, opens and syncs the file now at the path before answering.
 */
export class WalFileSync implements WalSync {
  private fd: number | undefined;

  constructor(readonly walPath: string) {}

  async sync(): Promise<void> {
    const fd = this.fd ?? (this.fd = await open(this.walPath));
    await fsync(fd);
    // The link count, read synchronously: fstat of an open descriptor answers from the inode in memory (about a
    // microsecond), where sending it to the thread pool beside the fsync cost the event loop 5.8% of npm start's
    // time (a second worker woken for each batch, on two cores: docs/benchmarks.md).
    if (fs.fstatSync(fd).nlink > 0) return;
    // The kept file was unlinked: the frames SQLite wrote went to whatever is at the path now.
    this.fd = undefined;
    await new Promise<void>((resolve) => fs.close(fd, () => resolve()));
    await this.sync();
  }

  close(): void {
    if (this.fd === undefined) return;
    const fd = this.fd;
    this.fd = undefined;
    fs.closeSync(fd);
  }
}

const open = (file: string) =>
  new Promise<number>((resolve, reject) => fs.open(file, "r", (error, fd) => (error ? reject(error) : resolve(fd))));
const fsync = (fd: number) => new Promise<void>((resolve, reject) => fs.fsync(fd, (error) => (error ? reject(error) : resolve())));
