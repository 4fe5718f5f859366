import http from "node:http";
import { expect } from "chai";
import { bearerToken } from "../../server/http/auth";
import { type TestStack, startStack } from "../helpers/gateway";

/** A request with the Authorization header sent byte for byte (latin1), as fetch would not always allow. */
function rawRequest(
  url: string,
  method: string,
  path: string,
  authorization: string,
  body?: string,
): Promise<{ status: number; body: any }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const headers: http.OutgoingHttpHeaders = { authorization };
    if (body !== undefined) headers["content-type"] = "application/json";
    const req = http.request({ hostname, port, path, method, headers }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (chunk) => (text += chunk));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

const KEY = "atom_3yZe7d";

/** Authorization values that are not `Bearer <token68>` by RFC 9110, and why. */
const REFUSED: Array<[string, string]> = [
  [`Bearer\xa0${KEY}`, "a no-break space between scheme and token"],
  [`Bearer\u2003${KEY}`, "an em space between scheme and token"],
  [`Bearer\u2028${KEY}`, "a line separator between scheme and token"],
  [`Bearer\v${KEY}`, "a vertical tab between scheme and token"],
  [`Bearer\f${KEY}`, "a form feed between scheme and token"],
  [`Bearer${KEY}`, "no space at all"],
  [`Bearer ${KEY}\xa0`, "a no-break space after the token"],
  [`Bearer ${KEY} extra`, "a second word after the token"],
  [`Bearer ${KEY},`, "a comma after the token"],
  [`Bearer "${KEY}"`, "a quoted token"],
  [`Bearer ${KEY}=x`, "padding in the middle of the token"],
  [`Bearer atom_é`, "a character outside token68"],
  [`Basic ${KEY}`, "another scheme"],
  [`Bearer`, "a scheme without a token"],
  [`Bearer `, "a scheme and a space without a token"],
  [`Bea rer ${KEY}`, "a space inside the scheme"],
  [`Bearer: ${KEY}`, "a colon after the scheme"],
  [` ${KEY}`, "no scheme"],
];

/** Values that are `Bearer <token68>`, and the token each carries. */
const ACCEPTED: Array<[string, string, string]> = [
  [`Bearer ${KEY}`, KEY, "one space"],
  [`bearer ${KEY}`, KEY, "the scheme in lower case"],
  [`BEARER ${KEY}`, KEY, "the scheme in upper case"],
  [`Bearer\t${KEY}`, KEY, "a tab"],
  [`Bearer   ${KEY}`, KEY, "several spaces"],
  [`Bearer ${KEY} `, KEY, "a trailing space (the field's whitespace)"],
  [`Bearer abc+/-._~==`, "abc+/-._~==", "every token68 character and trailing padding"],
];

describe("the Authorization header (RFC 9110 credentials)", () => {
  describe("bearerToken", () => {
    for (const [header, why] of REFUSED) {
      it(`refuses ${why}`, () => {
        expect(bearerToken(header)).to.equal(undefined);
      });
    }
    for (const [header, token, why] of ACCEPTED) {
      it(`accepts ${why}`, () => {
        expect(bearerToken(header)).to.equal(token);
      });
    }
  });

  describe("on the gateway", () => {
    let stack: TestStack;
    before(async () => {
      stack = await startStack();
    });
    after(async () => {
      await stack.close();
    });

    const endpoints: Array<{ name: string; method: string; path: string; body?: string }> = [
      {
        name: "POST /v1/call (the call fast path)",
        method: "POST",
        path: "/v1/call",
        body: JSON.stringify({ skill_id: "echo", input: {} }),
      },
      { name: "GET /v1/balance (an Express route)", method: "GET", path: "/v1/balance" },
    ];

    for (const { name, method, path, body } of endpoints) {
      it(`refuses Bearer<no-break space><key> on ${name} with 401`, async () => {
        const res = await rawRequest(stack.url, method, path, `Bearer\xa0${stack.key}`, body);
        expect(res.status).to.equal(401);
        expect(res.body).to.include({ success: false, code: "unauthorized" });
      });

      it(`accepts a lower-case scheme and a tab on ${name}`, async () => {
        const res = await rawRequest(stack.url, method, path, `bearer\t${stack.key}`, body);
        expect(res.status, JSON.stringify(res.body)).to.equal(200);
      });
    }
  });
});
