import { expect } from "chai";
import { privateKeyToAccount } from "viem/accounts";
import { CSRF_HEADER, SESSION_COOKIE } from "../../server/http/session-cookies";
import { type TestStack, startStack } from "../helpers/gateway";
import { type Reply, type TestSession, sameOrigin, send, signedIn } from "../helpers/session";

// Fixed keys: the same signatures on every run.
const WALLET = privateKeyToAccount(`0x${"33".repeat(32)}`);
const EVIL = "http://evil.example";

/**
 * POSTs `body` (serialized as JSON whatever the content type says) with exactly `headers`:
 * as bytes, so that fetch adds no Content-Type of its own (it labels a string text/plain).
 */
async function rawPost(stack: TestStack, path: string, headers: Record<string, string>, body: unknown): Promise<Reply> {
  const res = await fetch(stack.url + path, { method: "POST", headers, body: Buffer.from(JSON.stringify(body)), redirect: "manual" });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text.startsWith("{") ? JSON.parse(text) : text };
}

/** A sign-in link's token freshly mailed to `email`. */
async function mailedToken(stack: TestStack, email: string): Promise<string> {
  await send(`${stack.url}/auth/email/start`, "POST", sameOrigin(stack), { email });
  const body = (await stack.gw.db.value<string>("SELECT body FROM outbox WHERE to_address = ? ORDER BY id DESC LIMIT 1", [email]))!;
  return decodeURIComponent(/token=([^\s]+)/.exec(body)![1]);
}

/** A SIWE message for WALLET on a fresh nonce, signed. */
async function signedMessage(stack: TestStack): Promise<{ message: string; signature: string }> {
  const nonce = await send(`${stack.url}/auth/siwe/nonce?address=${WALLET.address}`, "GET", {});
  const message = nonce.body.data.message as string;
  return { message, signature: await WALLET.signMessage({ message }) };
}

/** What a sign-in may write; a refused one writes none of it. */
async function footprint(stack: TestStack) {
  const count = async (sql: string) => Number(await stack.gw.db.value(sql));
  return {
    sessions: await count("SELECT COUNT(*) FROM sessions"),
    identities: await count("SELECT COUNT(*) FROM identities"),
    mails: await count("SELECT COUNT(*) FROM outbox"),
    usedLinks: await count("SELECT COUNT(*) FROM email_sign_in_tokens WHERE used_at IS NOT NULL"),
    usedNonces: await count("SELECT COUNT(*) FROM siwe_nonces WHERE used_at IS NOT NULL"),
  };
}

const json = { "content-type": "application/json" };

/** Every sign-in POST, each with a body it would otherwise accept. */
const ENDPOINTS: Array<[string, (stack: TestStack) => Promise<unknown>]> = [
  ["/auth/email/start", async () => ({ email: "ada@example.com" })],
  ["/auth/email/preview", async (stack) => ({ token: await mailedToken(stack, "ada@example.com") })],
  ["/auth/email/verify", async (stack) => ({ token: await mailedToken(stack, "ada@example.com") })],
  ["/auth/siwe/verify", (stack) => signedMessage(stack)],
];

/** Requests another site can make a browser send, or that name no origin, and the refusal each gets. */
const FOREIGN: Array<[string, (own: string) => Record<string, string>, number, string]> = [
  ["from another origin", () => ({ origin: EVIL, ...json }), 403, "origin_refused"],
  [
    "from another origin as text/plain (a CORS-simple request)",
    () => ({ origin: EVIL, "content-type": "text/plain" }),
    403,
    "origin_refused",
  ],
  ["from another origin as a form", () => ({ origin: EVIL, "content-type": "application/x-www-form-urlencoded" }), 403, "origin_refused"],
  ["from an opaque origin (Origin: null)", () => ({ origin: "null", ...json }), 403, "origin_refused"],
  ["that names no origin at all", () => ({ ...json }), 403, "origin_refused"],
  [
    "from another site by the browser's own word (Sec-Fetch-Site: cross-site)",
    (own) => ({ origin: own, "sec-fetch-site": "cross-site", ...json }),
    403,
    "origin_refused",
  ],
  [
    "from a sibling site (Sec-Fetch-Site: same-site)",
    (own) => ({ origin: own, "sec-fetch-site": "same-site", ...json }),
    403,
    "origin_refused",
  ],
  ["from this origin as text/plain", (own) => ({ origin: own, "content-type": "text/plain" }), 415, "unsupported_media_type"],
  [
    "from this origin as a form",
    (own) => ({ origin: own, "content-type": "application/x-www-form-urlencoded" }),
    415,
    "unsupported_media_type",
  ],
  [
    "from this origin as multipart",
    (own) => ({ origin: own, "content-type": "multipart/form-data; boundary=x" }),
    415,
    "unsupported_media_type",
  ],
  ["from this origin without a content type", (own) => ({ origin: own }), 415, "unsupported_media_type"],
];

/** Requests from the dashboard's own pages (or a client that says so), which pass. */
const OWN: Array<[string, (own: string) => Record<string, string>]> = [
  ["with this Origin", (own) => ({ origin: own, ...json })],
  ["with Sec-Fetch-Site: same-origin", () => ({ "sec-fetch-site": "same-origin", ...json })],
  [
    "with Sec-Fetch-Site: same-origin and a charset",
    () => ({ "sec-fetch-site": "same-origin", "content-type": "application/json; charset=utf-8" }),
  ],
];

describe("sign-in POSTs and login CSRF", () => {
  let stack: TestStack;
  beforeEach(async () => {
    stack = await startStack();
  });
  afterEach(async () => {
    await stack.close();
  });

  describe("only the dashboard's own pages can sign in", () => {
    for (const [path, bodyFor] of ENDPOINTS) {
      for (const [why, headersFor, status, code] of FOREIGN) {
        it(`refuses a sign-in POST ${why} (${path}), writing nothing`, async () => {
          const body = await bodyFor(stack);
          const before = await footprint(stack);
          const reply = await rawPost(stack, path, headersFor(new URL(stack.url).origin), body);
          expect(reply.status, JSON.stringify(reply.body)).to.equal(status);
          expect(reply.body).to.include({ success: false, code });
          expect(reply.headers.getSetCookie()).to.deep.equal([]);
          expect(await footprint(stack)).to.deep.equal(before);
        });
      }
      for (const [how, headersFor] of OWN) {
        it(`takes a sign-in POST ${how} (${path})`, async () => {
          const reply = await rawPost(stack, path, headersFor(new URL(stack.url).origin), await bodyFor(stack));
          expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
        });
      }
    }

    it("refuses the review's request: a signed SIWE message as text/plain from http://evil.example sets no cookie and leaves its nonce unused", async () => {
      const signed = await signedMessage(stack);
      const refused = await rawPost(stack, "/auth/siwe/verify", { origin: EVIL, "content-type": "text/plain" }, signed);
      expect(refused.status).to.equal(403);
      expect(refused.headers.getSetCookie()).to.deep.equal([]);
      // The same message from the dashboard still works: the refusal spent nothing.
      const accepted = await rawPost(stack, "/auth/siwe/verify", { ...sameOrigin(stack), ...json }, signed);
      expect(accepted.status, JSON.stringify(accepted.body)).to.equal(200);
    });

    it("refuses a sign-in POST whose Origin is this server's address when PUBLIC_URL names another", async () => {
      const behindProxy = await startStack({ config: { publicUrl: "https://dash.example" } });
      try {
        const own = await rawPost(
          behindProxy,
          "/auth/email/start",
          { origin: new URL(behindProxy.url).origin, ...json },
          { email: "ada@example.com" },
        );
        expect(own.status).to.equal(403);
        expect(own.body.error).to.include("Origin: https://dash.example");
        const pub = await rawPost(
          behindProxy,
          "/auth/email/start",
          { origin: "https://dash.example", ...json },
          { email: "ada@example.com" },
        );
        expect(pub.status).to.equal(200);
      } finally {
        await behindProxy.close();
      }
    });
  });

  describe("a browser signed in to one account is never switched silently", () => {
    let victim: TestSession;
    beforeEach(async () => {
      victim = await signedIn(stack, "victim@example.com");
    });
    const asVictim = (csrf = true) => ({
      ...sameOrigin(stack),
      ...json,
      cookie: victim.cookie,
      ...(csrf ? { [CSRF_HEADER]: victim.csrfToken } : {}),
    });
    const meWith = async (cookie: string) => send(`${stack.url}/v1/me`, "GET", { cookie });
    const newCookie = (reply: Reply) =>
      reply.headers
        .getSetCookie()
        .find((c) => c.startsWith(`${SESSION_COOKIE}=`))
        ?.split(";")[0];

    /** A sign-in of the attacker's identity in the victim's browser, per endpoint; `code` is its refusal there. */
    const ATTACKS: Array<[string, string, (stack: TestStack) => Promise<Record<string, unknown>>, string]> = [
      [
        "an e-mail link of an existing account",
        "/auth/email/verify",
        async (s) => {
          await s.gw.sessions.signIn("email", "mallory@example.com");
          return { token: await mailedToken(s, "mallory@example.com") };
        },
        "session_exists",
      ],
      [
        "an e-mail link that would create an account",
        "/auth/email/verify",
        async (s) => ({ token: await mailedToken(s, "fresh@example.com") }),
        "session_exists",
      ],
      [
        "a wallet of an existing account",
        "/auth/siwe/verify",
        async (s) => {
          await s.gw.sessions.signIn("siwe", WALLET.address);
          return signedMessage(s);
        },
        "identity_taken",
      ],
    ];

    for (const [what, path, attack, code] of ATTACKS) {
      it(`refuses to replace the session with ${what} (${path}: 409 ${code}), keeping the victim signed in`, async () => {
        const body = await attack(stack);
        const before = await footprint(stack);
        const reply = await rawPost(stack, path, asVictim(), body);
        expect(reply.status, JSON.stringify(reply.body)).to.equal(409);
        expect(reply.body).to.include({ success: false, code });
        expect(reply.headers.getSetCookie()).to.deep.equal([]);
        expect((await meWith(victim.cookie)).body.data.account_id).to.equal(victim.accountId);
        if (path === "/auth/email/verify") expect(await footprint(stack)).to.deep.equal(before);
      });

      it(`switches to ${what} only when the POST asks (switch_account: true), ending the old session`, async () => {
        const reply = await rawPost(stack, path, asVictim(), { ...(await attack(stack)), switch_account: true });
        expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
        expect(reply.body.data).to.include({ switched: true });
        expect(reply.body.data.account_id).to.not.equal(victim.accountId);
        expect((await meWith(newCookie(reply)!)).body.data.account_id).to.equal(reply.body.data.account_id);
        expect((await meWith(victim.cookie)).status).to.equal(401);
      });
    }

    it("refuses a switch_account that is not a boolean", async () => {
      const reply = await rawPost(stack, "/auth/email/verify", asVictim(), {
        token: await mailedToken(stack, "fresh@example.com"),
        switch_account: "yes",
      });
      expect(reply.status).to.equal(400);
      expect(reply.body.code).to.equal("invalid_request");
    });

    it("refuses a sign-in POST made with a session but without its CSRF token", async () => {
      for (const [path, body] of [
        ["/auth/email/verify", { token: await mailedToken(stack, "fresh@example.com"), switch_account: true }],
        ["/auth/siwe/verify", { ...(await signedMessage(stack)), switch_account: true }],
      ] as const) {
        const reply = await rawPost(stack, path, asVictim(false), body);
        expect(reply.status, path).to.equal(403);
        expect(reply.body.code, path).to.equal("csrf_failed");
      }
      expect((await meWith(victim.cookie)).body.data.account_id).to.equal(victim.accountId);
    });

    it("refuses the review's login CSRF: the attacker's link opened in the victim's browser signs nobody in", async () => {
      const token = await mailedToken(stack, "mallory@example.com");
      const page = await fetch(`${stack.url}/auth/email/callback?token=${encodeURIComponent(token)}`, {
        headers: { cookie: victim.cookie, accept: "text/html" },
        redirect: "manual",
      });
      expect(page.status).to.equal(200);
      expect(page.headers.getSetCookie()).to.deep.equal([]);
      // What the page would then POST, without the person choosing to switch:
      const reply = await rawPost(stack, "/auth/email/verify", asVictim(), { token });
      expect(reply.body.code).to.equal("session_exists");
      expect((await meWith(victim.cookie)).body.data.account_id).to.equal(victim.accountId);
      expect(await stack.gw.sessions.ownerOf("email", "mallory@example.com")).to.equal(undefined);
    });

    it("tells the page of a link what it would do in a signed-in browser", async () => {
      const preview = await rawPost(stack, "/auth/email/preview", asVictim(false), {
        token: await mailedToken(stack, "fresh@example.com"),
      });
      expect(preview.body.data).to.include({ signed_in: true, action: null, refusal: "session_exists", switch_action: "sign_up" });
    });
  });
});
