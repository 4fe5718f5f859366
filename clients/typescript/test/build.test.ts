import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { expect } from "chai";

const PACKAGE_DIR = path.resolve(__dirname, "..");

describe("@skill-gateway/sdk package", function () {
  this.timeout(120_000);
  let packageDir: string;
  let outDir: string;
  before(() => {
    // The package's own build (tsc -p .), into a temporary package folder instead of dist/: its dist/ beside its
    // package.json, as the package ships them (VERSION is read from there). Without its type check (--noCheck: the
    // same files, byte for byte, in a third of the CPU), which npm run typecheck runs on this package.
    packageDir = fs.mkdtempSync(path.join(os.tmpdir(), "skill-gateway-sdk-"));
    outDir = path.join(packageDir, "dist");
    fs.copyFileSync(path.join(PACKAGE_DIR, "package.json"), path.join(packageDir, "package.json"));
    const tsc = require.resolve("typescript/bin/tsc");
    execFileSync(process.execPath, [tsc, "-p", PACKAGE_DIR, "--outDir", outDir, "--noCheck"], { stdio: "pipe" });
  });
  after(() => fs.rmSync(packageDir, { recursive: true, force: true }));

  it("builds with tsc -p, emitting the JavaScript and declarations package.json points to", () => {
    const manifest = JSON.parse(fs.readFileSync(path.join(PACKAGE_DIR, "package.json"), "utf8"));
    expect([manifest.name, manifest.version, manifest.files]).to.deep.equal(["@skill-gateway/sdk", "0.1.0", ["dist"]]);
    for (const file of [manifest.main, manifest.types, manifest.exports["."].default, manifest.exports["."].types]) {
      expect(file, "points into dist/").to.match(/^(\.\/)?dist\//);
      expect(fs.existsSync(path.join(outDir, file.replace(/^(\.\/)?dist\//, ""))), file).to.equal(true);
    }
    expect(manifest.dependencies ?? {}).to.deep.equal({});
    // verifyReceipt's viem: an optional peer, for those who check receipts only.
    expect([manifest.peerDependencies, manifest.peerDependenciesMeta]).to.deep.equal([{ viem: "^2.21.0" }, { viem: { optional: true } }]);
  });

  it("loads viem only when a receipt is checked: the SDK's other uses run without it", () => {
    const loaded = execFileSync(
      process.execPath,
      [
        "-e",
        `const sdk = require(${JSON.stringify(path.join(outDir, "index.js"))});
         new sdk.SkillGateway({ apiKey: "atom_x" });
         process.stdout.write(String(Object.keys(require.cache).some((file) => file.includes("/node_modules/viem/"))));`,
      ],
      { encoding: "utf8" },
    );
    expect(loaded).to.equal("false");
  });

  it("the built module exports the client and the errors", () => {
    const sdk = require(path.join(outDir, "index.js"));
    const client = new sdk.SkillGateway({ apiKey: "atom_x", baseUrl: "http://127.0.0.1:1/" });
    expect(client.baseUrl).to.equal("http://127.0.0.1:1");
    expect(new sdk.InsufficientBalanceError("m", { status: 402, code: "insufficient_balance" })).to.be.instanceOf(sdk.SkillGatewayError);
    expect(new sdk.KeySpendLimitReachedError("m", { status: 402, code: "key_spend_limit_reached" })).to.be.instanceOf(
      sdk.InsufficientBalanceError,
    );
    const declarations = fs.readFileSync(path.join(outDir, "index.d.ts"), "utf8");
    expect(declarations).to.contain("SkillGateway");
    // The version, from the package.json it ships with: the one place the clients' version is written.
    expect(sdk.VERSION).to.equal(JSON.parse(fs.readFileSync(path.join(PACKAGE_DIR, "package.json"), "utf8")).version);
  });
});
