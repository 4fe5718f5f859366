import { expect } from "chai";
import { type TextRule, checkText, excerpt, hasForbiddenCharacters } from "../server/text";

const NAME: TextRule = { field: "name", minChars: 1, maxChars: 10, kind: "name" };
const PROSE: TextRule = { field: "description", minChars: 0, maxChars: 20, kind: "prose" };

describe("the text policy (server/text.ts)", () => {
  describe("checkText", () => {
    const refusedEverywhere: [string, string][] = [
      ["a NUL", "a\u0000b"],
      ["a tab", "a\tb"],
      ["DEL", "a\u007Fb"],
      ["a C1 control", "a\u0085b"],
      ["a left-to-right mark", "a\u200Eb"],
      ["a first-strong isolate", "a\u2068b"],
      ["a word joiner", "a\u2060b"],
      ["a soft hyphen", "a\u00ADb"],
      ["an Arabic letter mark", "a\u061Cb"],
      ["a lone low surrogate", "a\uDC00b"],
      ["a supplementary private-use character", "a\u{F0000}b"],
      ["a noncharacter", "a\uFFFFb"],
      ["a line separator", "a\u2028b"],
      ["five combining marks on one letter", "q\u0363\u0364\u0365\u0366\u0367"],
    ];
    for (const [what, text] of refusedEverywhere) {
      it(`refuses ${what} in a name and in prose`, () => {
        expect(checkText(text, NAME).ok).to.equal(false);
        expect(checkText(text, PROSE).ok).to.equal(false);
      });
    }

    it("allows a line feed in prose only, reading CRLF and CR as LF", () => {
      expect(checkText("a\nb", NAME)).to.include({ ok: false, code: "invalid_request" });
      expect(checkText("a\r\nb\rc", PROSE)).to.deep.equal({ ok: true, text: "a\nb\nc" });
    });

    it("refuses a name that shows nothing or holds a blank filler, and accepts an empty optional one", () => {
      for (const text of ["\u3164", "\u2800", "a\uFE0Fb", "...\u115F"])
        expect(checkText(text, NAME).ok, JSON.stringify(text)).to.equal(false);
      expect(checkText("   ", { ...NAME, minChars: 0 })).to.deep.equal({ ok: true, text: "" });
    });

    it("normalizes to NFC and trims before counting characters (code points, not UTF-16 units)", () => {
      expect(checkText("  Cafe\u0301  ", NAME)).to.deep.equal({ ok: true, text: "Caf\u00e9" });
      expect(checkText("\u{1F642}".repeat(10), NAME).ok).to.equal(true);
      expect(checkText("\u{1F642}".repeat(11), NAME)).to.deep.include({
        ok: false,
        message: "name must be 1 to 10 characters, spaces around it not counted.",
      });
    });

    it("says which field, and what is wrong with it", () => {
      expect(checkText("a\u202Eb", PROSE)).to.deep.include({
        message:
          "description must not contain control or invisible characters (such as NUL, bidirectional overrides or zero-width characters); line breaks are allowed.",
      });
    });
  });

  describe("excerpt", () => {
    it("flattens white space, shows refused characters as U+FFFD, and cuts with an ellipsis within the bound", () => {
      expect(excerpt("  One.\n\n\tTwo.  ", 20)).to.equal("One. Two.");
      expect(excerpt("a\u202Eb\u0000c", 20)).to.equal("a\uFFFDb\uFFFDc");
      expect(excerpt("abcdefghij", 5)).to.equal("abcd…");
      expect([...excerpt("\u{1F642}".repeat(10), 5)]).to.have.length(5);
    });
  });

  it("hasForbiddenCharacters allows a line feed only when asked", () => {
    expect(hasForbiddenCharacters("a\nb")).to.equal(true);
    expect(hasForbiddenCharacters("a\nb", true)).to.equal(false);
    expect(hasForbiddenCharacters("Zoë Café \u{1F642}")).to.equal(false);
  });
});
