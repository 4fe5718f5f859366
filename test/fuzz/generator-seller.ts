import type { FuzzStep, Target } from "./cases";
import { type CaseGenerator, REDOS_LENGTHS, bearer, callRequest, fetchRequest } from "./generator";
import type { Rng } from "../helpers/random";
import { DEPTHS, deepJson, jsonObject } from "./values";

/**
 * A seller lists a skill with a hostile input schema or a backend URL pointing inside the
 * gateway's network, a buyer calls it, the seller unlists it (so the catalogue, which every
 * listing recompiles, stays small). The listing may be refused (400); a call to an internal
 * address must never succeed, and the canary must never hear from the gateway.
 */

/** Patterns that backtrack exponentially in a backtracking engine, each with its attack text. */
const REDOS: readonly (readonly [string, (n: number) => string])[] = [
  ["^(a+)+$", (n) => `${"a".repeat(n)}!`],
  ["^(a|a)+$", (n) => `${"a".repeat(n)}!`],
  ["^(a|aa)+$", (n) => `${"a".repeat(n)}!`],
  ["^(\\w+\\s?)*$", (n) => `${"a".repeat(n)}!`],
  ["(x+x+)+y", (n) => "x".repeat(n)],
  ["^([a-zA-Z0-9]+\\.?)+@example\\.com$", (n) => `${"a".repeat(n)}!`],
];

/** A hostile schema and an input aimed at it. */
function hostileSchema(rng: Rng, target: Target): { label: string; schema: string; input: string } {
  const canary = `http://127.0.0.1:${target.internalPorts[0]}`;
  const n = rng.pick(REDOS_LENGTHS);
  const [pattern, attack] = rng.pick(REDOS);
  const depth = rng.pick([500, 2_000, 5_000, 9_000]);
  const keyword = rng.pick(["not", "items", "additionalProperties", "contains", "propertyNames"]);
  const kinds: (() => { label: string; schema: string; input: string })[] = [
    () => ({
      label: "ReDoS pattern",
      schema: JSON.stringify({ type: "object", properties: { s: { type: "string", pattern } } }),
      input: JSON.stringify({ s: attack(n) }),
    }),
    () => ({
      label: "ReDoS patternProperties",
      schema: JSON.stringify({ type: "object", patternProperties: { [pattern]: { type: "string" } } }),
      input: JSON.stringify({ [attack(n)]: "x" }),
    }),
    () => ({
      label: "ReDoS propertyNames",
      schema: JSON.stringify({ type: "object", propertyNames: { pattern } }),
      input: JSON.stringify({ [attack(n)]: 1 }),
    }),
    () => ({
      label: "recursive $ref",
      schema: rng.pick([
        '{"$ref":"#"}',
        '{"type":"object","properties":{"a":{"$ref":"#"}}}',
        '{"anyOf":[{"$ref":"#"}]}',
        '{"$defs":{"n":{"type":"object","properties":{"a":{"$ref":"#/$defs/n"}}}},"$ref":"#/$defs/n"}',
        '{"$id":"http://fuzz.test/s","type":"object","properties":{"a":{"$ref":"#"}}}',
      ]),
      input: `{"a":${deepJson(rng.pick(DEPTHS), "object")}}`,
    }),
    () => ({
      label: "mutual $ref",
      schema: '{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}',
      input: "{}",
    }),
    () => ({ label: "remote $ref", schema: JSON.stringify({ $ref: `${canary}/schema.json` }), input: "{}" }),
    () => ({
      label: "remote $schema",
      schema: JSON.stringify({ $schema: `${canary}/meta`, $id: `${canary}/id`, type: "object" }),
      input: "{}",
    }),
    () => ({ label: `nested ${keyword} x${depth}`, schema: `${`{"${keyword}":`.repeat(depth)}{}${"}".repeat(depth)}`, input: `{"a":[1]}` }),
    () => ({
      label: `nested properties x${depth}`,
      schema: `${'{"properties":{"a":'.repeat(depth)}{}${"}}".repeat(depth)}`,
      input: `{"a":${deepJson(100, "object")}}`,
    }),
    () => ({
      label: "huge enum",
      schema: JSON.stringify({ enum: Array.from({ length: rng.pick([1_000, 5_000, 20_000]) }, (_, i) => `v${i}`) }),
      input: "{}",
    }),
    () => ({
      label: "many properties",
      schema: JSON.stringify({
        type: "object",
        properties: Object.fromEntries(Array.from({ length: rng.pick([500, 3_000]) }, (_, i) => [`p${i}`, { type: "string" }])),
        required: ["p0"],
      }),
      input: '{"p0":"x"}',
    }),
    () => ({
      label: "uniqueItems",
      schema: '{"type":"object","properties":{"items":{"type":"array","uniqueItems":true}}}',
      input: `{"items":[${Array.from({ length: rng.pick([100, 1_000, 3_000]) }, (_, i) => `{"a":${i}}`).join(",")}]}`,
    }),
    // Bounded as the listing rules ask; an input far over the bound should cost no more than one at it.
    () => ({
      label: "uniqueItems with maxItems",
      schema: '{"type":"object","properties":{"items":{"type":"array","uniqueItems":true,"maxItems":100}}}',
      input: `{"items":[${Array.from({ length: rng.pick([50, 100, 8_000]) }, (_, i) => `{"a":${i}}`).join(",")}]}`,
    }),
    () => ({
      label: "prototype keys",
      schema:
        '{"type":"object","properties":{"__proto__":{"type":"string"},"constructor":{"type":"string"}},"required":["__proto__","constructor","prototype"]}',
      input: '{"__proto__":"x","constructor":"y","prototype":{}}',
    }),
    () => ({
      label: "invalid keywords",
      schema: rng.pick([
        '{"type":"nonsense"}',
        '{"minimum":"x"}',
        '{"pattern":"("}',
        '{"pattern":"(?<n>a)\\\\k<n>"}',
        '{"required":"x"}',
        '{"maxLength":1e308}',
        '{"multipleOf":1e-308}',
        '{"format":"email"}',
        '{"$id":"#x","$anchor":"%%"}',
        '{"if":{"const":1},"then":false}',
      ]),
      input: jsonObject(rng, 1),
    }),
    () => ({ label: "not an object", schema: rng.pick(["true", "false", "[]", '"string"', "1", '[{"type":"object"}]']), input: "{}" }),
  ];
  return rng.pick(kinds)();
}

function listing(slug: string, backendUrl: string, schema: string | undefined, rng: Rng): string {
  const timeout = rng.pick([100, 500, 1_000]);
  const fields = [
    `"slug":${JSON.stringify(slug)}`,
    `"name":"fuzz ${slug}"`,
    `"price":"0.001"`,
    `"backend_url":${JSON.stringify(backendUrl)}`,
    `"timeout_ms":${timeout}`,
  ];
  if (schema !== undefined) fields.push(`"input_schema":${schema}`);
  return `{${fields.join(",")}}`;
}

function sessionHeaders(target: Target): Record<string, string> {
  return { cookie: target.session.cookie, "x-csrf-token": target.session.csrf, "content-type": "application/json" };
}

/** The three steps: list, call (if listed), unlist (if listed). */
function listCallUnlist(
  rng: Rng,
  target: Target,
  slug: string,
  body: string,
  input: string,
  hostile: boolean,
  mustRefuse = hostile,
): FuzzStep[] {
  const headers = sessionHeaders(target);
  return [
    { request: fetchRequest("POST", "/v1/seller/skills", headers, body), role: mustRefuse ? "hostile_listing" : "other", mayReset: false },
    {
      request: callRequest(rng, slug, input, bearer(target.keys.rich)),
      role: hostile ? "hostile_call" : "call",
      requires: 0,
      mayReset: true,
    },
    { request: fetchRequest("DELETE", `/v1/seller/skills/${slug}`, headers), role: "other", requires: 0, mayReset: false },
  ];
}

export const sellerSchemaCase: CaseGenerator = (rng, target, index) => {
  const slug = `fz-l${index}`;
  const { label, schema, input } = hostileSchema(rng, target);
  return { label, steps: listCallUnlist(rng, target, slug, listing(slug, `${target.backendUrl}/echo`, schema, rng), input, false) };
};

/** Every way to spell an address inside the gateway's own network, and URLs that are not http at all. */
export function hostileUrls(target: Target, rng: Rng): string[] {
  const port = rng.pick(target.internalPorts);
  const urls = [
    `http://127.0.0.1:${port}/`,
    `http://localhost:${port}/`,
    `http://LOCALHOST:${port}/x`,
    `http://127.1:${port}/`,
    `http://127.0.0.1.:${port}/`,
    `http://2130706433:${port}/`,
    `http://0x7f000001:${port}/`,
    `http://0x7f.1:${port}/`,
    `http://0177.0.0.1:${port}/`,
    `http://017700000001:${port}/`,
    `http://0.0.0.0:${port}/`,
    `http://0:${port}/`,
    `http://[::ffff:127.0.0.1]:${port}/`,
    `http://[::ffff:7f00:1]:${port}/`,
    `http://[0:0:0:0:0:ffff:127.0.0.1]:${port}/`,
    `http://[::1]:${target.canaryV6Port ?? port}/`,
    `http://[::]:${port}/`,
    `http://user:pass@127.0.0.1:${port}/`,
    `http://${target.backendUrl.replace(/^http:\/\//, "")}@127.0.0.1:${port}/`,
    `http://127.0.0.1:${port}/healthz`,
    `http://127.0.0.1:${port}/v1/call`,
    `https://127.0.0.1:${port}/`,
    "http://169.254.169.254/latest/meta-data/",
    "http://[fe80::1]/",
    "http://10.0.0.1/",
    "http://172.16.0.1/",
    "http://192.168.0.1/",
    "http://100.64.0.1/",
    "http://[fc00::1]/",
    "http://[fd00:ec2::254]/",
    "http://224.0.0.1/",
    "http://255.255.255.255/",
    "file:///etc/passwd",
    "ftp://127.0.0.1/",
    "gopher://127.0.0.1:6379/_INFO",
    "data:application/json,{}",
    "javascript:alert(1)",
    "ws://127.0.0.1/",
    "http://",
    "not a url",
    `http://127.0.0.1:${port}/${"a".repeat(5_000)}`,
  ];
  return urls;
}

/**
 * Whether a listing of this URL must be refused outright: an address literal (in any
 * spelling) or a scheme that is not http(s). A host name (localhost) may be listed, since
 * what it resolves to is known only when it is called; the call must then be refused.
 */
export function refusedAtListing(url: string): boolean {
  return !/^https?:\/\/(?:[^@/]*@)?localhost[:/]/i.test(url);
}

export const sellerUrlCase: CaseGenerator = (rng, target, index) => {
  const slug = `fz-l${index}`;
  const url = rng.pick(hostileUrls(target, rng));
  const roll = rng.next();
  if (roll < 0.55) {
    return {
      label: `list ${url.slice(0, 60)}`,
      steps: listCallUnlist(rng, target, slug, listing(slug, url, undefined, rng), "{}", true, refusedAtListing(url)),
    };
  }
  if (roll < 0.75) {
    // A skill listed at an allowed backend, then moved to an internal address.
    const headers = sessionHeaders(target);
    return {
      label: `move to ${url.slice(0, 60)}`,
      steps: [
        {
          request: fetchRequest("POST", "/v1/seller/skills", headers, listing(slug, `${target.backendUrl}/const`, undefined, rng)),
          role: "other",
          mayReset: false,
        },
        {
          request: fetchRequest("PATCH", `/v1/seller/skills/${slug}`, headers, JSON.stringify({ backend_url: url })),
          role: refusedAtListing(url) ? "hostile_listing" : "other",
          requires: 0,
          mayReset: false,
        },
        { request: callRequest(rng, slug, "{}", bearer(target.keys.rich)), role: "hostile_call", requires: 1, mayReset: true },
        { request: fetchRequest("DELETE", `/v1/seller/skills/${slug}`, headers), role: "other", requires: 0, mayReset: false },
      ],
    };
  }
  // Skills that already point inside (listed before any check, or a name that resolves there): called.
  const ref = rng.pick(target.hostileSkills);
  return {
    label: `call ${ref}`,
    steps: [
      {
        request: callRequest(rng, ref, rng.chance(0.7) ? "{}" : jsonObject(rng, 1), bearer(target.keys.rich)),
        role: "hostile_call",
        mayReset: true,
      },
    ],
  };
};
