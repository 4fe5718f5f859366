import { expect } from "chai";
import { API_REFERENCE_CSP } from "../../server/http/routes/api-reference";
import { type TestStack, startStack } from "../helpers/gateway";

describe("GET /docs: the API reference (server/http/routes/api-reference.ts)", () => {
  let stack: TestStack;
  before(async () => {
    stack = await startStack();
  });
  after(async () => {
    await stack?.close();
  });

  it("serves a page whose every script is the gateway's own, under a CSP that allows nothing from another site", async () => {
    const res = await fetch(`${stack.url}/docs`);
    expect(res.status).to.equal(200);
    expect(res.headers.get("content-type")).to.match(/^text\/html/);
    expect(res.headers.get("content-security-policy")).to.equal(API_REFERENCE_CSP);
    expect(res.headers.get("x-frame-options")).to.equal("DENY");
    const html = await res.text();
    const scripts = [...html.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/g)];
    expect(scripts.map((s) => /src="([^"]+)"/.exec(s[1])?.[1])).to.deep.equal([
      "/docs/assets/redoc.standalone.js",
      "/docs/assets/reference.js",
    ]);
    for (const script of scripts) expect(script[2].trim(), "no inline script").to.equal("");
    // Every address the page names is a path on this origin (or data:), none another site's.
    for (const [, address] of html.matchAll(/(?:src|href)="([^"]*)"/g)) expect(address).to.match(/^(\/(?!\/)|data:)/);
    for (const directive of API_REFERENCE_CSP.split(";").map((d) => d.trim())) {
      expect(directive, "a CSP source on another site").to.not.match(/https?:|\*|'unsafe-eval'/);
    }
    expect(API_REFERENCE_CSP).to.include("script-src 'self';");
  });

  it("serves the renderer from the gateway, with no address of another site left in it, revalidated by its ETag", async () => {
    const res = await fetch(`${stack.url}/docs/assets/redoc.standalone.js`);
    expect(res.status).to.equal(200);
    expect(res.headers.get("content-type")).to.match(/^text\/javascript/);
    const body = await res.text();
    expect(body.length).to.be.greaterThan(500_000);
    expect(body).to.include("Redoc");
    expect(body).to.not.match(/cdn\.redoc\.ly|fonts\.googleapis|fonts\.gstatic/);
    const again = await fetch(`${stack.url}/docs/assets/redoc.standalone.js`, { headers: { "if-none-match": res.headers.get("etag")! } });
    expect(again.status).to.equal(304);
  });

  it("starts the renderer on the gateway's own /openapi.json", async () => {
    const res = await fetch(`${stack.url}/docs/assets/reference.js`);
    expect(res.status).to.equal(200);
    expect(res.headers.get("content-type")).to.match(/^text\/javascript/);
    expect(await res.text()).to.include('Redoc.init(\n    "/openapi.json"');
  });

  it("serves no other file under /docs/assets", async () => {
    for (const path of ["/docs/assets/../../package.json", "/docs/assets/redoc.lib.js", "/docs/assets/"]) {
      const res = await fetch(stack.url + path);
      expect(res.status, path).to.equal(404);
    }
  });
});
