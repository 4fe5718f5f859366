/**
 * What a listing asks of its backend before it goes live: one signed test call (made by the call path's forwarder,
 * ../gateway/backend-check.ts, under the egress policy), and what came back.
 */

export interface BackendCheck {
  /** Whether something answered: false only when no HTTP answer came back (the listing is then refused). */
  reachable: boolean;
  /** Whether the answer was a 2xx with JSON, as a call needs. */
  ok: boolean;
  /** The HTTP status it answered, or null when none. */
  status: number | null;
  latencyMs: number;
  /** The start of the answer's JSON, or of what went wrong. */
  snippet: string;
  /** In plain words, for the seller. */
  message: string;
}

/** What the test call needs of the skill: where it goes, the secret it is signed with, and how long it may take. */
export interface BackendCheckTarget {
  backendUrl: string;
  signingSecret: string;
  timeoutMs: number;
}

export type CheckBackend = (target: BackendCheckTarget) => Promise<BackendCheck>;
