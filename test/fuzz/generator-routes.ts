import type { FuzzStep, Target } from "./cases";
import { type CaseGenerator, bearer, callerKey, fetchRequest, skillRef } from "./generator";
import type { Rng } from "../helpers/random";
import { DEPTHS, ODD_STRINGS, PROTO_KEYS, deepJson, jsonObject, jsonString, jsonValue } from "./values";

/**
 * The routes around the call path: the read endpoints with odd query strings and paths, the
 * sign-in endpoints, and the rest of the dashboard's API with hostile bodies.
 */

/** Query strings that parsers disagree about: repeats, brackets, prototype keys, overflow, bad escapes. */
function oddQuery(rng: Rng, names: readonly string[]): string {
  const name = rng.pick(names);
  return rng.pick([
    "",
    `?${name}=1`,
    `?${name}=0`,
    `?${name}=-1`,
    `?${name}=1e3`,
    `?${name}=0x10`,
    `?${name}=500`,
    `?${name}=501`,
    `?${name}=366`,
    `?${name}=9007199254740993`,
    `?${name}=${"9".repeat(400)}`,
    `?${name}=1&${name}=2`,
    `?${name}[]=1`,
    `?${name}[a]=1`,
    `?${name}=%00`,
    `?${name}=%ff`,
    `?${name}=%`,
    `?${name}= 1`,
    `?${name}=1.5`,
    `?__proto__[${name}]=1`,
    `?__proto__=1&constructor[prototype][polluted]=1`,
    `?${name}=${encodeURIComponent(rng.pick(ODD_STRINGS))}`,
    `?&&&=&=`,
    `?${"a=1&".repeat(rng.pick([100, 3_000]))}`,
  ]);
}

/** An auth header set for a read: a key, a session, neither, or a wrong one. */
function readAuth(rng: Rng, target: Target): Record<string, string> {
  return rng.weighted<Record<string, string>>([
    [bearer(target.keys.rich), 50],
    [{ cookie: target.session.cookie }, 20],
    [{}, 10],
    [bearer(`atom_${"z".repeat(rng.int(0, 40))}`), 8],
    [{ cookie: `sg_session=${rng.bytes(16).toString("base64url")}` }, 6],
    [{ cookie: `sg_session=${target.session.cookie.split("=")[1]}; sg_session=x`, authorization: "" }, 6],
  ]);
}

export const readsCase: CaseGenerator = (rng, target) => {
  const route = rng.pick([
    ["/v1/skills", []],
    [`/v1/skills/${encodeURIComponent(skillRef(rng, target))}`, []],
    ["/v1/balance", []],
    ["/v1/usage", ["limit", "before", "api_key_id", "skill_id", "from", "to"]],
    ["/v1/usage.csv", ["api_key_id", "skill_id", "from", "to"]],
    ["/v1/usage/daily", ["days", "from", "to", "api_key_id", "skill_id"]],
    ["/v1/usage/keys", []],
    ["/v1/history", ["limit", "before"]],
    ["/v1/earnings", []],
    ["/v1/me", []],
    ["/v1/keys", []],
    ["/v1/seller/skills", []],
    ["/v1/seller/payout-address", []],
    ["/v1/platform", []],
    ["/healthz", []],
    ["/readyz", []],
  ] as const);
  const [path, names] = route;
  const query = names.length > 0 || rng.chance(0.3) ? oddQuery(rng, names.length > 0 ? names : ["limit", "x"]) : "";
  const method = rng.weighted([
    ["GET", 85],
    ["HEAD", 10],
    ["OPTIONS", 5],
  ] as const);
  return {
    label: `${method} ${path}`,
    steps: [{ request: fetchRequest(method, path + query, readAuth(rng, target)), role: "other", mayReset: query.length > 8_000 }],
  };
};

/** An e-mail address field: valid, or the things a mailer or a header writer must refuse. */
function emailValue(rng: Rng): string {
  return rng.pick([
    JSON.stringify(`fuzz${rng.int(0, 50)}@example.com`),
    JSON.stringify("a@b.c\r\nBcc: victim@example.com"),
    JSON.stringify('"quoted"@example.com'),
    JSON.stringify(`${"a".repeat(5_000)}@example.com`),
    JSON.stringify("user@[127.0.0.1]"),
    JSON.stringify("@"),
    JSON.stringify("a@b@c"),
    JSON.stringify("\u00e9l\u00e8ve@exa\u00e9mple.com"),
    jsonString(rng),
    jsonValue(rng, 2),
  ]);
}

export const authRoutesCase: CaseGenerator = (rng, target) => {
  const json = { "content-type": "application/json" };
  const maybeSession: Record<string, string> = rng.chance(0.3)
    ? { cookie: target.session.cookie, ...(rng.chance(0.5) ? { "x-csrf-token": target.session.csrf } : {}) }
    : {};
  const spoof: Record<string, string> = rng.chance(0.3)
    ? {
        "x-forwarded-for": `${rng.int(1, 254)}.${rng.int(0, 255)}.${rng.int(0, 255)}.${rng.int(1, 254)}`,
        "x-real-ip": "10.0.0.1",
        forwarded: "for=1.2.3.4",
      }
    : {};
  // Sign-in POSTs are taken only from the dashboard's own pages: mostly say so, sometimes lie or say nothing.
  const origin: Record<string, string> = rng.weighted<Record<string, string>>([
    [{ origin: target.origin }, 60],
    [{ "sec-fetch-site": "same-origin" }, 10],
    [{ origin: rng.pick(["http://evil.test", "null", `${target.origin}.evil.test`, target.origin.toUpperCase()]) }, 10],
    [{ "sec-fetch-site": rng.pick(["cross-site", "none", "same-site"]), origin: target.origin }, 8],
    [{}, 12],
  ]);
  const headers = { ...json, ...maybeSession, ...spoof, ...origin };
  const token = rng.pick(["", "x", "a".repeat(5_000), rng.bytes(32).toString("base64url"), "%00", "../../", "' OR 1=1 --"]);
  const choices: (() => { label: string; step: FuzzStep })[] = [
    () => ({
      label: "email start",
      step: other(
        fetchRequest(
          "POST",
          "/auth/email/start",
          headers,
          rng.chance(0.8) ? `{"email":${emailValue(rng)}}` : rng.chance(0.5) ? jsonValue(rng, 2) : deepJson(rng.pick(DEPTHS), "array"),
        ),
      ),
    }),
    () => ({
      label: "email preview",
      step: other(
        fetchRequest("POST", "/auth/email/preview", headers, rng.chance(0.8) ? `{"token":${JSON.stringify(token)}}` : jsonValue(rng, 2)),
      ),
    }),
    () => ({
      label: "email verify",
      step: other(
        fetchRequest("POST", "/auth/email/verify", headers, rng.chance(0.8) ? `{"token":${JSON.stringify(token)}}` : jsonObject(rng, 2)),
      ),
    }),
    () => ({
      label: "email callback",
      step: other(
        fetchRequest(
          "GET",
          `/auth/email/callback${rng.pick(["", `?token=${encodeURIComponent(token)}`, "?token=a&token=b", "?token[x]=1", "?token=%zz"])}`,
          spoof,
        ),
      ),
    }),
    () => ({
      label: "siwe nonce",
      step: other(
        fetchRequest(
          "GET",
          `/auth/siwe/nonce${rng.pick(["", "?address=0x0000000000000000000000000000000000000000", "?address=0xzz", "?address=1&address=2", `?address=${"0".repeat(5_000)}`, "?address[]=0x0"])}`,
          spoof,
        ),
      ),
    }),
    () => ({ label: "siwe verify", step: other(fetchRequest("POST", "/auth/siwe/verify", headers, siweBody(rng))) }),
    () => ({
      label: "oauth",
      step: other(
        fetchRequest(
          "GET",
          `/auth/${rng.pick(["github", "google", "gitlab", "__proto__"])}/${rng.pick(["start", "callback"])}${rng.pick(["", "?code=x&state=y", "?error=access_denied", `?state=${token}`])}`,
          spoof,
        ),
      ),
    }),
    () => ({
      label: "logout",
      step: other(
        fetchRequest("POST", "/auth/logout", { cookie: `sg_session=${rng.bytes(16).toString("base64url")}`, "x-csrf-token": "x" }),
      ),
    }),
  ];
  const made = rng.pick(choices)();
  return { label: made.label, steps: [made.step] };
};

function siweBody(rng: Rng): string {
  const message = rng.pick([
    "",
    "x".repeat(rng.pick([100, 15_000])),
    `gateway.test wants you to sign in with your Ethereum account:\n0x${"ab".repeat(20)}\n\nURI: http://evil.test\nVersion: 1\nChain ID: 8453\nNonce: ${"n".repeat(17)}\nIssued At: 2020-01-01T00:00:00Z`,
    `127.0.0.1 wants you to sign in with your Ethereum account:\n0x${"00".repeat(20)}\n\nURI: http://127.0.0.1\nVersion: 1\nChain ID: ${rng.pick(["8453", "-1", "1e400", "0x1"])}\nNonce: %00\nIssued At: ${rng.pick(["9999-99-99", "not a date", "2020-01-01T00:00:00Z"])}`,
  ]);
  const signature = rng.pick(["0x", `0x${"00".repeat(65)}`, `0x${"zz".repeat(65)}`, `0x${"11".repeat(5_000)}`, "", "not hex"]);
  return rng.chance(0.85) ? JSON.stringify({ message, signature }) : jsonValue(rng, 2);
}

const other = (request: ReturnType<typeof fetchRequest>): FuzzStep => ({ request, role: "other", mayReset: false });

/** The rest of the API with a session or a key and hostile bodies: keys, try, top-ups, payouts, withdrawals. */
export const otherRoutesCase: CaseGenerator = (rng, target) => {
  const session = {
    cookie: target.session.cookie,
    ...(rng.chance(0.85) ? { "x-csrf-token": target.session.csrf } : {}),
    "content-type": "application/json",
  };
  const body = () =>
    rng.weighted<() => string>([
      [() => jsonObject(rng, 2), 45],
      [() => jsonValue(rng, 2), 35],
      // Every Express route parses JSON too: nested deep, under and over its own size limit.
      [() => `{"a":${deepJson(rng.pick(DEPTHS), rng.pick(["array", "object", "mixed"] as const))}}`, 20],
    ])();
  const id = encodeURIComponent(rng.pick([...ODD_STRINGS, "00000000-0000-0000-0000-000000000000", "x".repeat(3_000), ...PROTO_KEYS]));
  const choices: (() => { label: string; step: FuzzStep })[] = [
    () => ({
      label: "create key",
      step: other(fetchRequest("POST", "/v1/keys", session, rng.chance(0.7) ? `{"name":${jsonString(rng)}}` : body())),
    }),
    () => ({ label: "revoke unknown key", step: other(fetchRequest("DELETE", `/v1/keys/${id}`, session)) }),
    () => {
      const input = rng.chance(0.6) ? jsonObject(rng, 2) : jsonValue(rng, 1);
      const keyId = rng.chance(0.8) ? JSON.stringify(target.session.keyId) : jsonValue(rng, 1);
      const skill = encodeURIComponent(skillRef(rng, target, ["fz-echo", "fz-const", "fz-status-500", "fz-hang"]));
      return {
        label: "try a skill",
        step: {
          request: fetchRequest("POST", `/v1/skills/${skill}/try`, session, `{"key_id":${keyId},"input":${input}}`),
          role: "call",
          mayReset: false,
        },
      };
    },
    () => ({
      label: "card top-up",
      step: other(
        fetchRequest(
          "POST",
          "/v1/topups/card",
          session,
          rng.chance(0.6) ? `{"amount":${jsonString(rng, false)},"card":${jsonString(rng, false)}}` : body(),
        ),
      ),
    }),
    () => ({
      label: "card notify",
      step: other(
        fetchRequest(
          "POST",
          "/v1/topups/card/notify",
          {
            "content-type": rng.pick(["application/json", "text/plain"]),
            "x-card-signature": rng.pick(["", "t=1,v1=00", "x".repeat(500)]),
          },
          body(),
        ),
      ),
    }),
    () => ({ label: "checkout status", step: other(fetchRequest("GET", `/v1/topups/card/${id}`, session)) }),
    () => ({
      label: "payout address",
      step: other(
        fetchRequest(
          "PUT",
          "/v1/seller/payout-address",
          session,
          `{"address":${rng.pick([JSON.stringify(`0x${"00".repeat(20)}`), JSON.stringify(`0x${"zz".repeat(20)}`), jsonString(rng, false), jsonValue(rng, 1)])}}`,
        ),
      ),
    }),
    () => ({
      label: "withdrawal",
      step: other(
        fetchRequest(
          "POST",
          "/v1/withdrawals",
          { ...bearer(callerKey(rng, target)), "content-type": "application/json" },
          rng.chance(0.6) ? `{"amount":${jsonString(rng, false)}}` : body(),
        ),
      ),
    }),
    () => ({ label: "receipt", step: other(fetchRequest("GET", `/v1/calls/${id}/receipt`, bearer(target.keys.rich))) }),
    () => ({
      label: "wallet",
      step: other(
        fetchRequest(
          "POST",
          `/v1/wallet/${rng.pick(["withdraw", "withdraw/prepare", "withdraw/submit", "sweep/prepare", "sweep/submit"])}`,
          session,
          body(),
        ),
      ),
    }),
    () => ({
      label: "claim",
      step: other(fetchRequest("POST", `/v1/seller/claim${rng.pick(["", "/prepare", "/submit"])}`, session, body())),
    }),
    () => {
      const method = rng.pick(["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "PROPFIND"]);
      const path = rng.pick([
        "/v1/",
        "/v1",
        "//v1/call",
        "/v1/call/..",
        "/v1/skills/fz-echo/call/",
        "/%2e%2e/%2e%2e/etc/passwd",
        `/v1/${id}`,
        "/v1/skills/fz-echo/call%2f",
        "/assets/../package.json",
        "/v1/skills//call",
        `/v1/seller/skills/${id}`,
      ]);
      return {
        label: "odd route",
        step: other(
          fetchRequest(
            method,
            path,
            rng.chance(0.5) ? session : bearer(target.keys.rich),
            method === "GET" || method === "HEAD" ? undefined : body(),
          ),
        ),
      };
    },
  ];
  const made = rng.pick(choices)();
  return { label: made.label, steps: [made.step] };
};
