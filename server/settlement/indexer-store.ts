import type { Db } from "../db/db";

/** How far an indexer has read: the last block it finished and that block's hash (lowercase). */
export interface IndexerProgress {
  lastBlock: bigint;
  lastBlockHash: string;
}

/**
 * The `indexer_state` table (./indexer.ts): one row per indexer, saved in the same ledger operation as the
 * chunk of logs it finishes, so progress and credits commit together.
 */
export interface IndexerStore {
  progress(name: string): IndexerProgress | undefined;
  saveProgress(name: string, progress: IndexerProgress, atMs: number): void;
}

/** IndexerStore on the gateway's SQLite database. */
export class SqliteIndexerStore implements IndexerStore {
  private readonly stmt;

  constructor(db: Db) {
    this.stmt = {
      progress: db.prepare("SELECT last_block, last_block_hash FROM indexer_state WHERE name = ?"),
      save: db.prepare(
        `INSERT INTO indexer_state (name, last_block, last_block_hash, updated_at) VALUES (?, ?, ?, ?)
         ON CONFLICT (name) DO UPDATE SET last_block = excluded.last_block, last_block_hash = excluded.last_block_hash,
                                          updated_at = excluded.updated_at`,
      ),
    };
  }

  progress(name: string): IndexerProgress | undefined {
    const row = this.stmt.progress.get(name) as { last_block: bigint; last_block_hash: string } | undefined;
    return row && { lastBlock: row.last_block, lastBlockHash: row.last_block_hash };
  }

  saveProgress(name: string, progress: IndexerProgress, atMs: number): void {
    this.stmt.save.run(name, progress.lastBlock, progress.lastBlockHash, atMs);
  }
}
