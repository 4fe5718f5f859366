/**
 * What the generator produces and the harness runs: a case is one to a few HTTP exchanges
 * (a seller's listing, then a call to it, then its removal), each sent by fetch or, for what
 * fetch cannot send, byte by byte over a socket.
 */

export const CATEGORIES = [
  "call_json",
  "call_bytes",
  "call_auth",
  "raw_http",
  "reads",
  "auth_routes",
  "seller_schema",
  "seller_url",
  "hostile_backend",
  "other_routes",
] as const;
export type Category = (typeof CATEGORIES)[number];

/** What a step is, for the checks that depend on it. */
export type StepRole =
  /** A call endpoint (POST /v1/call, /v1/skills/:id/call, or the try form): may charge, only with a 200. */
  | "call"
  /** A seller listing or edit naming a backend URL the egress policy refuses: must not succeed. */
  | "hostile_listing"
  /** A call to a skill whose backend URL is refused by the egress policy: must never be a 200. */
  | "hostile_call"
  /** Anything else. */
  | "other";

/** A request for fetch: method, path and query, headers, body. */
export interface FetchRequest {
  transport: "fetch";
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: Buffer;
}

/** One piece of what is written to the socket, after a pause (a slow client). */
export interface RawSegment {
  bytes: Buffer;
  delayMs: number;
}

/** Bytes for a socket: written in segments, then either answered or cut off by the client. */
export interface RawRequest {
  transport: "raw";
  segments: RawSegment[];
  /** The client hangs up after writing (an aborted body): no answer is awaited. */
  abort: boolean;
  /** Request methods in order (several when pipelined), to read each answer right (HEAD has no body). */
  methods: string[];
  /** Paths in order, for the checks and the failure report. */
  paths: string[];
}

export interface FuzzStep {
  request: FetchRequest | RawRequest;
  role: StepRole;
  /** Sent only if this earlier step answered 2xx (a call to a skill that was listed). */
  requires?: number;
  /**
   * The exchange may end without an answer: the gateway rightly closes the connection
   * (a body over the limit, a malformed message) and the client may see a reset first.
   */
  mayReset?: boolean;
  /** The request must be refused: a 4xx (a bad credential, say), never a success. */
  mustRefuse?: boolean;
}

export interface FuzzCase {
  index: number;
  category: Category;
  /** A few words saying what the case tries, for the figures and a failure report. */
  label: string;
  steps: FuzzStep[];
  /** The steps are sent all at once (races), not one after another; none then `requires` another. */
  parallel?: boolean;
}

/** What the generator needs to know about the stack it aims at: keys, skills, a session, ports. */
export interface Target {
  keys: { rich: string; poor: string; limited: string; revoked: string };
  /** Skills on the fuzz backend and the test backend, by slug, with their UUIDs. */
  skills: { slug: string; id: string }[];
  /** Slugs of the skills with input schemas, and of the one whose pattern backtracks. */
  schemaSkills: string[];
  redosSkill: string;
  /** Skills whose backend URL points at an internal address (written before any egress check). */
  hostileSkills: string[];
  /** A signed-in seller: its session cookie, CSRF token, and the id of one of its API keys (the try form). */
  session: { cookie: string; csrf: string; keyId: string };
  /** Loopback ports nothing may reach through the gateway: the canary, and the gateway itself. */
  internalPorts: number[];
  /** The canary's IPv6 loopback port, when this machine has ::1. */
  canaryV6Port?: number;
  /** The gateway's own origin: what the dashboard's pages send as Origin on a sign-in POST. */
  origin: string;
  /** The fuzz backend's base URL (an allowed backend). */
  backendUrl: string;
}
