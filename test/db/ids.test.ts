import { expect } from "chai";
import { uuidv7 } from "../../server/db/ids";

describe("uuidv7", () => {
  it("is a version 7, variant 1 UUID", () => {
    expect(uuidv7()).to.match(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });

  it("carries its millisecond timestamp in the first 48 bits", () => {
    const id = uuidv7(0x0123456789ab);
    expect(id.slice(0, 13)).to.equal("01234567-89ab");
  });

  it("sorts ids made in later milliseconds after earlier ones", () => {
    const ids = [1_000, 2_000, 3_000, 1_700_000_000_000].map((ms) => uuidv7(ms));
    expect([...ids].sort()).to.deep.equal(ids);
  });

  it("does not repeat within one millisecond", () => {
    const ids = new Set(Array.from({ length: 10_000 }, () => uuidv7(42)));
    expect(ids.size).to.equal(10_000);
  });
});
