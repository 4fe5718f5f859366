import { expect } from "chai";
import { csvCell, csvLine } from "../../server/http/csv";

describe("CSV cells (server/http/csv.ts)", () => {
  it("quotes a cell with a comma, a quote or a line break, doubling its quotes", () => {
    expect(csvCell("plain")).to.equal("plain");
    expect(csvCell("a,b")).to.equal('"a,b"');
    expect(csvCell('say "hi"')).to.equal('"say ""hi"""');
    expect(csvCell("two\nlines")).to.equal('"two\nlines"');
    expect(csvCell(null)).to.equal("");
    expect(csvCell(12.35)).to.equal("12.35");
  });

  it("writes text a spreadsheet would run as a formula as text", () => {
    for (const text of ["=1+1", "+1", "-1", "@SUM(A1)", "\tx", "\rx", "\nx", "\u0000x"])
      expect(csvCell(text)).to.match(/^"?'/, JSON.stringify(text));
    expect(csvCell('=HYPERLINK("x","y")')).to.equal(`"'=HYPERLINK(""x"",""y"")"`);
    expect(csvCell("a=b")).to.equal("a=b");
  });

  it("ends a line with CRLF", () => {
    expect(csvLine(["a", 1, null, "b,c"])).to.equal('a,1,,"b,c"\r\n');
  });
});
