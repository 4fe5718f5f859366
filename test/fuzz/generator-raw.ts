import type { FuzzStep, RawRequest, RawSegment } from "./cases";
import type { CaseGenerator } from "./generator";
import type { Rng } from "../helpers/random";
import { BAD_UTF8 } from "./values";

/**
 * What fetch refuses to send, written to a socket byte by byte: invalid UTF-8, broken
 * chunked encoding, bodies sent slowly or cut off, duplicate and malformed headers
 * (`Bearer\xa0key`), headers over the size limit, odd request lines, and several
 * requests pipelined on one connection.
 */

const CRLF = "\r\n";

/** Header lines as latin-1 bytes: what a client can put on the wire, not what fetch allows. */
function head(requestLine: string, headers: readonly (readonly [string, string])[]): Buffer {
  return Buffer.from(requestLine + CRLF + headers.map(([k, v]) => `${k}: ${v}${CRLF}`).join("") + CRLF, "latin1");
}

function request(
  method: string,
  path: string,
  headers: readonly (readonly [string, string])[],
  body: Buffer = Buffer.alloc(0),
  version = "HTTP/1.1",
): Buffer {
  const withLength = body.length > 0 || method === "POST" ? [...headers, ["Content-Length", String(body.length)] as const] : headers;
  return Buffer.concat([head(`${method} ${path} ${version}`, [["Host", "gateway.test"], ...withLength]), body]);
}

function one(bytes: Buffer, methods: string[], paths: string[], options: { abort?: boolean; segments?: RawSegment[] } = {}): RawRequest {
  return { transport: "raw", segments: options.segments ?? [{ bytes, delayMs: 0 }], abort: options.abort ?? false, methods, paths };
}

/** Cuts bytes into `count` pieces sent `maxDelayMs` apart at most: a slow client. */
function dribble(rng: Rng, bytes: Buffer, count: number, maxDelayMs: number): RawSegment[] {
  const cuts = new Set<number>();
  while (cuts.size < Math.min(count - 1, bytes.length - 1)) cuts.add(rng.int(1, bytes.length - 1));
  const edges = [0, ...[...cuts].sort((a, b) => a - b), bytes.length];
  return edges.slice(1).map((end, i) => ({ bytes: bytes.subarray(edges[i], end), delayMs: i === 0 ? 0 : rng.int(0, maxDelayMs) }));
}

/** A call body that is valid JSON, small, for a skill that answers. */
function callBody(rng: Rng): { path: string; body: Buffer } {
  const skill = rng.pick(["fz-echo", "fz-const", "fz-status-500"]);
  if (rng.chance(0.5)) return { path: "/v1/call", body: Buffer.from(`{"skill_id":"${skill}","input":{"n":${rng.int(0, 999)}}}`) };
  return { path: `/v1/skills/${skill}/call`, body: Buffer.from(`{"n":${rng.int(0, 999)}}`) };
}

const json = ["Content-Type", "application/json"] as const;

export const rawCase: CaseGenerator = (rng, target) => {
  const auth = ["Authorization", `Bearer ${rng.chance(0.9) ? target.keys.rich : target.keys.poor}`] as const;
  const kind = rng.weighted<string>([
    ["invalid UTF-8", 10],
    ["chunked, valid", 6],
    ["chunked, broken", 12],
    ["slow body", 8],
    ["slow headers", 4],
    ["aborted body", 10],
    ["duplicate headers", 10],
    ["odd Authorization", 10],
    ["huge headers", 6],
    ["pipelined", 12],
    ["odd request line", 10],
    ["expect", 4],
    ["garbage", 4],
  ]);
  const { path, body } = callBody(rng);
  const step = (raw: RawRequest, mayReset = true): { label: string; steps: FuzzStep[] } => ({
    label: kind,
    steps: [{ request: raw, role: raw.paths.some(isCallPath) ? "call" : "other", mayReset }],
  });

  switch (kind) {
    case "invalid UTF-8": {
      const bad = rng.pick(BAD_UTF8);
      const where = rng.int(0, 2);
      const payload =
        where === 0
          ? Buffer.concat([Buffer.from('{"skill_id":"fz-echo","input":{"s":"'), bad, Buffer.from('"}}')])
          : where === 1
            ? Buffer.concat([Buffer.from('{"skill_id":"fz-'), bad, Buffer.from('","input":{}}')])
            : Buffer.concat([Buffer.from('{"'), bad, Buffer.from('":1,"skill_id":"fz-echo","input":{}}')]);
      const badPath = rng.chance(0.2);
      const target = badPath ? Buffer.concat([Buffer.from("/v1/skills/fz-"), bad, Buffer.from("/call")]).toString("latin1") : "/v1/call";
      return step(one(request("POST", target, [auth, json], payload), ["POST"], [badPath ? "/v1/skills/?/call" : "/v1/call"]));
    }
    case "chunked, valid": {
      const pieces = dribble(rng, body, rng.int(1, 6), 0).map(
        (s) => `${s.bytes.length.toString(16)}${CRLF}${s.bytes.toString("latin1")}${CRLF}`,
      );
      const bytes = Buffer.concat([
        head(`POST ${path} HTTP/1.1`, [["Host", "gateway.test"], auth, json, ["Transfer-Encoding", "chunked"]]),
        Buffer.from(`${pieces.join("")}0${CRLF}${CRLF}`, "latin1"),
      ]);
      return step(one(bytes, ["POST"], [path]), false);
    }
    case "chunked, broken": {
      const text = body.toString("latin1");
      const broken = rng.pick([
        `zz${CRLF}${text}${CRLF}0${CRLF}${CRLF}`,
        `-1${CRLF}${text}${CRLF}0${CRLF}${CRLF}`,
        `${text.length.toString(16)}${CRLF}${text}X${CRLF}0${CRLF}${CRLF}`,
        `${text.length.toString(16)};${"e".repeat(rng.pick([10, 20_000]))}=1${CRLF}${text}${CRLF}0${CRLF}${CRLF}`,
        `0x${text.length.toString(16)}${CRLF}${text}${CRLF}0${CRLF}${CRLF}`,
        ` ${text.length.toString(16)} ${CRLF}${text}${CRLF}0${CRLF}${CRLF}`,
        `${"f".repeat(20)}${CRLF}${text}${CRLF}0${CRLF}${CRLF}`,
        `${text.length.toString(16)}\n${text}\n0\n\n`,
        `${text.length.toString(16)}${CRLF}${text}${CRLF}0${CRLF}Trailer: ${"x".repeat(100)}${CRLF}bad trailer${CRLF}${CRLF}`,
      ]);
      const te = rng.pick(["chunked", "chunked", "gzip, chunked", "chunked, identity", "xchunked", "Chunked"]);
      const bytes = Buffer.concat([
        head(`POST ${path} HTTP/1.1`, [["Host", "gateway.test"], auth, json, ["Transfer-Encoding", te]]),
        Buffer.from(broken, "latin1"),
      ]);
      // A valid-looking chunk header promising more than is sent would leave the server rightly waiting: cut it off.
      return step(one(bytes, ["POST"], [path], { abort: te === "xchunked" }));
    }
    case "slow body": {
      const bytes = request("POST", path, [auth, json], body);
      return step(one(bytes, ["POST"], [path], { segments: dribble(rng, bytes, rng.int(3, 12), 25) }), false);
    }
    case "slow headers": {
      const slowPath = rng.pick(["/v1/balance", "/healthz", "/v1/skills"]);
      const bytes = request("GET", slowPath, [auth]);
      return step(one(bytes, ["GET"], [slowPath], { segments: dribble(rng, bytes, rng.int(3, 10), 25) }), false);
    }
    case "aborted body": {
      const declared = body.length + rng.int(1, 10_000);
      const chunked = rng.chance(0.3);
      const headers = chunked ? [["Transfer-Encoding", "chunked"] as const] : [["Content-Length", String(declared)] as const];
      const start = head(`POST ${path} HTTP/1.1`, [["Host", "gateway.test"], auth, json, ...headers]);
      const partial = chunked
        ? Buffer.from(`${(body.length + 100).toString(16)}${CRLF}${body.toString("latin1")}`, "latin1")
        : body.subarray(0, rng.int(0, body.length));
      return step(
        one(Buffer.alloc(0), ["POST"], [path], {
          abort: true,
          segments: [
            { bytes: start, delayMs: 0 },
            { bytes: partial, delayMs: rng.int(0, 20) },
          ],
        }),
      );
    }
    case "duplicate headers": {
      const variants: (readonly (readonly [string, string])[])[] = [
        [auth, ["Authorization", "Bearer atom_wrong"]],
        [["Authorization", "Bearer atom_wrong"], auth],
        [auth, ["Content-Length", String(body.length + 1)]],
        [auth, ["Transfer-Encoding", "chunked"]],
        [auth, ["Content-Length", `${body.length}, ${body.length}`]],
        [auth, ["Content-Type", "text/plain"], ["Content-Type", "application/json"]],
        [auth, ["Idempotency-Key", "a"], ["Idempotency-Key", "b"]],
        [auth, ["Host", "evil.test"]],
        [auth, ["Content-Encoding", "identity"], ["Content-Encoding", "gzip"]],
      ];
      return step(one(request("POST", path, [...rng.pick(variants), json], body), ["POST"], [path]));
    }
    case "odd Authorization": {
      const key = target.keys.rich;
      const value = rng.pick([
        `Bearer\xa0${key}`,
        `Bearer\x0b${key}`,
        `Bearer ${key}\xa0`,
        `\xa0Bearer ${key}`,
        `Bearer ${key}\x00`,
        `Bearer ${key.replace("atom_", "atom\xad_")}`,
        `Bearer ${key}\xff\xfe`,
        `Bearer\r\n ${key}`,
      ]);
      const name = rng.pick(["Authorization", "authorization", "AUTHORIZATION", "Authorization ", " Authorization", "Author\xadization"]);
      const lines: (readonly [string, string])[] = [[name, value], json];
      // None of these is `Bearer <key>`: each must be refused, whichever layer refuses it.
      const made = step(one(request("POST", path, lines, body), ["POST"], [path]));
      made.steps[0].mustRefuse = true;
      return made;
    }
    case "huge headers": {
      const huge = rng.chance(0.5)
        ? [["X-Fuzz", "x".repeat(rng.pick([8_000, 17_000, 80_000]))] as const]
        : Array.from({ length: rng.pick([100, 2_500]) }, (_, i) => [`X-Fuzz-${i}`, "y"] as const);
      return step(one(request("POST", path, [auth, json, ...huge], body), ["POST"], [path]));
    }
    case "pipelined": {
      const count = rng.int(2, 6);
      const parts: Buffer[] = [];
      const methods: string[] = [];
      const paths: string[] = [];
      for (let i = 0; i < count; i++) {
        const which = rng.int(0, 4);
        if (which <= 1) {
          const c = callBody(rng);
          parts.push(request("POST", c.path, [auth, json], c.body));
          methods.push("POST");
          paths.push(c.path);
        } else if (which === 2) {
          parts.push(request("POST", "/v1/call", [auth, json], Buffer.from('{"skill_id":')));
          methods.push("POST");
          paths.push("/v1/call");
        } else {
          const p = rng.pick(["/v1/balance", "/healthz", "/v1/skills/fz-echo", "/v1/usage?limit=2"]);
          const method = rng.pick(["GET", "HEAD"]);
          parts.push(request(method, p, [auth]));
          methods.push(method);
          paths.push(p);
        }
      }
      const bytes = Buffer.concat(parts);
      const segments = rng.chance(0.5) ? [{ bytes, delayMs: 0 }] : dribble(rng, bytes, rng.int(2, 8), 5);
      return {
        label: kind,
        steps: [{ request: one(bytes, methods, paths, { segments }), role: paths.some(isCallPath) ? "call" : "other", mayReset: true }],
      };
    }
    case "odd request line": {
      const line = rng.pick([
        `post ${path} HTTP/1.1`,
        `FOO ${path} HTTP/1.1`,
        `POST http://evil.test${path} HTTP/1.1`,
        `POST ${path} HTTP/1.0`,
        `POST ${path} HTTP/2.0`,
        `POST ${path} HTTP/1.1 extra`,
        `POST  ${path}  HTTP/1.1`,
        `POST ${path}?${"q=1&".repeat(rng.pick([10, 5_000]))} HTTP/1.1`,
        `POST /v1/skills/%ff%fe/call HTTP/1.1`,
        `POST /v1/skills/..%2f..%2fcall/call HTTP/1.1`,
        `POST /v1//call HTTP/1.1`,
        `POST /V1/CALL HTTP/1.1`,
        `POST /v1/call/ HTTP/1.1`,
        `POST /v1/call#frag HTTP/1.1`,
        `POST /v1/skills/fz-echo%00/call HTTP/1.1`,
        `OPTIONS * HTTP/1.1`,
        `CONNECT 127.0.0.1:1 HTTP/1.1`,
        `TRACE ${path} HTTP/1.1`,
        `GET /${"a".repeat(rng.pick([1_000, 20_000]))} HTTP/1.1`,
      ]);
      const method = line.split(" ")[0];
      const hostless = line.endsWith("HTTP/1.0") || rng.chance(0.1);
      const headers = [
        ...(hostless ? [] : [["Host", "gateway.test"] as const]),
        auth,
        json,
        ["Content-Length", String(body.length)] as const,
      ];
      return step(one(Buffer.concat([head(line, headers), body]), [method], [line.split(" ")[1] ?? ""]));
    }
    case "expect": {
      const expect = rng.pick(["100-continue", "100-Continue", "200-ok", "nonsense"]);
      const start = head(`POST ${path} HTTP/1.1`, [
        ["Host", "gateway.test"],
        auth,
        json,
        ["Content-Length", String(body.length)],
        ["Expect", expect],
      ]);
      return step(
        one(Buffer.alloc(0), ["POST"], [path], {
          segments: [
            { bytes: start, delayMs: 0 },
            { bytes: body, delayMs: rng.int(0, 20) },
          ],
        }),
      );
    }
    default: {
      // Random bytes may happen to be the start of a request the server rightly waits to see
      // the rest of: those are sent and then cut off. The rest must be answered.
      if (rng.chance(0.3)) return step(one(rng.bytes(rng.int(1, 2_000)), ["GET"], ["(random bytes)"], { abort: true }));
      const bytes = rng.pick([
        Buffer.from("16030100a5010000a10303", "hex"),
        Buffer.from(`PRI * HTTP/2.0${CRLF}${CRLF}SM${CRLF}${CRLF}`),
        Buffer.from(`${CRLF}${CRLF}${CRLF}GET /healthz HTTP/1.1${CRLF}Host: x${CRLF}${CRLF}`),
        Buffer.from(`GET / HTTP/1.1${CRLF}Host: x${CRLF}Broken header line${CRLF}${CRLF}`),
        Buffer.from(`GET /healthz HTTP/1.1${CRLF}Host: x${CRLF}X-A: 1${CRLF} folded${CRLF}${CRLF}`),
        Buffer.from(`GET /healthz HTTP/1.1${CRLF}Host: x${CRLF}X-A\x00: 1${CRLF}${CRLF}`),
      ]);
      return step(one(bytes, ["GET"], ["(garbage)"]));
    }
  }
};

function isCallPath(path: string): boolean {
  return path === "/v1/call" || /^\/v1\/skills\/[^/]+\/call$/.test(path);
}
