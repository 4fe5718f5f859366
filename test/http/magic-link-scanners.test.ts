import { expect } from "chai";
import { DASHBOARD_CSP } from "../../server/http/routes/dashboard";
import { type TestStack, startStack } from "../helpers/gateway";
import { sameOrigin, send, signedIn } from "../helpers/session";

/**
 * Mail scanners (and link previews, and antivirus gateways) fetch every link in a message
 * before the person does. A link that signs in on GET is used up by them. The link opens a
 * page instead; only the page's POST signs in.
 */
describe("magic links and mail scanners", () => {
  let stack: TestStack;
  beforeEach(async () => {
    stack = await startStack();
  });
  afterEach(async () => {
    await stack.close();
  });

  /** Asks for a link to `email` and returns its path on the gateway. */
  const mailLink = async (email: string): Promise<string> => {
    await send(`${stack.url}/auth/email/start`, "POST", sameOrigin(stack), { email });
    const body = (await stack.gw.db.value<string>("SELECT body FROM outbox WHERE to_address = ? ORDER BY id DESC LIMIT 1", [email]))!;
    const url = new URL(/(http:\/\/\S+)/.exec(body)![1]);
    return url.pathname + url.search;
  };
  const sessions = async () => Number(await stack.gw.db.value("SELECT COUNT(*) FROM sessions"));

  /** What scanners send: each a method, the headers it comes with, and whether a signed-in browser's cookie goes too. */
  const SCANNERS: Array<[string, string, Record<string, string>, boolean]> = [
    ["a HEAD of the link", "HEAD", {}, false],
    ["a GET of the link", "GET", {}, false],
    [
      "a GET of the link as a browser sends it",
      "GET",
      { accept: "text/html,application/xhtml+xml,*/*;q=0.8", "sec-fetch-site": "none", "sec-fetch-mode": "navigate" },
      false,
    ],
    ["a GET of the link asking for JSON", "GET", { accept: "application/json" }, false],
    ["a GET of the link with a signed-in browser's cookie", "GET", {}, true],
  ];

  for (const [what, method, headers, withSession] of SCANNERS) {
    it(`refuses to sign in on ${what}: it answers the page and uses nothing up`, async () => {
      const link = await mailLink("ada@example.com");
      const extra: Record<string, string> = withSession ? { cookie: (await signedIn(stack, "someone@example.com")).cookie } : {};
      const before = await sessions();
      for (let i = 0; i < 3; i++) {
        const res = await fetch(stack.url + link, { method, headers: { ...headers, ...extra }, redirect: "manual" });
        expect(res.status).to.equal(200);
        expect(res.headers.get("content-type")).to.match(/^text\/html/);
        expect(res.headers.get("content-security-policy")).to.equal(DASHBOARD_CSP);
        expect(res.headers.getSetCookie()).to.deep.equal([]);
      }
      expect(await sessions()).to.equal(before);
      expect(await stack.gw.sessions.ownerOf("email", "ada@example.com")).to.equal(undefined);
      // The person's own click, afterwards, still works.
      const token = new URLSearchParams(link.split("?")[1]).get("token");
      const verified = await send(`${stack.url}/auth/email/verify`, "POST", sameOrigin(stack), { token });
      expect(verified.status, JSON.stringify(verified.body)).to.equal(200);
    });
  }

  it("refuses to sign in on a POST to the link's own address (only /auth/email/verify uses it)", async () => {
    const link = await mailLink("ada@example.com");
    const res = await send(stack.url + link, "POST", sameOrigin(stack), {});
    expect(res.status).to.equal(404);
    expect(await stack.gw.sessions.ownerOf("email", "ada@example.com")).to.equal(undefined);
  });

  it("sends a browser that opens /auth/email/verify or /preview to the link's page, and an API client to the 404 envelope", async () => {
    const link = await mailLink("ada@example.com");
    const token = new URLSearchParams(link.split("?")[1]).get("token")!;
    const browser = { accept: "text/html,application/xhtml+xml,*/*;q=0.8", "sec-fetch-mode": "navigate" };
    for (const step of ["verify", "preview"]) {
      const res = await fetch(`${stack.url}/auth/email/${step}?token=${token}`, { headers: browser, redirect: "manual" });
      expect(res.status, step).to.equal(303);
      expect(res.headers.get("location")).to.equal(link);
      const api = await send(`${stack.url}/auth/email/${step}?token=${token}`, "GET", { accept: "application/json" });
      expect(api.status).to.equal(404);
      expect(api.body).to.include({ success: false, code: "not_found" });
    }
    expect(await sessions()).to.equal(0);
    // Nothing was used: the link's own button still signs in.
    expect((await send(`${stack.url}/auth/email/verify`, "POST", sameOrigin(stack), { token })).status).to.equal(200);
  });

  it("says in the refusal of a used link that it was used, and of a made-up one that it is not valid", async () => {
    const link = await mailLink("ada@example.com");
    const token = new URLSearchParams(link.split("?")[1]).get("token")!;
    expect((await send(`${stack.url}/auth/email/verify`, "POST", sameOrigin(stack), { token })).status).to.equal(200);
    for (const step of ["preview", "verify"]) {
      const used = await send(`${stack.url}/auth/email/${step}`, "POST", sameOrigin(stack), { token });
      expect(used.status).to.equal(401);
      expect(used.body).to.include({ success: false, code: "sign_in_failed" });
      expect(used.body.error).to.match(/^This sign-in link was used already/);
    }
    const madeUp = await send(`${stack.url}/auth/email/preview`, "POST", sameOrigin(stack), { token: "x".repeat(43) });
    expect(madeUp.body.error).to.match(/^This sign-in link is not valid/);
  });

  it("mails a link to the page, saying to confirm there", async () => {
    await mailLink("ada@example.com");
    const body = (await stack.gw.db.value<string>("SELECT body FROM outbox ORDER BY id DESC LIMIT 1"))!;
    expect(body).to.match(/\/auth\/email\/callback\?token=[\w-]{43}\n/);
    expect(body).to.include("confirm on the page it opens");
  });
});
