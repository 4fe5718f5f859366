import crypto from "node:crypto";

/**
 * The 64-bit key of a PostgreSQL advisory lock named `name`: the first 8 bytes of its SHA-256, as a
 * signed BIGINT. Advisory locks are keyed by numbers; naming them keeps two uses (the migration lock, a
 * leader lease) from colliding by accident, and the same name gives the same key on every replica.
 */
export function advisoryLockKey(name: string): bigint {
  return crypto.createHash("sha256").update(name).digest().readBigInt64BE(0);
}
