import { expect } from "chai";
import { type TestStack, startStack } from "../helpers/gateway";

describe("OPTIONS", () => {
  let stack: TestStack;
  before(async () => {
    stack = await startStack();
  });
  after(() => stack.close());

  // Express's routers would answer 200 "GET, HEAD" in text/plain; the fuzz harness found it.
  for (const path of ["/v1/balance", "/v1/skills/echo", "/healthz", "/", "/v1/call", "/nope"]) {
    it(`answers OPTIONS ${path} as a method the path does not serve: 404 in the envelope`, async () => {
      const res = await fetch(stack.url + path, { method: "OPTIONS" });
      expect(res.status).to.equal(404);
      expect(res.headers.get("content-type")).to.match(/^application\/json/);
      expect(await res.json()).to.deep.equal({
        success: false,
        error: "No route for OPTIONS at this path: the API is described at GET /openapi.json.",
        code: "not_found",
        request_id: res.headers.get("x-request-id"),
      });
    });
  }
});
