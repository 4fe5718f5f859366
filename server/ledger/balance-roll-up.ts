import { type Database, isDatabaseUnavailable } from "../db/sql";

/** How often a replica folds the pending balance deltas into their rows. */
export const ROLL_UP_INTERVAL_MS = 200;
/** The most deltas one roll-up folds (one short transaction); a full batch is followed by the next at once. */
export const ROLL_UP_BATCH = 5_000;

/**
 * Folds the ledger's pending balance deltas into their balance rows (PostgreSQL: migration 0016's ledger_roll_up). A
 * capture's postings out of `held` and into `earned` and `fees` move no row when they are written, so that a capture
 * holds no row another call moves until its group commits; reads add what is pending (Dialect.balances), so nothing a
 * client sees depends on when this runs. It only keeps the pending deltas few, so that a balance read sums a few rows
 * rather than every capture since the start. Every replica runs one; the function lets one fold at a time (the others
 * answer 0 at once), in a transaction that does not wait for the WAL flush. Nothing to do on SQLite.
 */
export class BalanceRollUp {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;

  constructor(
    private readonly db: Database,
    private readonly options: {
      intervalMs?: number;
      /** Told about a roll-up that failed otherwise than by the database not answering (which the next one retries). */
      log?: (message: string, error?: unknown) => void;
    } = {},
  ) {}

  /**
   * Folds up to `limit` pending balance deltas now, and up to `limit` calls pending in their usage days (migration 0019's
   * usage_roll_up: the same reasoning, for GET /v1/usage's days); returns the larger count folded (0 on SQLite, or while
   * another replica folds).
   */
  async once(limit = ROLL_UP_BATCH): Promise<number> {
    if (this.db.engine !== "postgres") return 0;
    // Each its own transaction: one that fails does not keep the other from folding.
    const folds = await Promise.allSettled(
      ["SELECT ledger_roll_up(?, 1)", "SELECT usage_roll_up(?, 1)"].map(async (sql) =>
        Number((await this.db.value<bigint>(sql, [limit])) ?? 0n),
      ),
    );
    const failed = folds.find((fold) => fold.status === "rejected");
    if (failed) throw failed.reason;
    return Math.max(...folds.map((fold) => (fold.status === "fulfilled" ? fold.value : 0)));
  }

  /** Folds every `intervalMs` until stop(); a full batch is followed by the next at once. */
  start(): void {
    if (this.db.engine !== "postgres" || this.timer !== undefined || this.stopped) return;
    const tick = () => {
      this.running = (async () => {
        try {
          while (!this.stopped && (await this.once()) === ROLL_UP_BATCH);
        } catch (error) {
          if (!isDatabaseUnavailable(error)) this.options.log?.("the roll-up of pending balance deltas and usage failed", error);
        }
      })().finally(() => {
        this.running = undefined;
        if (!this.stopped) this.timer = setTimeout(tick, this.options.intervalMs ?? ROLL_UP_INTERVAL_MS).unref();
      });
    };
    this.timer = setTimeout(tick, this.options.intervalMs ?? ROLL_UP_INTERVAL_MS).unref();
  }

  /** Stops folding, after the roll-up running now (if any) ends. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }
}
