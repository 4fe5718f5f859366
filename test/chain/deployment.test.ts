import { expect } from "chai";
import { DeploymentFileError, parseDeployment, serializeDeployment, type Deployment } from "../../server/chain/deployment";

const address = (digit: string) => `0x${digit.repeat(40)}` as const;

/** A deployment file's JSON, as the deploy script writes it. */
function buildFile(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    network: "base",
    chainId: 8453,
    usdc: address("1"),
    usdcIsTestToken: false,
    escrow: address("2"),
    deployBlock: 12,
    deployer: address("3"),
    admin: address("4"),
    treasury: address("5"),
    settler: address("6"),
    voucherSigner: address("7"),
    ...overrides,
  };
}

const AA = { entryPoint: address("a"), accountFactory: address("b"), paymaster: address("c"), paymasterSigner: address("d") };

describe("the deployment file's accountAbstraction section", () => {
  it("is optional, and a file without it is written back exactly as it was", () => {
    const parsed = parseDeployment(buildFile());
    expect(parsed).to.not.have.property("accountAbstraction");
    expect(JSON.parse(serializeDeployment(parsed))).to.deep.equal(buildFile());
  });

  it("reads the ERC-4337 contracts' addresses (checksummed) and writes them back", () => {
    const parsed: Deployment = parseDeployment(buildFile({ accountAbstraction: AA }));
    expect(parsed.accountAbstraction).to.deep.equal({
      entryPoint: "0xaAaAaAaaAaAaAaaAaAAAAAAAAaaaAaAaAaaAaaAa",
      accountFactory: "0xbBbBBBBbbBBBbbbBbbBbbbbBBbBbbbbBbBbbBBbB",
      paymaster: "0xCcCCccccCCCCcCCCCCCcCcCccCcCCCcCcccccccC",
      paymasterSigner: "0xDDdDddDdDdddDDddDDddDDDDdDdDDdDDdDDDDDDd",
    });
    expect(parseDeployment(JSON.parse(serializeDeployment(parsed)))).to.deep.equal(parsed);
  });

  for (const [what, section, message] of [
    ["not an object", "paymaster", '"accountAbstraction" must be an object'],
    ["missing its paymaster", { ...AA, paymaster: undefined }, '"accountAbstraction.paymaster" must be a 20-byte hex address'],
    [
      "naming a signer that is no address",
      { ...AA, paymasterSigner: "0x1234" },
      '"accountAbstraction.paymasterSigner" must be a 20-byte hex address',
    ],
  ] as const) {
    it(`is refused when ${what}, naming the field`, () => {
      expect(() => parseDeployment(buildFile({ accountAbstraction: section }), "base.json"))
        .to.throw(DeploymentFileError)
        .with.property("message")
        .that.includes(`base.json: ${message}`);
    });
  }
});
