import { expect } from "chai";
import {
  dayOfExpiry,
  expiryOfDay,
  metadataLines,
  metadataSummary,
  parseMetadataLines,
  parseSkillList,
  skillListText,
} from "../../server/web/src/key-fields";

describe("the API Keys page's fields (server/web/src/key-fields.ts)", () => {
  it("reads metadata typed as name=value lines, and writes it back the same way", () => {
    expect(parseMetadataLines("agent=researcher-7\n\n  end_user = u_42 \r\nquery=a=b")).to.deep.equal({
      ok: true,
      metadata: { agent: "researcher-7", end_user: "u_42", query: "a=b" },
    });
    expect(parseMetadataLines("")).to.deep.equal({ ok: true, metadata: {} });
    expect(metadataLines({ agent: "researcher-7", end_user: "u_42" })).to.equal("agent=researcher-7\nend_user=u_42");
    expect(metadataSummary({ agent: "researcher-7", end_user: "u_42" })).to.equal("agent=researcher-7 · end_user=u_42");
    expect(metadataSummary({})).to.equal("");
    expect(metadataSummary(null)).to.equal("");
  });

  it("says which metadata line it cannot read: no =, no name, a name twice", () => {
    expect(parseMetadataLines("agent=a\nresearcher")).to.deep.equal({
      ok: false,
      problem: "Metadata line 2: write each entry as name=value (e.g. agent=researcher-7), one per line.",
    });
    expect(parseMetadataLines("=value")).to.include({ ok: false });
    expect(parseMetadataLines("a=1\na=2")).to.deep.equal({ ok: false, problem: 'Metadata line 2: "a" is given twice.' });
  });

  it("reads allowed skills separated by commas or spaces; none is every skill", () => {
    expect(parseSkillList(" echo, weather-now  haiku ")).to.deep.equal(["echo", "weather-now", "haiku"]);
    expect(parseSkillList(" , ")).to.equal(null);
    expect(skillListText(["echo", "haiku"])).to.equal("echo, haiku");
    expect(skillListText(null)).to.equal("");
  });

  it("makes a picked day the end of that UTC day, and shows an expiry as the day it works until", () => {
    expect(expiryOfDay("2026-12-31")).to.equal("2027-01-01T00:00:00.000Z");
    expect(expiryOfDay("")).to.equal(null);
    expect(expiryOfDay("31/12/2026")).to.equal(undefined);
    expect(dayOfExpiry("2027-01-01T00:00:00.000Z")).to.equal("2026-12-31");
    expect(dayOfExpiry("2027-01-01T12:30:00.000Z")).to.equal("2027-01-01");
    expect(dayOfExpiry(null)).to.equal("");
  });
});
