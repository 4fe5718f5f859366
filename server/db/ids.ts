import { randomUUID } from "node:crypto";

/**
 * The shape of a UUID in its text form, any version (the gateway's ids: keys, skills, calls), in either case: a
 * reference to one is checked against it before any lookup.
 */
export const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * A UUID version 7 (RFC 9562): 48 bits of Unix milliseconds, then random bits. Ids made
 * later sort later, so rows keyed by them (holds, calls) are appended at the end of their
 * B-tree instead of landing at random pages, and an id tells roughly when it was made.
 * The random bits come from randomUUID(), which draws from a buffered entropy pool: a
 * fresh randomBytes() per id costs a syscall on the call path.
 */
export function uuidv7(nowMs = Date.now()): string {
  const ts = nowMs.toString(16).padStart(12, "0");
  const random = randomUUID(); // xxxxxxxx-xxxx-4xxx-Vxxx-xxxxxxxxxxxx, variant V already set
  return `${ts.slice(0, 8)}-${ts.slice(8, 12)}-7${random.slice(15, 18)}-${random.slice(19)}`;
}
