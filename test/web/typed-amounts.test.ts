import { expect } from "chai";
import { sentence, typedUsd } from "../../server/web/src/format";

describe("typed amounts and messages (server/web/src/format.ts)", () => {
  it("reads a typed USD amount into base units, exactly, within the decimals allowed", () => {
    expect(typedUsd("5")).to.equal(5_000_000n);
    expect(typedUsd(" 0.001 ")).to.equal(1_000n);
    expect(typedUsd("0.000001")).to.equal(1n);
    expect(typedUsd("10.50", 2)).to.equal(10_500_000n);
    for (const text of ["", "1.2.3", "-1", "1e3", "abc", "0.0000001", "1,000", ".5"]) expect(typedUsd(text), text).to.equal(undefined);
    expect(typedUsd("10.505", 2)).to.equal(undefined);
  });

  it("starts every message with a capital", () => {
    expect(sentence("price must be between $0.001 and $0.50.")).to.equal("Price must be between $0.001 and $0.50.");
    expect(sentence("Already one.")).to.equal("Already one.");
    expect(sentence("")).to.equal("");
  });
});
