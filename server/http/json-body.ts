import express, { type RequestHandler } from "express";
import { ApiError } from "./errors";
import { type JsonTextProblem, scanJsonText } from "./json-text";

/**
 * The deepest nesting of objects and arrays a request body may have. Real inputs nest a few
 * levels; thousands of levels only serve to overflow a recursive walk (validation, the
 * JSON.stringify that forwards the input), so they are refused before anything else runs.
 */
export const MAX_JSON_DEPTH = 64;

// Fatal: a byte sequence that is not UTF-8 throws instead of becoming U+FFFD, which would put a
// character the client never sent into the input the skill receives. The BOM is kept, as
// Buffer#toString kept it, so the call path's answer to a body starting with one is unchanged.
const UTF8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/**
 * The text of a JSON request body, or the 400 invalid_json that says why the gateway will not
 * take it as sent. The checks run in this order, and the first that fails answers: the bytes
 * are UTF-8, the nesting is at most MAX_JSON_DEPTH, the text is JSON, and JSON.parse keeps the
 * value of every number in it (./json-text.ts says which numbers it would change, and why they
 * are refused rather than forwarded as their text). It does not parse the body unless a number is refused, so a
 * malformed body is refused as malformed rather than for one of its numbers.
 */
export function jsonBodyText(bytes: Uint8Array): string {
  let text: string;
  try {
    text = UTF8.decode(bytes);
  } catch {
    throw new ApiError("invalid_json", "Request body is not valid UTF-8: send JSON text encoded as UTF-8.");
  }
  const problem = scanJsonText(bytes, MAX_JSON_DEPTH);
  if (problem?.kind === "too_deep") throw tooDeep();
  if (problem) {
    try {
      JSON.parse(text);
    } catch {
      throw notJson();
    }
    throw inexactNumber(problem);
  }
  return text;
}

/** A JSON request body parsed, after the checks of jsonBodyText: how the call endpoints' fast path reads its body. */
export function parseJsonBody(bytes: Uint8Array): unknown {
  const text = jsonBodyText(bytes);
  try {
    return JSON.parse(text);
  } catch {
    throw notJson();
  }
}

function notJson(): ApiError {
  return new ApiError("invalid_json", "Request body is not valid JSON.");
}

function tooDeep(): ApiError {
  return new ApiError("invalid_json", `Request body nests objects and arrays more than ${MAX_JSON_DEPTH} levels deep.`);
}

function inexactNumber(problem: Extract<JsonTextProblem, { kind: "inexact_number" }>): ApiError {
  const where = problem.path === "" ? "at the top level" : `at ${problem.path}`;
  const why =
    problem.reason === "unsafe_integer"
      ? `is an integer beyond ${Number.MAX_SAFE_INTEGER} (2^53 - 1) in size, which a JSON number cannot carry exactly: send it as a string`
      : "is beyond the largest JSON number (about 1.8e308): send a smaller number, or a string";
  return new ApiError("invalid_json", `Request body has a number ${where} that cannot be read exactly as sent: ${problem.literal} ${why}.`);
}

/**
 * Express's JSON body parser as every route uses it: at most `limitBytes`, and refused by the
 * checks of jsonBodyText (UTF-8, depth, numbers) before it is parsed; it reads whatever the
 * Content-Type unless `type` names the one to parse (the sign-in routes, which refuse any
 * other, see ./sign-in.ts).
 */
export function jsonBody(limitBytes: number, type: string | (() => boolean) = () => true): RequestHandler {
  return express.json({
    limit: limitBytes,
    type,
    verify: (_req, _res, buffer, encoding) => {
      // The scan reads bytes as UTF-8; in UTF-16 a quote byte can sit inside another
      // character, so a body in any other charset is refused rather than scanned wrongly.
      if (encoding.toLowerCase() !== "utf-8") throw new ApiError("invalid_request", "Send the body as UTF-8 JSON (charset=utf-8).");
      jsonBodyText(buffer);
    },
  });
}
