import express, { type RequestHandler } from "express";
import { ApiError } from "./errors";

/**
 * The deepest nesting of objects and arrays a request body may have. Real inputs nest a few
 * levels; thousands of levels only serve to overflow a recursive walk (validation, the
 * JSON.stringify that forwards the input), so they are refused before anything else runs.
 */
export const MAX_JSON_DEPTH = 64;

const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACE = 0x7d;
const CLOSE_BRACKET = 0x5d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * Whether JSON text nests objects and arrays deeper than `max`, found by one linear scan of
 * its bytes (brackets inside strings do not count). It does not validate the JSON: a body
 * that passes is parsed next, and a malformed one is refused there.
 */
export function nestsDeeperThan(bytes: Uint8Array, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < bytes.length; i++) {
    const byte = bytes[i];
    if (inString) {
      if (byte === BACKSLASH) i++;
      else if (byte === QUOTE) inString = false;
    } else if (byte === QUOTE) {
      inString = true;
    } else if (byte === OPEN_BRACE || byte === OPEN_BRACKET) {
      if (++depth > max) return true;
    } else if (byte === CLOSE_BRACE || byte === CLOSE_BRACKET) {
      depth--;
    }
  }
  return false;
}

export function tooDeep(): ApiError {
  return new ApiError("invalid_json", `Request body nests objects and arrays more than ${MAX_JSON_DEPTH} levels deep.`);
}

/**
 * Express's JSON body parser as every route uses it: at most `limitBytes`, no deeper than
 * MAX_JSON_DEPTH, and read whatever the Content-Type unless `type` names the one to parse
 * (the sign-in routes, which refuse any other, see ./sign-in.ts).
 */
export function jsonBody(limitBytes: number, type: string | (() => boolean) = () => true): RequestHandler {
  return express.json({
    limit: limitBytes,
    type,
    verify: (_req, _res, buffer, encoding) => {
      // The depth scan reads bytes as UTF-8; in UTF-16 a quote byte can sit inside another
      // character, so a body in any other charset is refused rather than scanned wrongly.
      if (encoding.toLowerCase() !== "utf-8") throw new ApiError("invalid_request", "Send the body as UTF-8 JSON (charset=utf-8).");
      if (nestsDeeperThan(buffer, MAX_JSON_DEPTH)) throw tooDeep();
    },
  });
}
