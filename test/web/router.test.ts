import { expect } from "chai";
import { matchPattern, resolve, skillPath } from "../../server/web/src/router";

describe("dashboard router (server/web/src/router.ts)", () => {
  it("sends / to the wallet when signed in and to sign-in otherwise", () => {
    expect(resolve("/", true)).to.deep.equal({ kind: "redirect", to: "/wallet" });
    expect(resolve("/", false)).to.deep.equal({ kind: "redirect", to: "/signin" });
  });

  const table: Array<[string, string]> = [
    ["/signin", "signin"],
    ["/signin/oauth", "oauthResult"],
    ["/auth/email/callback", "emailLink"],
    ["/wallet", "wallet"],
    ["/keys", "keys"],
    ["/marketplace", "marketplace"],
    ["/marketplace/", "marketplace"],
    ["/usage", "usage"],
    ["/seller", "seller"],
    ["/settings", "settings"],
  ];
  for (const [path, page] of table) {
    it(`shows the ${page} page at ${path}`, () => {
      const r = resolve(path, true);
      expect(r.kind).to.equal("page");
      if (r.kind === "page") expect(r.route.page).to.equal(page);
    });
  }

  it("matches a skill page and decodes its slug", () => {
    expect(resolve("/marketplace/echo", false)).to.deep.equal({ kind: "page", route: { page: "skill", params: { slug: "echo" } } });
    expect(matchPattern("/marketplace/:slug", "/marketplace/a%20b")).to.deep.equal({ slug: "a b" });
    expect(skillPath("a b")).to.equal("/marketplace/a%20b");
  });

  it("names no page for unknown paths, deeper paths or malformed escapes", () => {
    expect(resolve("/nope", true).kind).to.equal("not_found");
    expect(resolve("/marketplace/echo/extra", true).kind).to.equal("not_found");
    expect(resolve("/marketplace/%E0%A4%A", true).kind).to.equal("not_found");
    expect(resolve("/auth/github/start", true).kind).to.equal("not_found");
  });
});
