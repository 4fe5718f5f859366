import { expect } from "chai";
import { type TestStack, startStack } from "../helpers/gateway";
import { send, sameOrigin } from "../helpers/session";

/**
 * The third review's "headers and envelopes" (docs/security.md): every answer says X-Content-Type-Options: nosniff,
 * the fast call path's too; a 404 does not echo the client's path; and the session cookies of a gateway served over
 * https are Secure, under the __Host- prefix, and read only by that name.
 */
describe("headers and envelopes", () => {
  let stack: TestStack;
  before(async () => {
    stack = await startStack();
  });
  after(() => stack.close());

  describe("X-Content-Type-Options: nosniff", () => {
    const answers: [string, () => Promise<Response>][] = [
      ["a JSON read (GET /v1/skills)", () => fetch(`${stack.url}/v1/skills`)],
      ["a paid call on the fast call path (POST /v1/call)", () => callWith(stack.key)],
      ["a refusal on the fast call path (401)", () => callWith("atom_nope")],
      [
        "a skill's error on the fast call path (POST /v1/skills/fail/call)",
        () => fetch(`${stack.url}/v1/skills/fail/call`, post(stack.key)),
      ],
      ["the 404 envelope", () => fetch(`${stack.url}/no/such/route`)],
      ["the API document", () => fetch(`${stack.url}/openapi.json`)],
      ["the dashboard's page", () => fetch(`${stack.url}/`)],
      ["a CSV download", () => fetch(`${stack.url}/v1/usage.csv`, { headers: { authorization: `Bearer ${stack.key}` } })],
    ];
    for (const [what, answer] of answers) {
      it(`is on ${what}`, async () => {
        const res = await answer();
        await res.arrayBuffer();
        expect(res.headers.get("x-content-type-options")).to.equal("nosniff");
      });
    }

    const post = (key: string): RequestInit => ({
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: "{}",
    });
    const callWith = (key: string) =>
      fetch(`${stack.url}/v1/call`, { ...post(key), body: JSON.stringify({ skill_id: "echo", input: { text: "hi" } }) });
  });

  describe("what an error echoes of the request", () => {
    const PLANTED = "Your-account-is-suspended.-Call-+1-555-0100-now";

    for (const method of ["GET", "POST", "OPTIONS"]) {
      it(`answers ${method} on no route 404 without the path in its message`, async () => {
        const res = await fetch(`${stack.url}/${PLANTED}/%E2%80%AE<script>`, { method });
        const body = (await res.json()) as { error: string };
        expect(res.status).to.equal(404);
        expect(body).to.include({ success: false, code: "not_found" });
        expect(body.error).to.equal(`No route for ${method} at this path: the API is described at GET /openapi.json.`);
      });
    }

    it("quotes at most 100 characters of an unknown skill's reference, with hidden characters shown as U+FFFD", async () => {
      const res = await send(`${stack.url}/v1/skills/${encodeURIComponent(`x\u202E${"y".repeat(1_000)}`)}`, "GET", {});
      expect(res.status).to.equal(404);
      expect(res.body.code).to.equal("skill_not_found");
      expect(res.body.error).to.not.include("\u202E");
      expect(res.body.error).to.match(/^Skill not found: "x\uFFFDy+…"\.$/);
      expect(res.body.error.length).to.be.below(130);
    });

    for (const [what, post] of [
      ["POST /v1/call", (ref: string) => stack.post("/v1/call", { skill_id: ref, input: {} })],
      ["POST /v1/skills/:skillId/call", (ref: string) => stack.post(`/v1/skills/${encodeURIComponent(ref)}/call`, {})],
    ] as const) {
      it(`quotes an unknown skill's reference the same way on ${what}`, async () => {
        const res = await post(`x\u202E${"y".repeat(1_000)}`);
        expect(res.status, what).to.equal(404);
        expect(res.body.error).to.not.include("\u202E");
        expect(res.body.error).to.match(/^Skill not found: "x\uFFFDy+…"\. Check the skill_id slug or UUID\.$/);
      });
    }
  });
});

describe("session cookies of a gateway served over https", () => {
  let stack: TestStack;
  before(async () => {
    // PUBLIC_URL https makes config.secureCookies true (server/config.ts); this stack is reached over http by fetch,
    // which, unlike a browser, sends Secure cookies anyway.
    stack = await startStack({ config: { secureCookies: true } });
  });
  after(() => stack.close());

  /** Signs ada in with an e-mail link, as the dashboard does: the Set-Cookie lines of the answer. */
  const signIn = async (): Promise<string[]> => {
    await send(`${stack.url}/auth/email/start`, "POST", sameOrigin(stack), { email: "ada@example.com" });
    const body = await stack.gw.ledger.db.value<string>("SELECT body FROM outbox ORDER BY id DESC LIMIT 1");
    const token = decodeURIComponent(/token=(\S+)/.exec(body!)![1]);
    const res = await fetch(`${stack.url}/auth/email/verify`, {
      method: "POST",
      headers: { ...sameOrigin(stack), "content-type": "application/json" },
      body: JSON.stringify({ token }),
    });
    expect(res.status).to.equal(200);
    return res.headers.getSetCookie();
  };
  const valueOf = (cookies: string[], name: string) =>
    cookies
      .find((c) => c.startsWith(`${name}=`))
      ?.split(";")[0]
      .slice(name.length + 1);

  it("are named __Host-sg_session and __Host-sg_csrf, Secure, for Path=/ and no Domain", async () => {
    const cookies = await signIn();
    for (const name of ["__Host-sg_session", "__Host-sg_csrf"]) {
      const line = cookies.find((c) => c.startsWith(`${name}=`));
      expect(line, name).to.be.a("string");
      expect(line).to.match(/; Secure/i);
      expect(line).to.match(/; Path=\//i);
      expect(line).to.not.match(/; Domain=/i);
    }
    expect(cookies.some((c) => c.startsWith("sg_session=") || c.startsWith("sg_csrf="))).to.equal(false);
  });

  it("are read only by their __Host- name: a plain sg_session cookie, as a sibling subdomain could plant, is no session", async () => {
    const token = valueOf(await signIn(), "__Host-sg_session")!;
    expect((await send(`${stack.url}/v1/me`, "GET", { cookie: `__Host-sg_session=${token}` })).status).to.equal(200);
    expect((await send(`${stack.url}/v1/me`, "GET", { cookie: `sg_session=${token}` })).status).to.equal(401);
  });

  it("are cleared at sign-out under the same names, Secure", async () => {
    const cookies = await signIn();
    const session = valueOf(cookies, "__Host-sg_session")!;
    const csrf = valueOf(cookies, "__Host-sg_csrf")!;
    const res = await fetch(`${stack.url}/auth/logout`, {
      method: "POST",
      headers: { cookie: `__Host-sg_session=${session}`, "x-csrf-token": decodeURIComponent(csrf) },
    });
    expect(res.status).to.equal(200);
    const cleared = res.headers.getSetCookie();
    for (const name of ["__Host-sg_session", "__Host-sg_csrf"])
      expect(cleared.find((c) => c.startsWith(`${name}=;`))).to.match(/; Secure/i);
  });
});
