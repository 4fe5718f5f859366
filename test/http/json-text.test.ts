import { expect } from "chai";
import { scanJsonText } from "../../server/http/json-text";
import { MAX_JSON_DEPTH, jsonBodyText } from "../../server/http/json-body";

const scan = (text: string) => scanJsonText(Buffer.from(text), MAX_JSON_DEPTH);

/** The message jsonBodyText refuses `text` with, or undefined when it takes it. */
function refusal(text: string | Buffer): string | undefined {
  try {
    jsonBodyText(typeof text === "string" ? Buffer.from(text) : text);
    return undefined;
  } catch (error) {
    expect(error).to.include({ code: "invalid_json" });
    return (error as Error).message;
  }
}

describe("scanJsonText", () => {
  describe("takes integers a double holds exactly, and decimals within its range (rounded as every JSON parser rounds them)", () => {
    const taken = [
      "0",
      "-0",
      "0.1",
      "9007199254740991",
      "-9007199254740991",
      "9007199254740990",
      "1E+2",
      "1e20",
      "12345678901234567890.5",
      "1.7976931348623157e308",
      "5e-324",
      "1e-400",
      `1${"0".repeat(300)}.5`,
    ];
    for (const literal of taken) {
      it(`takes ${literal.slice(0, 30)}`, () => {
        expect(scan(`{"n":${literal}}`)).to.equal(undefined);
      });
    }
  });

  describe("refuses a number JSON.parse would change, naming where it is", () => {
    const refused: [string, string, string, string][] = [
      ["1e400", '{"n":1e400}', "beyond_double", "n"],
      ["-1E309", '{"n":-1E309}', "beyond_double", "n"],
      ["1.7976931348623159e308", '{"n":1.7976931348623159e308}', "beyond_double", "n"],
      ["400 integer digits and a fraction", `{"n":1${"0".repeat(400)}.5}`, "beyond_double", "n"],
      ["9007199254740992", '{"n":9007199254740992}', "unsafe_integer", "n"],
      ["-9007199254740992", '{"n":-9007199254740992}', "unsafe_integer", "n"],
      ["12345678901234567890", '{"n":12345678901234567890}', "unsafe_integer", "n"],
      ["a number inside arrays and objects", '{"skill_id":"x","input":{"a":[1,2,{"b":[3,1e999]}]}}', "beyond_double", "input.a[2].b[1]"],
      ["a number under a key that is no identifier", '{"a b":{"k\\"ey":[0,99999999999999999]}}', "unsafe_integer", '["a b"]["k\\"ey"][1]'],
      ["a number after strings, objects and a closed array", '{"s":"x","o":{"c":1},"l":[1],"d":1e400}', "beyond_double", "d"],
      ["a number at the top level", "1e400", "beyond_double", ""],
    ];
    for (const [what, text, reason, path] of refused) {
      it(`refuses ${what} as ${reason}, at "${path}"`, () => {
        expect(scan(text)).to.deep.include({ kind: "inexact_number", reason, path });
      });
    }
  });

  it("does not read numbers inside strings, keys included", () => {
    expect(scan('{"1e400":"12345678901234567890","s":"\\"1e400"}')).to.equal(undefined);
  });

  it("answers the first refused number in the order of the text", () => {
    expect(scan('{"a":99999999999999999,"b":1e400}')).to.deep.include({ reason: "unsafe_integer", path: "a" });
  });

  it("answers nesting past the bound before any number, wherever it comes", () => {
    expect(scan(`{"n":1e400,"a":${"[".repeat(MAX_JSON_DEPTH)}]}`)).to.deep.equal({ kind: "too_deep" });
    expect(scan(`{"a":${"[".repeat(MAX_JSON_DEPTH - 1)}1e400${"]".repeat(MAX_JSON_DEPTH - 1)}}`)).to.deep.include({
      reason: "beyond_double",
    });
  });

  it("cuts a long literal for the message", () => {
    const problem = scan(`[${"9".repeat(100_000)}]`);
    expect(problem).to.deep.include({ reason: "unsafe_integer", path: "[0]" });
    expect((problem as { literal: string }).literal).to.equal(`${"9".repeat(40)}…`);
  });
});

describe("jsonBodyText", () => {
  it("refuses bytes that are not UTF-8 rather than read them as U+FFFD", () => {
    expect(refusal(Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d]))).to.equal(
      "Request body is not valid UTF-8: send JSON text encoded as UTF-8.",
    );
    expect(refusal(Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xed, 0xa0, 0x80, 0x22, 0x7d]))).to.include("not valid UTF-8");
  });

  it("names the number it refuses, where it is, and what to send instead", () => {
    expect(refusal('{"skill_id":"x","input":{"n":12345678901234567890}}')).to.equal(
      "Request body has a number at input.n that cannot be read exactly as sent: 12345678901234567890 is an integer beyond 9007199254740991 (2^53 - 1) in size, which a JSON number cannot carry exactly: send it as a string.",
    );
    expect(refusal('{"n":1e400}')).to.equal(
      "Request body has a number at n that cannot be read exactly as sent: 1e400 is beyond the largest JSON number (about 1.8e308): send a smaller number, or a string.",
    );
  });

  it("refuses malformed text as not JSON, even when it holds a number it would refuse", () => {
    expect(refusal('{"n":1e400,}')).to.equal("Request body is not valid JSON.");
  });

  it("returns the text of a body it takes, unchanged", () => {
    const text = '{"n":0.1,"m":9007199254740991,"s":"\u00e9\ud83d\ude00"}';
    expect(jsonBodyText(Buffer.from(text))).to.equal(text);
  });
});
