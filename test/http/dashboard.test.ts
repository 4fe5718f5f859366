import http from "node:http";
import { expect } from "chai";
import { DASHBOARD_CSP } from "../../server/http/routes/dashboard";
import { type TestStack, startStack } from "../helpers/gateway";

/** A GET with the path sent exactly as written: fetch would resolve `..` before sending. */
function rawGet(url: string, path: string): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.request({ hostname, port, path, method: "GET" }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk) => (body += chunk));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

describe("the dashboard's pages and assets (server/http/routes/dashboard.ts)", () => {
  let stack: TestStack;
  before(async () => {
    stack = await startStack();
  });
  after(async () => {
    await stack?.close();
  });

  it("serves the app's HTML at every page path, with the strict CSP", async () => {
    for (const path of [
      "/",
      "/wallet",
      "/signin",
      "/signin/oauth",
      "/auth/email/callback?token=x",
      "/keys",
      "/marketplace",
      "/marketplace/echo",
      "/usage",
      "/seller",
      "/settings",
    ]) {
      const res = await fetch(stack.url + path);
      expect(res.status, path).to.equal(200);
      expect(res.headers.get("content-type")).to.match(/^text\/html/);
      expect(res.headers.get("content-security-policy")).to.equal(DASHBOARD_CSP);
      expect(res.headers.get("x-content-type-options")).to.equal("nosniff");
      expect(res.headers.get("referrer-policy")).to.equal("same-origin");
      const html = await res.text();
      expect(html).to.contain('<script src="/assets/app.js" defer></script>');
      expect(html).to.not.match(/<script>|style=/);
    }
  });

  it("serves the bundled script as JavaScript, revalidated by its ETag", async () => {
    const res = await fetch(`${stack.url}/assets/app.js`);
    expect(res.status).to.equal(200);
    expect(res.headers.get("content-type")).to.match(/^text\/javascript/);
    expect(res.headers.get("cache-control")).to.equal("no-cache");
    expect((await res.text()).length).to.be.greaterThan(1000);
    const again = await fetch(`${stack.url}/assets/app.js`, { headers: { "if-none-match": res.headers.get("etag")! } });
    expect(again.status).to.equal(304);
  });

  it("serves the stylesheet as CSS", async () => {
    const res = await fetch(`${stack.url}/assets/app.css`);
    expect(res.status).to.equal(200);
    expect(res.headers.get("content-type")).to.match(/^text\/css/);
  });

  it("still answers an unknown API path with the JSON 404 envelope", async () => {
    const res = await stack.get("/v1/nope", null);
    expect(res.status).to.equal(404);
    expect(res.body).to.include({ success: false, code: "not_found" });
  });

  it("does not serve files outside the app: no path traversal, no other assets", async () => {
    for (const path of ["/assets/../package.json", "/assets/..%2f..%2fpackage.json", "/assets/main.ts", "/src/main.ts", "/index.html"]) {
      const res = await rawGet(stack.url, path);
      expect(res.status, path).to.equal(404);
      expect(res.body, path).to.not.contain("skill-gateway");
      expect(JSON.parse(res.body)).to.include({ success: false });
    }
  });
});
