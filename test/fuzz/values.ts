import type { Rng } from "../helpers/random";

/**
 * Hostile JSON, built as text rather than through JSON.stringify: text can hold what a
 * JavaScript value cannot round-trip (duplicate keys, nesting deeper than the stack,
 * numbers beyond a double, lone surrogates as escapes) and is what a client really sends.
 */

/** Keys that reach an object's prototype or shadow its methods when code is careless. */
export const PROTO_KEYS = [
  "__proto__",
  "constructor",
  "prototype",
  "__defineGetter__",
  "__lookupGetter__",
  "hasOwnProperty",
  "toString",
  "valueOf",
  "toJSON",
  "then",
] as const;

/** Strings with a history of breaking parsers, loggers, templates and databases. */
export const ODD_STRINGS: readonly string[] = [
  "",
  " ",
  "\u0000",
  "a\u0000b",
  "\u202e\u0644\u0627 RTL",
  "e\u0301\u0301\u0301\u0301",
  "\u200b\u200c\u200d\ufeff",
  "\ud83d\ude00\ud83d\udc68\u200d\ud83d\udc69\u200d\ud83d\udc67",
  "'; DROP TABLE calls; --",
  '" OR 1=1 --',
  "<script>alert(1)</script>",
  // A template-injection probe, sent as literal text.
  "${7*7}{{7*7}}#{7*7}",
  "../../../../etc/passwd",
  "%00%2e%2e%2f",
  "\r\nSet-Cookie: sg_session=x",
  "atom_",
  "echo",
  "__proto__",
  "NaN",
  "-1",
  "\\",
  "\ufffd\ufffe\uffff",
];

/** Number literals that are valid JSON but awkward: beyond a double, negative zero, denormals. */
export const ODD_NUMBERS: readonly string[] = [
  "0",
  "-0",
  "1e309",
  "-1e309",
  "1e-400",
  "9007199254740993",
  "1.7976931348623157e308",
  "5e-324",
  "123456789012345678901234567890123456789",
  "-1",
  "0.1",
  "1E+2",
  "0e0",
  "-0.0",
  "100000000000000000000000",
];

/** JSON string escapes that decode to lone surrogates, controls and the like. */
const ODD_ESCAPES = ["\\ud800", "\\udfff", "\\ud800\\ud800", "\\u0000", "\\u001f", "\\u2028\\u2029", "\\ufeff", "\\/", "\\\\", '\\"'];

/** A JSON string literal (with its quotes). */
export function jsonString(rng: Rng, allowHuge = true): string {
  const roll = rng.next();
  if (roll < 0.45) return JSON.stringify(rng.pick(ODD_STRINGS));
  if (roll < 0.7) return `"${Array.from({ length: rng.int(1, 6) }, () => rng.pick(ODD_ESCAPES)).join("")}"`;
  if (roll < 0.9 || !allowHuge) return JSON.stringify(wordish(rng));
  return JSON.stringify(hugeString(rng));
}

/** A long string: a repeated character or a unicode run, from 10 kB to 200 kB. */
export function hugeString(rng: Rng): string {
  const length = rng.pick([10_000, 60_000, 200_000]);
  return rng.pick(["x", "\u00e9", "\ud83d\ude00", "\u0000", "<"]).repeat(Math.ceil(length / 2));
}

function wordish(rng: Rng): string {
  const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789-_ .:/@\u00e9\u4e2d";
  return Array.from({ length: rng.int(1, 24) }, () => alphabet[rng.int(0, alphabet.length - 1)]).join("");
}

/** An object key: plain, a prototype key, empty, unicode or long. */
export function jsonKey(rng: Rng): string {
  const roll = rng.next();
  if (roll < 0.3) return JSON.stringify(rng.pick(PROTO_KEYS));
  if (roll < 0.4) return jsonString(rng, false);
  if (roll < 0.45) return JSON.stringify("k".repeat(rng.int(1_000, 20_000)));
  return JSON.stringify(rng.pick(["a", "b", "name", "text", "s", "n", "items", "child", "x"]));
}

/** A random JSON value as text: a small tree of odd leaves, up to `depth` levels. */
export function jsonValue(rng: Rng, depth = 3): string {
  const roll = rng.next();
  if (depth <= 0 || roll < 0.45) {
    const leaf = rng.next();
    if (leaf < 0.4) return jsonString(rng);
    if (leaf < 0.75) return rng.pick(ODD_NUMBERS);
    return rng.pick(["true", "false", "null"]);
  }
  if (roll < 0.7) return `[${Array.from({ length: rng.int(0, 5) }, () => jsonValue(rng, depth - 1)).join(",")}]`;
  return jsonObject(rng, depth - 1);
}

/** A JSON object as text, its keys sometimes repeated or prototype keys. */
export function jsonObject(rng: Rng, depth = 2): string {
  const entries = Array.from({ length: rng.int(0, 6) }, () => `${jsonKey(rng)}:${jsonValue(rng, depth)}`);
  if (entries.length > 0 && rng.chance(0.2)) entries.push(entries[0]);
  return `{${entries.join(",")}}`;
}

export type NestingShape = "array" | "object" | "mixed";

/**
 * A value nested `depth` levels deep, built without recursion: a parser that recurses per
 * level, or a serializer that does, meets a stack it cannot hold.
 */
export function deepJson(depth: number, shape: NestingShape): string {
  if (shape === "array") return "[".repeat(depth) + "]".repeat(depth);
  if (shape === "object") return `${'{"a":'.repeat(depth)}1${"}".repeat(depth)}`;
  return `${'[{"a":'.repeat(Math.floor(depth / 2))}0${"}]".repeat(Math.floor(depth / 2))}`;
}

/** Nesting depths tried, around and far beyond what a recursive serializer survives. */
export const DEPTHS = [64, 1_000, 5_000, 10_000, 50_000, 100_000] as const;

/** Bytes that are not UTF-8: stray continuation bytes, overlong forms, surrogates, truncations. */
export const BAD_UTF8: readonly Buffer[] = [
  Buffer.from([0xff]),
  Buffer.from([0xfe, 0xff]),
  Buffer.from([0xc0, 0xaf]),
  Buffer.from([0xe0, 0x80, 0xaf]),
  Buffer.from([0xed, 0xa0, 0x80]),
  Buffer.from([0xf4, 0x90, 0x80, 0x80]),
  Buffer.from([0x80, 0x80, 0x80]),
  Buffer.from([0xe2, 0x82]),
  Buffer.from([0xf0, 0x9f, 0x98]),
];
