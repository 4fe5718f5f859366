import { isAddress, isHex, zeroAddress } from "viem";
import { z } from "zod";
import type { ZodOpenApiOverrideContext } from "zod-openapi";
import { usdToMicros } from "../../ledger/money";
import type { ErrorCode } from "../../errors";
import { type TextRule, checkText } from "../../text";
import { UUID_PATTERN } from "../../db/ids";
import { isSkillRef } from "../../catalog/skills";
import type { KeyScope } from "../../identity/scopes";
import { ApiError } from "../errors";

/**
 * What every route's declaration is made of: the request's parts (checked by `parseRequest`
 * at the top of each handler) and the responses (the data envelope around each success's
 * shape, and the error envelope). ./document.ts turns the same declarations into the OpenAPI
 * document served at GET /openapi.json; test/http/contract.test.ts checks every route's real
 * answers against it.
 */

/** Who may call an operation: nobody in particular, an `atom_` key, a dashboard session, either, or the card provider. */
export type Auth = "none" | "api_key" | "session" | "account" | "provider";

export type Method = "get" | "post" | "put" | "patch" | "delete";

/** One response an operation may give besides its errors. */
export interface SuccessResponse {
  status: number;
  description: string;
  /** The JSON body; absent for a redirect. */
  schema?: z.ZodType;
  /** Default application/json. */
  contentType?: string;
  /** Response headers worth naming (Location of a redirect), by their description; `optional` for one not always sent. */
  headers?: Record<string, string | { description: string; optional: true }>;
}

/** The fields every operation declares, whoever may call it. */
interface OperationBase {
  method: Method;
  /** In the document's form: /v1/skills/{skillId}. */
  path: string;
  summary: string;
  description?: string;
  tag: string;
  params?: z.ZodObject;
  query?: z.ZodObject;
  /** Request headers the operation reads beyond Authorization (X-Max-Price), by their lowercase names. */
  headers?: z.ZodObject;
  body?: z.ZodType;
  /** Default application/json. */
  bodyContentType?: string;
  /** The body may be left out (it then reads as `{}`). */
  bodyOptional?: boolean;
  responses: SuccessResponse[];
  /**
   * The error codes this route can answer besides those every route of its kind can
   * (see `commonErrors`): each becomes a response with the status ERROR_STATUS gives it.
   */
  errors: ErrorCode[];
  /**
   * Fields some error bodies of this route carry beside the envelope (a failed call's metadata,
   * a withdrawal's voucher, readiness checks): declared optional on all its error responses.
   */
  errorFields?: Record<string, z.ZodType>;
}

/**
 * What an operation an API key may call needs of the key: the scope (server/identity/scopes.ts), which the key-auth
 * middleware (server/http/auth.ts) enforces from this declaration, 403 scope_missing naming it; or `self`: any valid
 * key, about itself alone (GET /v1/key reads the calling key's own record and budget, and nothing else). An operation
 * that takes a key cannot be declared without one of the two (the type requires it), nor served without its
 * declaration (the middleware is made from the declaration, and refuses to be made for a route with none).
 */
export type KeyAccess =
  | {
      auth: "api_key" | "account";
      scope: KeyScope;
      /**
       * A key without `scope` but with `calls` is let through too, for its own calls alone: the middleware sets
       * `req.ownCallsOf` to the key's id, and the route answers only that key's calls (GET /v1/usage and the like).
       */
      ownCalls?: true;
    }
  | {
      /** Only a key has a self: a dashboard session is no key. */
      auth: "api_key";
      /** Any valid key (unexpired, whatever its scopes), for what is about the key itself. */
      scope: typeof SELF;
      ownCalls?: undefined;
    };

/** The `scope` of an operation any valid key may call about itself. */
export const SELF = "self";

/** One route of the API, as the document describes it and the handlers validate it. */
export type Operation = OperationBase &
  (KeyAccess | { auth: Exclude<Auth, "api_key" | "account">; scope?: undefined; ownCalls?: undefined });

/** Whether an operation takes an API key (and so declares the scope it needs). */
export const takesApiKey = (op: Operation): op is OperationBase & KeyAccess => op.auth === "api_key" || op.auth === "account";

/** Declares an operation (an identity, so that each contract file reads as a list). */
export const operation = (op: Operation): Operation => op;

/** The codes any route of a kind can answer: rate limits and internal errors everywhere, then by credentials and body. */
export function commonErrors(op: Pick<Operation, "auth" | "scope" | "body" | "method" | "bodyContentType">): ErrorCode[] {
  const codes: ErrorCode[] = ["rate_limited", "internal_error"];
  if (op.auth === "api_key" || op.auth === "session" || op.auth === "account") codes.push("unauthorized");
  if (op.auth === "api_key" || op.auth === "account") codes.push("key_expired");
  // A key is never refused what is about itself: only an operation that names a scope can answer scope_missing.
  if ((op.auth === "api_key" || op.auth === "account") && op.scope !== SELF) codes.push("scope_missing");
  if ((op.auth === "session" || op.auth === "account") && op.method !== "get") codes.push("csrf_failed");
  if (op.body) {
    codes.push("invalid_request", "payload_too_large");
    if ((op.bodyContentType ?? "application/json") === "application/json") codes.push("invalid_json");
  }
  return codes;
}

// ---------- envelopes ----------

/** The spec's success envelope of a read or action endpoint: `{ success: true, data }`. */
export const dataEnvelope = <T extends z.ZodType>(data: T) => z.strictObject({ success: z.literal(true), data });

/**
 * The spec's error envelope, `{ success: false, error }`, with the machine-readable `code` and the request's id beside
 * it: one schema of the document (`Error`), which every error answer refers to. Open to more fields: some errors carry
 * details (a call's metadata, a voucher).
 */
export const errorBase = z
  .looseObject({
    success: z.literal(false),
    error: z.string().meta({ description: "A message for a person, saying what went wrong and what to do." }),
    code: z.string().meta({ description: "What went wrong, as one of the codes of docs/errors.md; each answer lists its own." }),
    request_id: z.string().meta({
      description: "The request's id, as in its X-Request-Id header and every log line about it (a replay carries the first request's).",
    }),
  })
  .meta({ id: "Error" });

/** An error answer of one status: the shared envelope, its codes, and the fields its route adds. */
export const errorEnvelope = (codes: readonly ErrorCode[], fields: Record<string, z.ZodType> = {}) =>
  z.intersection(
    errorBase,
    z.looseObject({
      code: z.enum(codes as [ErrorCode, ...ErrorCode[]]),
      ...Object.fromEntries(Object.entries(fields).map(([name, schema]) => [name, schema.optional()])),
    }),
  );

// ---------- fields many routes share ----------

export const isoDate = z.string().meta({ format: "date-time", description: "An ISO 8601 time, UTC." });
/** A USD amount as a JSON number with at most 6 decimals (the base units are exact beside it where money moves). */
export const usdNumber = z.number().meta({ description: "USD, at most 6 decimals." });
export const baseUnits = z
  .string()
  .regex(/^-?\d+$/)
  .meta({ description: "USDC base units (6 decimals), as a decimal string." });
export const hexAddress = z
  .string()
  .regex(/^0x[0-9a-fA-F]{40}$/)
  .meta({ description: "A 20-byte address, 0x-prefixed." });
export const hex32 = z
  .string()
  .regex(/^0x[0-9a-fA-F]{64}$/)
  .meta({ description: "32 bytes, 0x-prefixed hex." });
export const hexData = z
  .string()
  .regex(/^0x([0-9a-fA-F]{2})*$/)
  .meta({ description: "Bytes, 0x-prefixed hex." });
export const decimalString = z.string().regex(/^\d+$/).meta({ description: "An unsigned integer, as a decimal string." });

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * A JSON object taken as it is: the same object comes out, never a copy (a copy made key by
 * key would turn a `__proto__` key into a prototype). For a skill's input and an input schema,
 * whose contents other checks own (catalog/ checks them against and as JSON Schema).
 */
export const jsonObject = (message: string) =>
  z.custom<Record<string, unknown>>(isPlainObject, { error: message }).meta({ override: { type: "object", additionalProperties: true } });

/**
 * Text that people type and others read, under the one text policy (server/text.ts): normalized (NFC, trimmed), or
 * refused with the policy's message while the request is parsed, before anything is done with it.
 */
export const policyText = (rule: TextRule, typeMessage: string | ((issue: { input?: unknown }) => string)) =>
  z
    .string({ error: typeMessage })
    .transform((raw, ctx) => {
      const checked = checkText(raw, rule);
      if (checked.ok) return checked.text;
      ctx.addIssue({ code: "custom", message: checked.message });
      return z.NEVER;
    })
    .meta({
      override: replaceWith({
        type: "string",
        ...(rule.minChars > 0 ? { minLength: rule.minChars } : {}),
        maxLength: rule.maxChars,
        description: `${rule.minChars > 0 ? `${rule.minChars} to ` : "At most "}${rule.maxChars} characters once trimmed; no control or invisible characters${rule.kind === "prose" ? " (line breaks allowed)" : ""}.`,
      }),
    });

/**
 * Ids, checked against their shape while the request is parsed, before any lookup: a malformed one names nothing on
 * either database engine (PostgreSQL refuses some bytes, such as NUL, that SQLite would just not find).
 */
export { UUID_PATTERN };

/** A UUID: the gateway's own ids (keys, skills, calls). */
export const uuidId = (message: string, absent: string = message) =>
  z
    .string({ error: (issue) => (issue.input === undefined ? absent : message) })
    .regex(UUID_PATTERN, { error: message })
    .meta({ override: replaceWith({ type: "string", format: "uuid" }) });
/** A skill's slug or UUID. */
export const skillRef = (message: string) =>
  z
    .string({ error: message })
    .refine(isSkillRef, { error: message })
    .meta({ override: replaceWith({ type: "string", description: "A skill's slug or UUID." }) });
/** An id another system made (a card provider's checkout): 1 to 255 letters, digits and _ - . : only. */
export const opaqueId = (message: string) => z.string({ error: message }).regex(/^[A-Za-z0-9_.:-]{1,255}$/, { error: message });

/** An optional USD amount ("1.50" or 1.5, at most 6 decimals) in base units; null and absent are both absent. */
export const usdAmount = (name: string) =>
  z
    .union([z.string(), z.number()], { error: `${name} must be a USD amount with at most 6 decimals, e.g. "1.50".` })
    .transform((value, ctx) => {
      try {
        return usdToMicros(String(value));
      } catch {
        ctx.addIssue({ code: "custom", message: `${name} must be a USD amount with at most 6 decimals, e.g. "1.50".` });
        return z.NEVER;
      }
    })
    .meta({
      description: 'USD, as a string ("1.50") or a number, at most 6 decimals.',
      override: replaceWith({ type: ["string", "number"] }),
    });

/** An address, EIP-55 checksummed or all lowercase, never the zero address. */
export const recipientAddress = (name: string) =>
  z
    .string({ error: `${name} must be a 0x-prefixed 20-byte address, EIP-55 checksummed or all lowercase.` })
    .refine((value) => isAddress(value, { strict: true }), {
      error: `${name} must be a 0x-prefixed 20-byte address, EIP-55 checksummed or all lowercase.`,
    })
    .refine((value) => value.toLowerCase() !== zeroAddress, { error: `${name} must not be the zero address.` })
    .meta({ description: "A 20-byte address, EIP-55 checksummed or all lowercase; never the zero address." });

/** A hex string of exactly `bytes` bytes. */
export const hexOfBytes = (bytes: number, message: string) =>
  z
    .string({ error: message })
    .refine((value) => isHex(value, { strict: true }) && value.length === 2 + 2 * bytes, { error: message })
    .meta({ description: `${bytes} bytes, 0x-prefixed hex.` });

/** An integer query parameter within [min, max], `fallback` when absent. */
export const intQuery = (name: string, fallback: number, min: number, max: number) => {
  const message = `${name} must be an integer from ${min} to ${max}.`;
  return z
    .string({ error: message })
    .regex(/^\d+$/, { error: message })
    .transform(Number)
    .refine((n) => n >= min && n <= max, { error: message })
    .optional()
    .transform((n) => n ?? fallback)
    .meta({ override: replaceWith({ type: "integer", minimum: min, maximum: max, default: fallback }) });
};

const DAY_MS = 86_400_000;
const isoDay = z.iso.date();
const isoTime = z.iso.datetime({ offset: true });

/**
 * A query parameter that bounds a time range, parsed to epoch ms: a date (a UTC day) or, unless `daysOnly`, an
 * ISO 8601 time with its offset; nothing before 1970. Both bounds of a range are inclusive, so the range's `end`
 * is parsed to the first millisecond after it (a day's end is the next day's 00:00 UTC): the range is [start, end).
 */
export const timeQuery = (name: string, edge: "start" | "end", options: { daysOnly?: boolean } = {}) => {
  const message = options.daysOnly
    ? `${name} must be a date from 1970 on, such as 2026-11-21 (a UTC day).`
    : `${name} must be a date (2026-11-21, a UTC day) or an ISO 8601 time with its offset (2026-11-21T09:30:00Z), from 1970 on.`;
  return z
    .string({ error: message })
    .transform((text, ctx) => {
      const isDay = isoDay.safeParse(text).success;
      const ms = isDay ? Date.parse(`${text}T00:00:00Z`) : !options.daysOnly && isoTime.safeParse(text).success ? Date.parse(text) : NaN;
      if (Number.isFinite(ms) && ms >= 0) return edge === "start" ? ms : ms + (isDay ? DAY_MS : 1);
      ctx.addIssue({ code: "custom", message });
      return z.NEVER;
    })
    .optional()
    .meta({
      override: replaceWith(
        options.daysOnly ? { type: "string", format: "date" } : { type: "string", examples: ["2026-11-21", "2026-11-21T09:30:00Z"] },
      ),
    });
};

/** An override that renders a schema as exactly `schema` (for a field read from text but meant as another type). */
export function replaceWith(schema: Record<string, unknown>) {
  return ({ jsonSchema }: Pick<ZodOpenApiOverrideContext, "jsonSchema">) => {
    const description = jsonSchema.description;
    for (const key of Object.keys(jsonSchema)) delete (jsonSchema as Record<string, unknown>)[key];
    Object.assign(jsonSchema, schema, description === undefined ? {} : { description });
  };
}

// ---------- validation ----------

/**
 * Parses a request part (body, query, params) with its declared schema, or throws the 400 the
 * route answers: the first problem found, naming its field, as `codes` says (one code for every
 * field, or a code per top-level field; invalid_request otherwise, and always for a body that is
 * not an object at all).
 */
export function parseRequest<T extends z.ZodType>(
  schema: T,
  value: unknown,
  codes: ErrorCode | Partial<Record<string, ErrorCode>> = "invalid_request",
): z.output<T> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const field = issue.path[0];
  // A body that is not an object at all is malformed whatever the route calls a bad field.
  const code = field === undefined ? "invalid_request" : typeof codes === "string" ? codes : (codes[String(field)] ?? "invalid_request");
  throw new ApiError(code, describeIssue(issue));
}

/**
 * Parses a request's path parameters with their declared schema, or throws 404 with `notFound`: an id of the wrong
 * shape names nothing, and is answered as an unknown one is.
 */
export function parseParams<T extends z.ZodType>(schema: T, params: unknown, notFound: string): z.output<T> {
  const result = schema.safeParse(params);
  if (result.success) return result.data;
  throw new ApiError("not_found", notFound);
}

/** One problem as a sentence naming its field: the declared message, or zod's after the field's path. */
function describeIssue(issue: z.core.$ZodIssue): string {
  const where = issue.path.map(String).join(".");
  if (where === "" || issue.message.startsWith(where)) return issue.message;
  return `${where}: ${issue.message}`;
}
