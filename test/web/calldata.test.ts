import { expect } from "chai";
import { encodeFunctionData, parseAbi } from "viem";
import { escrowClaimData } from "../../server/web/src/calldata";

const ESCROW = parseAbi(["function claim() returns (uint256)", "function claimTo(address recipient) returns (uint256)"]);

describe("dashboard: the escrow claim a browser wallet sends", () => {
  it("encodes claim() and claimTo(recipient) exactly as viem does", () => {
    expect(escrowClaimData()).to.equal(encodeFunctionData({ abi: ESCROW, functionName: "claim" }));
    const to = "0x90F79bf6EB2c4f870365E785982E1f101E93b906";
    expect(escrowClaimData(to)).to.equal(encodeFunctionData({ abi: ESCROW, functionName: "claimTo", args: [to] }));
  });

  it("refuses a recipient that is not a 20-byte hex address", () => {
    expect(() => escrowClaimData("0x1234")).to.throw(/40 hex digits/);
    expect(() => escrowClaimData(`0x${"zz".repeat(20)}`)).to.throw(/40 hex digits/);
  });
});
