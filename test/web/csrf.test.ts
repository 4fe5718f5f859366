import { expect } from "chai";
import { csrfFromCookies } from "../../server/web/src/cookies";

describe("the dashboard's CSRF token (server/web/src/cookies.ts)", () => {
  it("reads the __Host-sg_csrf cookie of a gateway served over https before a plain sg_csrf one", () => {
    expect(csrfFromCookies("sg_csrf=planted; __Host-sg_csrf=real%3D")).to.equal("real=");
  });

  it("reads sg_csrf on a gateway served over http, and nothing when signed out", () => {
    expect(csrfFromCookies("other=1; sg_csrf=abc")).to.equal("abc");
    expect(csrfFromCookies("other=1")).to.equal("");
  });
});
