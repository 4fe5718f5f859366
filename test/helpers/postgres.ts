import {
  type PostgresServer,
  type StartPostgresOptions,
  postgresUnavailableReason,
  startPostgres,
} from "../../server/devstack/postgres-server";

export * from "../../server/devstack/postgres-server";

/**
 * Starts a server for a mocha hook or test, or skips it (this.skip(), with the reason printed)
 * when the PostgreSQL binaries are absent. Any other failure throws: a test never passes by
 * silently not running.
 */
export async function startPostgresOrSkip(ctx: Mocha.Context, options: StartPostgresOptions = {}): Promise<PostgresServer> {
  const reason = postgresUnavailableReason();
  if (reason !== null) {
    console.warn(`      skipped: ${reason}`);
    ctx.skip();
  }
  return startPostgres(options);
}
