import type { FuzzStep } from "./cases";

/**
 * The rules every answer is held to, whatever was sent:
 *   - no 5xx, but a 502 that names a backend's own failure (and charges nothing);
 *   - a body, when there is one, is the spec's JSON envelope: `success` a boolean, true for
 *     a 2xx and false otherwise, with `error` a string when false (but a page, or a file's 200);
 *   - on the call endpoints, a 200 says what it charged (more than 0), anything else 0;
 *   - a listing or edit naming an internal backend URL does not succeed, and a call to a
 *     skill at an internal address is never a 200;
 *   - a request the case marks as one to refuse (a bad credential) gets a 4xx;
 *   - no internal detail reaches a client: no SQLite error, stack frame or server path.
 */

/** The 502 codes of a backend's own failure (docs/api.md §5: a skill error, not charged). */
export const BACKEND_FAILURE_CODES = new Set([
  "skill_error",
  "skill_timeout",
  "skill_unreachable",
  "skill_invalid_response",
  "skill_bad_output",
  "skill_backend_forbidden",
]);

/**
 * Routes that need the escrow chain, which the fuzz stack runs without: they answer
 * 503 chain_not_configured by configuration, not by fault. Only that status and code pass there.
 */
const CHAIN_ROUTES = /^\/v1\/(withdrawals|wallet\/|seller\/claim|topups\/card$|calls\/[^/]+\/receipt)/;

/**
 * Dashboard pages and assets (server/http/routes/dashboard.ts): HTML, CSS and JavaScript, not
 * the JSON envelope. A mailed sign-in link opens a page too.
 */
const DASHBOARD = /^\/(|signin|signin\/oauth|auth\/email\/callback|wallet|keys|marketplace(\/[^/]+)?|usage|seller|assets\/app\.(js|css))$/;

/** Files the API answers in their own format (GET /v1/usage.csv: text/csv) when they succeed; their refusals are JSON. */
const FILES = /^\/v1\/usage\.csv$/;

/** What an answer must never contain: SQLite's error codes, a stack frame, the server's own paths. */
const INTERNALS = [/SQLITE_[A-Z]/, /\n\s+at \S+ \(/, /node_modules/, new RegExp(process.cwd().replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))];

export interface Answer {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

/** What a call answer charged, read from its metadata (USD), or undefined if it has none. */
export function pricePaid(json: unknown): number | undefined {
  const metadata = (json as { metadata?: Record<string, unknown> } | null)?.metadata;
  if (!metadata || typeof metadata !== "object") return undefined;
  const paid = metadata.price_paid ?? metadata.cost;
  return typeof paid === "number" ? paid : undefined;
}

export function parseJson(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString("utf8"));
  } catch {
    return undefined;
  }
}

/** The rule an answer breaks, or undefined when it keeps them all. */
export function violation(step: FuzzStep, method: string, path: string, answer: Answer): string | undefined {
  const { status } = answer;
  const json = answer.body.length > 0 ? parseJson(answer.body) : undefined;
  const code = (json as { code?: unknown } | undefined)?.code;
  const pathname = path.split("?")[0];

  if (status >= 500) {
    const chainConfig = status === 503 && code === "chain_not_configured" && CHAIN_ROUTES.test(pathname);
    if (!chainConfig && !(status === 502 && typeof code === "string" && BACKEND_FAILURE_CODES.has(code))) {
      return `answered ${status}${typeof code === "string" ? ` ${code}` : ""}: only a backend's own failure may be a 5xx (502 ${[...BACKEND_FAILURE_CODES].join("|")})`;
    }
  }
  if (status < 100 || status > 599) return `answered an impossible status ${status}`;
  const text = answer.body.toString("latin1");
  const leak = INTERNALS.find((pattern) => pattern.test(text));
  if (leak) return `answered with an internal detail (${leak.source.slice(0, 40)})`;

  const exempt =
    (status >= 300 && status < 400) ||
    ((method === "GET" || method === "HEAD") && (DASHBOARD.test(pathname) || (status === 200 && FILES.test(pathname))));
  if (answer.body.length > 0 && !exempt) {
    if (json === undefined || typeof json !== "object" || json === null || Array.isArray(json))
      return "answered a body that is not a JSON object";
    const envelope = json as { success?: unknown; error?: unknown };
    if (typeof envelope.success !== "boolean") return "answered JSON without a boolean `success`";
    if (envelope.success !== status < 400) return `answered success:${envelope.success} with status ${status}`;
    if (envelope.success === false && typeof envelope.error !== "string") return "answered an error without an `error` string";
  }

  if (step.role === "call" || step.role === "hostile_call") {
    const paid = pricePaid(json);
    if (status === 200 && !(typeof paid === "number" && paid > 0))
      return `a 200 from a call endpoint charged ${paid}: every fuzz skill has a price`;
    if (status !== 200 && paid !== undefined && paid !== 0) return `a ${status} from a call endpoint says it charged ${paid}`;
  }
  if (step.mustRefuse && !(status >= 400 && status < 500)) return `answered ${status} to a request that must be refused with a 4xx`;
  if (step.role === "hostile_listing" && status >= 200 && status < 300)
    return `a listing naming an internal backend URL was accepted (${status})`;
  if (step.role === "hostile_call" && status === 200)
    return "a call to a skill at an internal address succeeded: the gateway reached an internal service";
  return undefined;
}
