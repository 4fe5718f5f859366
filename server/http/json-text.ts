import { Buffer } from "node:buffer";

/**
 * What JSON text can hold that JSON.parse would not hand on as sent, found before it is parsed
 * by one linear, non-recursive scan of its bytes: nesting too deep for the recursive walks that
 * follow, and numbers a double cannot hold. The scan does not validate the JSON; whatever it lets
 * through is parsed next, and malformed text is refused there.
 */

/**
 * The greatest integer a double holds exactly, and every integer below it too: RFC 8259 §6 names
 * [-(2^53)+1, 2^53-1] as the range of integers that implementations agree on.
 */
const MAX_SAFE_INTEGER_DIGITS = String(Number.MAX_SAFE_INTEGER);

/** Why a number literal cannot be passed on as it was written. */
export type InexactNumberReason =
  /** An integer literal past ±(2^53 - 1): JSON.parse rounds away its last digits. */
  | "unsafe_integer"
  /** A literal beyond the largest double (about 1.8e308): JSON.parse makes it ±Infinity, which serializes as null. */
  | "beyond_double";

export type JsonTextProblem =
  | { kind: "too_deep" }
  | {
      kind: "inexact_number";
      reason: InexactNumberReason;
      /** The literal as sent, cut to a length fit for a message. */
      literal: string;
      /** Where it sits, from the top of the text: `input.n`, `items[3]`, `["a b"]`; empty at the top. */
      path: string;
    };

const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACE = 0x7d;
const CLOSE_BRACKET = 0x5d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const COMMA = 0x2c;
const MINUS = 0x2d;
const PLUS = 0x2b;
const DOT = 0x2e;
const DIGIT_0 = 0x30;
const DIGIT_9 = 0x39;
const LOWER_E = 0x65;
const UPPER_E = 0x45;

const OBJECT = 1;
const ARRAY = 2;

/** The longest literal, and the longest key, a message quotes. */
const QUOTED_MAX = 40;

const isDigit = (byte: number) => byte >= DIGIT_0 && byte <= DIGIT_9;

/**
 * Scans JSON text for the first thing it must not be taken with: nesting deeper than `maxDepth`
 * (answered as soon as it is seen, whatever came before), or else the first number literal, in
 * the order of the text, that JSON.parse would not give back as written. Brackets, colons, commas
 * and digits inside strings do not count. Work is linear in the bytes and memory bounded by
 * `maxDepth`: nothing a client sends can make it recurse or backtrack.
 *
 * Numbers are judged by how they are written. An integer literal (no fraction, no exponent) is
 * taken only within ±(2^53 - 1), where a double holds every integer exactly; past it JSON.parse
 * rounds (12345678901234567890 becomes 12345678901234567000), and a schema would validate, and a
 * backend receive, another integer than the one sent. A literal with a fraction or an exponent
 * is a decimal, which JSON has always meant as the nearest double (0.1 is taken as every parser
 * takes it); it is refused only when it lies beyond the largest double, since JSON.parse turns it
 * into Infinity, which is no JSON value at all and would be forwarded as null.
 */
export function scanJsonText(bytes: Uint8Array, maxDepth: number): JsonTextProblem | undefined {
  // One entry per open object or array, at most maxDepth of them: what it is, the index within
  // an array, and for an object where its latest key lies and whether a key comes next. Only the
  // offsets are kept; a key is decoded only to name the place of a number that is refused.
  const { kinds, indexes, keyStarts, keyEnds, expectsKey } = framesFor(maxDepth);
  let depth = 0;
  let inString = false;
  let stringStart = 0;
  let stringIsKey = false;
  let found: JsonTextProblem | undefined;

  for (let i = 0; i < bytes.length; i++) {
    const byte = bytes[i];
    if (inString) {
      if (byte === BACKSLASH) {
        i++;
      } else if (byte === QUOTE) {
        inString = false;
        if (stringIsKey) {
          keyStarts[depth] = stringStart;
          keyEnds[depth] = i + 1;
        }
      }
    } else if (byte === QUOTE) {
      inString = true;
      stringStart = i;
      stringIsKey = kinds[depth] === OBJECT && expectsKey[depth] === 1;
    } else if (byte === OPEN_BRACE || byte === OPEN_BRACKET) {
      if (++depth > maxDepth) return { kind: "too_deep" };
      kinds[depth] = byte === OPEN_BRACE ? OBJECT : ARRAY;
      indexes[depth] = 0;
      expectsKey[depth] = 1;
      keyStarts[depth] = -1;
    } else if (byte === CLOSE_BRACE || byte === CLOSE_BRACKET) {
      // Unbalanced text is malformed; the parser refuses it, so the count only stays in range.
      if (depth > 0) depth--;
    } else if (byte === COLON) {
      expectsKey[depth] = 0;
    } else if (byte === COMMA) {
      if (kinds[depth] === ARRAY) indexes[depth]++;
      else expectsKey[depth] = 1;
    } else if (byte === MINUS || isDigit(byte)) {
      // A number token: an optional sign and the integer digits, then any fraction and exponent.
      const start = i;
      if (byte === MINUS) i++;
      const digitsStart = i;
      while (i < bytes.length && isDigit(bytes[i])) i++;
      const integerDigits = i - digitsStart;
      let integral = true;
      let exponent = false;
      for (; i < bytes.length; i++) {
        const b = bytes[i];
        if (b === LOWER_E || b === UPPER_E) exponent = true;
        else if (b !== DOT && b !== PLUS && b !== MINUS && !isDigit(b)) break;
        integral = false;
      }
      const end = i;
      i--;
      if (found) continue;
      const reason = integral ? unsafeInteger(bytes, digitsStart, integerDigits) : beyondDouble(bytes, start, end, integerDigits, exponent);
      if (reason) {
        found = {
          kind: "inexact_number",
          reason,
          literal: quoted(latin1(bytes, start, Math.min(end, start + QUOTED_MAX + 1))),
          path: pathAt(bytes, depth, kinds, indexes, keyStarts, keyEnds),
        };
      }
    }
  }
  return found;
}

/**
 * The scan's stack, allocated once and reused: allocating five typed arrays costs more than
 * scanning a small call body (microseconds against hundreds of nanoseconds, on the path the
 * benchmark measures). The scan is synchronous, so no two runs share it at once; a run sets each
 * level's entry when it opens that level, before reading it, and level 0 (the top) is never written
 * as an object or array.
 */
let frames = newFrames(64);

function newFrames(maxDepth: number) {
  return {
    kinds: new Uint8Array(maxDepth + 1),
    indexes: new Int32Array(maxDepth + 1),
    keyStarts: new Int32Array(maxDepth + 1),
    keyEnds: new Int32Array(maxDepth + 1),
    expectsKey: new Uint8Array(maxDepth + 1),
  };
}

function framesFor(maxDepth: number): ReturnType<typeof newFrames> {
  if (frames.kinds.length < maxDepth + 1) frames = newFrames(maxDepth);
  return frames;
}

/** Whether the integer literal's digits name an integer past 2^53 - 1, which a double would round. */
function unsafeInteger(bytes: Uint8Array, digitsStart: number, digits: number): InexactNumberReason | undefined {
  if (digits < MAX_SAFE_INTEGER_DIGITS.length) return undefined;
  // JSON allows no leading zeros, so more digits is a larger integer (and text with leading zeros is refused by the parser anyway).
  if (digits > MAX_SAFE_INTEGER_DIGITS.length) return "unsafe_integer";
  for (let k = 0; k < digits; k++) {
    const difference = bytes[digitsStart + k] - MAX_SAFE_INTEGER_DIGITS.charCodeAt(k);
    if (difference !== 0) return difference > 0 ? "unsafe_integer" : undefined;
  }
  return undefined;
}

/**
 * Whether a decimal literal lies beyond the largest double. Only one with an exponent, or more
 * than 308 integer digits, can; the others are not converted at all, so the scan stays cheap.
 * A token that is not a number (NaN here) is left to the parser.
 */
function beyondDouble(
  bytes: Uint8Array,
  start: number,
  end: number,
  integerDigits: number,
  exponent: boolean,
): InexactNumberReason | undefined {
  if (!exponent && integerDigits <= 308) return undefined;
  const value = Number(latin1(bytes, start, end));
  return value === Infinity || value === -Infinity ? "beyond_double" : undefined;
}

/** The path of the value at `depth`: each enclosing array's index and object's latest key. */
function pathAt(
  bytes: Uint8Array,
  depth: number,
  kinds: Uint8Array,
  indexes: Int32Array,
  keyStarts: Int32Array,
  keyEnds: Int32Array,
): string {
  let path = "";
  for (let level = 1; level <= depth; level++) {
    if (kinds[level] === ARRAY) {
      path += `[${indexes[level]}]`;
    } else if (keyStarts[level] >= 0) {
      const key = decodeKey(bytes, keyStarts[level], keyEnds[level]);
      path += /^[A-Za-z_$][\w$]*$/.test(key) ? `${path === "" ? "" : "."}${key}` : `[${JSON.stringify(key)}]`;
    }
  }
  return path;
}

/** A key's text, unescaped, and cut for a message; the raw text if it does not parse (the parser refuses it next). */
function decodeKey(bytes: Uint8Array, start: number, end: number): string {
  const text = Buffer.from(bytes.buffer, bytes.byteOffset + start, end - start).toString("utf8");
  let key: string;
  try {
    key = JSON.parse(text) as string;
  } catch {
    key = text.slice(1, -1);
  }
  return quoted(key);
}

function quoted(text: string): string {
  return text.length > QUOTED_MAX ? `${text.slice(0, QUOTED_MAX)}…` : text;
}

/** Bytes that are ASCII (a number literal) as a string, without copying the buffer. */
function latin1(bytes: Uint8Array, start: number, end: number): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset + start, end - start).toString("latin1");
}
