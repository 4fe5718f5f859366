import { expect } from "chai";
import { inlineCodeSpans } from "../../server/web/src/markdown";
import { matchesSearch } from "../../server/web/src/search";
import { dataText, formatElapsed, readTryAnswer } from "../../server/web/src/try-answer";

describe("dashboard descriptions' inline code (server/web/src/markdown.ts)", () => {
  it("splits text into plain runs and code spans", () => {
    expect(inlineCodeSpans("Waits `ms` milliseconds")).to.deep.equal([
      { code: false, text: "Waits " },
      { code: true, text: "ms" },
      { code: false, text: " milliseconds" },
    ]);
  });

  it("closes a span only at a run of as many backticks, and strips one space each side", () => {
    expect(inlineCodeSpans("``a `b` c``")).to.deep.equal([{ code: true, text: "a `b` c" }]);
    expect(inlineCodeSpans("`` `x` ``")).to.deep.equal([{ code: true, text: "`x`" }]);
  });

  it("leaves an unclosed backtick as text", () => {
    expect(inlineCodeSpans("5` of rain `")).to.deep.equal([
      { code: false, text: "5" },
      { code: true, text: "of rain" },
    ]);
    expect(inlineCodeSpans("it's `open")).to.deep.equal([{ code: false, text: "it's `open" }]);
  });

  it("keeps HTML as text, inside and outside code: nothing is parsed as markup", () => {
    const spans = inlineCodeSpans('<img src=x onerror="alert(1)"> and `<b>bold</b>`');
    expect(spans).to.deep.equal([
      { code: false, text: '<img src=x onerror="alert(1)"> and ' },
      { code: true, text: "<b>bold</b>" },
    ]);
  });
});

describe("dashboard marketplace search (server/web/src/search.ts)", () => {
  const weather = {
    name: "Weather Now",
    slug: "weather-now",
    description: "Current conditions for a city.",
    seller: { name: "Marigold Labs" },
  };

  it("finds a skill by its name, slug, a word of its description or its seller's name, ignoring case", () => {
    for (const query of ["weather", "WEATHER-NOW", "conditions", "marigold", "Marigold Labs", ""])
      expect(matchesSearch(weather, query), query).to.equal(true);
    expect(matchesSearch(weather, "haiku")).to.equal(false);
  });

  it("needs every word of the query to match somewhere", () => {
    expect(matchesSearch(weather, "city marigold")).to.equal(true);
    expect(matchesSearch(weather, "city haiku")).to.equal(false);
  });

  it("searches a skill without a seller or description by what it has", () => {
    expect(matchesSearch({ name: "Echo", slug: "echo", description: "", seller: null }, "echo")).to.equal(true);
  });
});

describe("dashboard try-it answers (server/web/src/try-answer.ts)", () => {
  it("reads a success: data, what it cost, the gateway's latency and the call id", () => {
    const body = { success: true, data: { text: "HI" }, metadata: { skillId: "uppercase", cost: 0.002, responseTime: 12.5 } };
    expect(readTryAnswer(200, body, "c-1")).to.deep.equal({
      ok: true,
      status: 200,
      data: { text: "HI" },
      costUsd: 0.002,
      latencyMs: 12.5,
      callId: "c-1",
    });
  });

  it("reads an error in the gateway's words, charged nothing", () => {
    const body = { success: false, error: "Insufficient balance.", code: "insufficient_balance", metadata: { cost: 0, responseTime: 1 } };
    expect(readTryAnswer(402, body, null)).to.deep.equal({
      ok: false,
      status: 402,
      message: "Insufficient balance.",
      code: "insufficient_balance",
      costUsd: 0,
      latencyMs: 1,
      callId: undefined,
    });
  });

  it("says something plain for an answer that is not the envelope", () => {
    expect(readTryAnswer(502, "Bad Gateway", null).message).to.equal("The gateway answered HTTP 502: Bad Gateway");
    expect(readTryAnswer(500, null, null).message).to.equal("The gateway answered HTTP 500 with no explanation.");
  });

  it("prints data as an agent would see it, and elapsed time with its unit", () => {
    expect(dataText("plain")).to.equal("plain");
    expect(dataText({ a: 1 })).to.equal('{\n  "a": 1\n}');
    expect(formatElapsed(1234)).to.equal("1.2 s");
  });
});
