import { gzipSync } from "node:zlib";
import type { Category, FetchRequest, FuzzCase, FuzzStep, Target } from "./cases";
import { rawCase } from "./generator-raw";
import { authRoutesCase, otherRoutesCase, readsCase } from "./generator-routes";
import { sellerSchemaCase, sellerUrlCase } from "./generator-seller";
import { Rng } from "../helpers/random";
import { BAD_UTF8, DEPTHS, ODD_NUMBERS, ODD_STRINGS, PROTO_KEYS, deepJson, hugeString, jsonObject, jsonString, jsonValue } from "./values";

/**
 * The seeded generator of hostile requests. `generateCase(seed, index, target)` is a pure
 * function: the same seed and index give the same case against any stack, so a failure
 * found at index i of seed s is replayed with FUZZ_SEED=s FUZZ_CASE=i.
 */

/** How often each category comes up, out of 100. */
const WEIGHTS: readonly (readonly [Category, number])[] = [
  ["call_json", 26],
  ["call_bytes", 8],
  ["call_auth", 8],
  ["raw_http", 14],
  ["hostile_backend", 8],
  ["reads", 10],
  ["auth_routes", 7],
  ["seller_schema", 7],
  ["seller_url", 6],
  ["other_routes", 6],
];

export function generateCase(seed: number, index: number, target: Target): FuzzCase {
  const rng = new Rng(seed, index);
  const category = rng.weighted(WEIGHTS);
  const made = GENERATORS[category](rng, target, index);
  return { index, category, ...made };
}

type Made = { label: string; steps: FuzzStep[]; parallel?: boolean };
export type CaseGenerator = (rng: Rng, target: Target, index: number) => Made;

const GENERATORS: Record<Category, CaseGenerator> = {
  call_json: callJsonCase,
  call_bytes: callBytesCase,
  call_auth: callAuthCase,
  raw_http: rawCase,
  hostile_backend: hostileBackendCase,
  reads: readsCase,
  auth_routes: authRoutesCase,
  seller_schema: sellerSchemaCase,
  seller_url: sellerUrlCase,
  other_routes: otherRoutesCase,
};

// ---------- shared builders ----------

export function fetchRequest(method: string, path: string, headers: Record<string, string> = {}, body?: string | Buffer): FetchRequest {
  return {
    transport: "fetch",
    method,
    path,
    headers,
    body: body === undefined ? undefined : Buffer.isBuffer(body) ? body : Buffer.from(body),
  };
}

export const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

/** The key a call is made with: mostly the funded buyer's, sometimes one that runs out or is limited. */
export function callerKey(rng: Rng, target: Target): string {
  return rng.weighted([
    [target.keys.rich, 80],
    [target.keys.poor, 8],
    [target.keys.limited, 8],
    [target.keys.revoked, 4],
  ]);
}

/** A skill reference: a known slug or UUID mostly, else something no skill is called. */
export function skillRef(rng: Rng, target: Target, slugs: readonly string[] = target.skills.map((s) => s.slug)): string {
  const roll = rng.next();
  if (roll < 0.75) return rng.pick(slugs);
  if (roll < 0.85) {
    const skill = rng.pick(target.skills);
    return rng.chance(0.5) ? skill.id : skill.id.toUpperCase();
  }
  return rng.pick([
    ...ODD_STRINGS,
    "ECHO",
    " fz-echo",
    "fz-echo ",
    "fz-echo\u0000",
    "00000000-0000-0000-0000-000000000000",
    "x".repeat(5_000),
    "fz-%65cho",
    "..",
    ".",
  ]);
}

/** The two call forms around an input given as JSON text. */
export function callRequest(rng: Rng, ref: string, inputText: string, headers: Record<string, string>): FetchRequest {
  const json = { "content-type": "application/json", ...headers };
  if (rng.chance(0.5)) return fetchRequest("POST", "/v1/call", json, `{"skill_id":${JSON.stringify(ref)},"input":${inputText}}`);
  return fetchRequest("POST", `/v1/skills/${encodeURIComponent(ref)}/call`, json, inputText);
}

const call = (request: FetchRequest, extra: Partial<FuzzStep> = {}): FuzzStep => ({ request, role: "call", ...extra });

/**
 * Lengths of the text a backtracking pattern is matched against. Under RE2 (linear) all are
 * instant; a backtracking engine takes seconds at 28 and longer than any test at 40.
 */
export const REDOS_LENGTHS = [8, 16, 24, 28, 40, 1_000, 100_000] as const;

/** An input for one of the schema skills: near its schema, or built to make validation work hard. */
function schemaInput(rng: Rng, target: Target, slug: string): string {
  if (slug === target.redosSkill) return `{"s":${JSON.stringify("a".repeat(rng.pick(REDOS_LENGTHS)) + rng.pick(["!", "", "b"]))}}`;
  if (slug === "fz-schema-unique") {
    // Its schema says maxItems 1000: beyond that, uniqueness should not even be checked.
    const n = rng.pick([10, 500, 1_000, 4_000]);
    return `{"items":[${Array.from({ length: n }, (_, i) => `{"a":${i}}`).join(",")}]}`;
  }
  if (slug === "fz-schema-ref") return `{"child":${deepJson(rng.pick(DEPTHS), "object").replaceAll('"a"', '"child"')}}`;
  return rng.pick([
    `{"name":"abc"}`,
    `{"name":"abc","n":${rng.pick(ODD_NUMBERS)}}`,
    `{"name":${jsonString(rng)}}`,
    `{"name":"abc","tags":[${Array.from({ length: rng.int(0, 40) }, () => jsonString(rng, false)).join(",")}]}`,
    `{"name":"abc","__proto__":{"name":1},"constructor":{"prototype":{"admin":true}}}`,
    `{"name":"abc","extra":1}`,
    `{"n":1}`,
    jsonObject(rng),
  ]);
}

/** An input for the call endpoints: odd values, deep nesting, prototype keys, huge leaves, wrong types. */
function callInput(rng: Rng): string {
  return rng.weighted<() => string>([
    [() => jsonObject(rng, 3), 35],
    [() => `{"a":${deepJson(rng.pick(DEPTHS), rng.pick(["array", "object", "mixed"] as const))}}`, 15],
    [() => `{"s":${JSON.stringify(hugeString(rng))},"n":${rng.pick(ODD_NUMBERS)}}`, 8],
    [
      () =>
        `{${PROTO_KEYS.slice(0, rng.int(1, PROTO_KEYS.length))
          .map((k) => `"${k}":{"polluted":true,"prototype":{"polluted":true}}`)
          .join(",")}}`,
      12,
    ],
    [() => rng.pick(["[]", "[1,2]", '"input"', "1", "null", "true", jsonValue(rng, 2)]), 12],
    [() => `{"a":${rng.pick(ODD_NUMBERS)},"a":${jsonString(rng, false)}}`, 6],
    [() => `{"list":[${Array.from({ length: rng.int(1_000, 30_000) }, (_, i) => i).join(",")}]}`, 4],
    [() => "{}", 8],
  ])();
}

// ---------- categories ----------

/** Well-formed HTTP with hostile JSON: both call forms, every skill, odd inputs and envelopes. */
function callJsonCase(rng: Rng, target: Target, index: number): Made {
  if (rng.chance(0.08)) return retryCase(rng, target, index);
  const headers: Record<string, string> = { ...bearer(callerKey(rng, target)) };
  if (rng.chance(0.15))
    headers["idempotency-key"] = rng.chance(0.9) ? `fz-idem-${rng.int(0, 40)}` : rng.pick(["", " ", "k".repeat(300), "\u00e9t\u00e9"]);
  const toSchema = rng.chance(0.2);
  const ref = toSchema ? rng.pick(target.schemaSkills) : skillRef(rng, target);
  const input = toSchema ? schemaInput(rng, target, ref) : callInput(rng);
  const envelope = rng.next();
  if (envelope < 0.8)
    return {
      label: toSchema ? `schema input for ${ref}` : "hostile input",
      steps: [call(callRequest(rng, ref, input, headers), { mayReset: true })],
    };
  // The general form's own fields, wrong.
  const body = rng.pick([
    `{"skill_id":${jsonValue(rng, 1)},"input":${input}}`,
    `{"skill_id":${JSON.stringify(ref)}}`,
    `{"input":${input}}`,
    `{"skill_id":${JSON.stringify(ref)},"input":${input},"skill_id":"fz-fail"}`,
    `{"__proto__":{"skill_id":"fz-echo","input":{}},"constructor":{"prototype":{"skill_id":"fz-echo"}}}`,
    `[{"skill_id":"fz-echo","input":{}}]`,
    jsonValue(rng, 2),
  ]);
  return {
    label: "hostile call envelope",
    steps: [call(fetchRequest("POST", "/v1/call", { "content-type": "application/json", ...headers }, body), { mayReset: true })],
  };
}

/**
 * One call sent two to four times under one Idempotency-Key, one after another or all at
 * once, sometimes with another body: a retry is replayed (charged once), a race is refused
 * (409) or replayed, another body is refused (422).
 */
function retryCase(rng: Rng, target: Target, index: number): Made {
  const headers = { ...bearer(rng.chance(0.9) ? target.keys.rich : target.keys.poor), "idempotency-key": `fz-retry-${index}` };
  const ref = rng.pick(["fz-echo", "fz-const", "fz-slow", "fz-status-500", "fz-status-422", "fz-garbage"]);
  const input = `{"n":${rng.int(0, 999)}}`;
  const request = callRequest(rng, ref, input, headers);
  const steps: FuzzStep[] = Array.from({ length: rng.int(2, 4) }, () =>
    call(rng.chance(0.15) ? { ...request, body: Buffer.from(input.replace("}", ',"x":1}')) } : request),
  );
  const parallel = rng.chance(0.5);
  return { label: `${parallel ? "concurrent" : "repeated"} idempotent ${ref}`, steps, parallel };
}

/** Bodies that are not JSON, not UTF-8, compressed, or over the size limit. */
function callBytesCase(rng: Rng, target: Target): Made {
  const ref = rng.pick(["fz-echo", "fz-const", skillRef(rng, target)]);
  const valid = `{"skill_id":${JSON.stringify(ref)},"input":{"s":"x"}}`;
  const kinds: (readonly [string, () => Buffer])[] = [
    ["random bytes", () => rng.bytes(rng.int(1, 4_096))],
    [
      "invalid UTF-8 in a string",
      () => Buffer.concat([Buffer.from(`{"skill_id":${JSON.stringify(ref)},"input":{"s":"`), rng.pick(BAD_UTF8), Buffer.from('"}}')]),
    ],
    ["invalid UTF-8 body", () => Buffer.concat([rng.pick(BAD_UTF8), Buffer.from(valid)])],
    ["BOM before JSON", () => Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(valid)])],
    ["UTF-16 JSON", () => Buffer.from(`\ufeff${valid}`, "utf16le")],
    ["truncated JSON", () => Buffer.from(valid.slice(0, rng.int(0, valid.length - 1)))],
    ["trailing garbage", () => Buffer.from(valid + rng.pick(["x", "}", ",", "\u0000", " {}"]))],
    [
      "JSON5-isms",
      () =>
        Buffer.from(
          rng.pick([
            `{'skill_id':'fz-echo','input':{}}`,
            `{"skill_id":"fz-echo","input":{"n":NaN}}`,
            `{"skill_id":"fz-echo","input":{"n":Infinity}}`,
            `{"skill_id":"fz-echo",/*c*/"input":{}}`,
            `{"skill_id":"fz-echo","input":{},}`,
          ]),
        ),
    ],
    ["empty body", () => Buffer.alloc(0)],
    ["whitespace only", () => Buffer.from(" \n\t\r ".repeat(rng.int(1, 100)))],
    [
      "over the size limit",
      () => Buffer.from(`{"skill_id":"fz-echo","input":{"s":"${"x".repeat(rng.pick([262_144, 300_000, 2_000_000]))}"}}`),
    ],
    ["gzip-encoded", () => gzipSync(valid)],
  ];
  const [label, make] = rng.pick(kinds);
  const headers: Record<string, string> = { ...bearer(callerKey(rng, target)) };
  const contentType = rng.pick([
    "application/json",
    "application/json; charset=utf-8",
    "application/json; charset=utf-16",
    "text/plain",
    "multipart/form-data; boundary=x",
    "application/x-www-form-urlencoded",
    "",
  ]);
  if (contentType) headers["content-type"] = contentType;
  if (label === "gzip-encoded" || rng.chance(0.05))
    headers["content-encoding"] = rng.pick(["gzip", "deflate", "br", "identity", "x-unknown"]);
  const perSkill = rng.chance(0.3);
  const path = perSkill ? `/v1/skills/${encodeURIComponent(ref)}/call` : "/v1/call";
  return { label, steps: [call(fetchRequest("POST", path, headers, make()), { mayReset: true })] };
}

/** The Authorization header, every way it can be wrong (what fetch can send; raw_http sends the rest). */
function callAuthCase(rng: Rng, target: Target): Made {
  const key = target.keys.rich;
  const variants: (readonly [string, Record<string, string>])[] = [
    ["no Authorization", {}],
    ["empty Authorization", { authorization: "" }],
    ["Bearer alone", { authorization: "Bearer" }],
    ["Bearer and spaces", { authorization: "Bearer    " }],
    ["lower-case scheme", { authorization: `bearer ${key}` }],
    ["upper-case scheme", { authorization: `BEARER ${key}` }],
    ["extra spaces", { authorization: `Bearer    ${key}   ` }],
    ["tab separator", { authorization: `Bearer\t${key}` }],
    ["Basic scheme", { authorization: `Basic ${Buffer.from(`${key}:`).toString("base64")}` }],
    ["Token scheme", { authorization: `Token ${key}` }],
    ["key twice", { authorization: `Bearer ${key} ${key}` }],
    ["key with a suffix", { authorization: `Bearer ${key}x` }],
    ["key truncated", { authorization: `Bearer ${key.slice(0, -1)}` }],
    ["prefix only", { authorization: "Bearer atom_" }],
    ["made-up key", { authorization: `Bearer atom_${rng.bytes(24).toString("base64url")}` }],
    ["latin-1 in key", { authorization: `Bearer atom_\u00e9\u00e0\u00ff` }],
    ["huge key", { authorization: `Bearer atom_${"x".repeat(rng.pick([1_000, 8_000, 15_000]))}` }],
    ["revoked key", { authorization: `Bearer ${target.keys.revoked}` }],
    ["session cookie instead of a key", { cookie: target.session.cookie, "x-csrf-token": target.session.csrf }],
    ["key in a cookie", { cookie: `authorization=Bearer ${key}` }],
    ["key in the query", {}],
  ];
  const [label, headers] = rng.pick(variants);
  const ref = rng.pick(["fz-echo", "fz-const", "fz-status-500"]);
  const request = callRequest(rng, ref, "{}", headers);
  if (label === "key in the query") request.path += `?key=${encodeURIComponent(key)}&api_key=${encodeURIComponent(key)}`;
  // RFC 9110 credentials: the scheme in any case, then spaces or tabs, then the key.
  const valid = ["lower-case scheme", "upper-case scheme", "extra spaces", "tab separator"].includes(label);
  return { label, steps: [call(request, { mayReset: true, mustRefuse: !valid })] };
}

/** Calls to skills whose backends misbehave: errors, lies about JSON, resets, hangs, floods. */
function hostileBackendCase(rng: Rng, target: Target): Made {
  const slugs = target.skills.map((s) => s.slug).filter((s) => s.startsWith("fz-") && !s.startsWith("fz-schema"));
  const ref = rng.pick(slugs);
  const input = rng.chance(0.8) ? rng.pick(["{}", '{"q":1}', jsonObject(rng, 1)]) : callInput(rng);
  return { label: `backend ${ref}`, steps: [call(callRequest(rng, ref, input, bearer(callerKey(rng, target))), { mayReset: true })] };
}
