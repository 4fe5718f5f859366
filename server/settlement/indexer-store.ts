import { type Database, type Sql, within } from "../db/sql";

/** How far an indexer has read: the last block it finished and that block's hash (lowercase). */
export interface IndexerProgress {
  lastBlock: bigint;
  lastBlockHash: string;
}

type ProgressRow = { last_block: bigint; last_block_hash: string };

/**
 * The `indexer_state` table (./indexer.ts): one row per indexer, saved in the same transaction as the chunk
 * of logs it finishes, so progress and credits commit together.
 *
 * The row is also the lock that orders the writers of the chain-to-account join: an indexer's chunk takes
 * its own row (lockProgress) and linking an address takes every row (lockAll) before reading who owns an
 * address, so on PostgreSQL a deposit is never recorded as waiting for an address that a concurrent link
 * is making someone's (see ./addresses.ts).
 */
export class IndexerStore {
  constructor(private readonly db: Database) {}

  /** The indexer's progress, or undefined before its first chunk. */
  async progress(name: string, sql: Sql = this.db): Promise<IndexerProgress | undefined> {
    return toProgress(await sql.one<ProgressRow>("SELECT last_block, last_block_hash FROM indexer_state WHERE name = ?", [name]));
  }

  /**
   * The indexer's progress, its row locked until `tx` ends (PostgreSQL): a second indexer's chunk waits
   * here, then reads the progress the first one committed.
   */
  async lockProgress(name: string, tx: Sql): Promise<IndexerProgress | undefined> {
    return toProgress(
      await tx.one<ProgressRow>(`SELECT last_block, last_block_hash FROM indexer_state WHERE name = ?${tx.dialect.forUpdate}`, [name]),
    );
  }

  /** Locks every indexer's row until `tx` ends (PostgreSQL): no chunk commits meanwhile. */
  async lockAll(tx: Sql): Promise<void> {
    await tx.all(`SELECT name FROM indexer_state ORDER BY name${tx.dialect.forUpdate}`);
  }

  /**
   * Moves the indexer from `from` (undefined: it has no row yet) to `to`, only if its row still says `from`;
   * returns false, changing nothing, when another indexer of the same name got there first.
   */
  async advance(name: string, from: IndexerProgress | undefined, to: IndexerProgress, atMs: number, tx: Sql): Promise<boolean> {
    if (from === undefined) {
      const inserted = await tx.run(
        `INSERT INTO indexer_state (name, last_block, last_block_hash, updated_at) VALUES (?, ?, ?, ?)
         ON CONFLICT (name) DO NOTHING`,
        [name, to.lastBlock, to.lastBlockHash, atMs],
      );
      return inserted === 1;
    }
    const changed = await tx.run(
      `UPDATE indexer_state SET last_block = ?, last_block_hash = ?, updated_at = ?
       WHERE name = ? AND last_block = ? AND last_block_hash = ?`,
      [to.lastBlock, to.lastBlockHash, atMs, name, from.lastBlock, from.lastBlockHash],
    );
    return changed === 1;
  }

  /** Sets the indexer's progress, whatever it was. */
  async saveProgress(name: string, progress: IndexerProgress, atMs: number, tx?: Sql): Promise<void> {
    await within(this.db, tx, (tx) =>
      tx.run(
        `INSERT INTO indexer_state (name, last_block, last_block_hash, updated_at) VALUES (?, ?, ?, ?)
         ON CONFLICT (name) DO UPDATE SET last_block = excluded.last_block, last_block_hash = excluded.last_block_hash,
                                          updated_at = excluded.updated_at`,
        [name, progress.lastBlock, progress.lastBlockHash, atMs],
      ),
    );
  }
}

function toProgress(row: ProgressRow | undefined): IndexerProgress | undefined {
  return row && { lastBlock: row.last_block, lastBlockHash: row.last_block_hash };
}
