import { expect } from "chai";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { ABI_MODULE, renderAbiModule } from "../../scripts/abi";

describe("server/chain/abi.ts", () => {
  it("is what `npm run abi` writes from the current artifacts (a contract changed without it fails here)", () => {
    const committed = readFileSync(path.resolve(__dirname, "../..", ABI_MODULE), "utf8");
    const rendered = renderAbiModule();
    if (committed !== rendered) {
      expect.fail(`${ABI_MODULE} differs from the compiled contracts: run \`npm run abi\` and commit the result`);
    }
  });

  it("differs as soon as a contract's compiled ABI does (the check above can fail)", () => {
    const artifactsDir = mkdtempSync(path.join(tmpdir(), "abi-"));
    try {
      cpSync(path.resolve(__dirname, "../../artifacts/contracts"), path.join(artifactsDir, "contracts"), { recursive: true });
      const file = path.join(artifactsDir, "contracts/GatewayPaymaster.sol/GatewayPaymaster.json");
      const artifact = JSON.parse(readFileSync(file, "utf8"));
      artifact.abi.push({ type: "error", name: "PaymasterAddedSinceGeneration", inputs: [] });
      writeFileSync(file, JSON.stringify(artifact));
      const rendered = renderAbiModule(artifactsDir);
      expect(rendered).to.contain("PaymasterAddedSinceGeneration");
      expect(rendered).to.not.equal(readFileSync(path.resolve(__dirname, "../..", ABI_MODULE), "utf8"));
    } finally {
      rmSync(artifactsDir, { recursive: true, force: true });
    }
  });
});
