import { loadFixture } from "@nomicfoundation/hardhat-network-helpers";
import { expect } from "chai";
import hre from "hardhat";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { getAddress, zeroAddress } from "viem";
import {
  DEFAULT_ADMIN_ROLE,
  DeployError,
  DeploymentFileError,
  SETTLER_ROLE,
  VOUCHER_SIGNER_ROLE,
  deployContracts,
  deploymentPath,
  loadArtifact,
  readDeployment,
  verifyDeployment,
  writeDeployment,
  type Deployment,
} from "../../server/devstack/deploy";
import { USDC } from "./helpers/fixtures";

async function clientsFixture() {
  const [deployer, settler, voucherSigner, treasury, alice, newAdmin] = await hre.viem.getWalletClients();
  const publicClient = await hre.viem.getPublicClient();
  return { deployer, settler, voucherSigner, treasury, alice, newAdmin, publicClient };
}

async function deployedFixture() {
  const clients = await clientsFixture();
  const deployment = await deployContracts({
    network: "hardhat",
    publicClient: clients.publicClient,
    walletClient: clients.deployer,
    settler: clients.settler.account.address,
    voucherSigner: clients.voucherSigner.account.address,
    treasury: clients.treasury.account.address,
    mint: [{ to: clients.alice.account.address, amountMicros: 250n * USDC }],
  });
  return { ...clients, deployment };
}

describe("server/devstack/deploy", () => {
  describe("deployContracts", () => {
    it("deploys TestUSDC and SkillEscrow, grants the roles, mints, and describes it all", async () => {
      const { deployment, deployer, settler, voucherSigner, treasury, alice, publicClient } = await loadFixture(deployedFixture);
      expect(deployment).to.include({
        network: "hardhat",
        chainId: 8453,
        usdcIsTestToken: true,
        deployer: getAddress(deployer.account.address),
        admin: getAddress(deployer.account.address),
        treasury: getAddress(treasury.account.address),
        settler: getAddress(settler.account.address),
        voucherSigner: getAddress(voucherSigner.account.address),
      });
      const escrow = await hre.viem.getContractAt("SkillEscrow", deployment.escrow);
      const usdc = await hre.viem.getContractAt("TestUSDC", deployment.usdc);
      expect(getAddress((await escrow.read.usdc()) as string)).to.equal(deployment.usdc);
      expect(getAddress((await escrow.read.treasury()) as string)).to.equal(deployment.treasury);
      expect(await escrow.read.hasRole([SETTLER_ROLE, deployment.settler])).to.equal(true);
      expect(await escrow.read.hasRole([VOUCHER_SIGNER_ROLE, deployment.voucherSigner])).to.equal(true);
      expect(await escrow.read.hasRole([DEFAULT_ADMIN_ROLE, deployment.deployer])).to.equal(true);
      expect(await usdc.read.balanceOf([alice.account.address])).to.equal(250n * USDC);
      // deployBlock is the block that created the escrow: there is code at that block and none before it.
      const codeAt = await publicClient.getCode({ address: deployment.escrow, blockNumber: deployment.deployBlock });
      const codeBefore = await publicClient.getCode({
        address: deployment.escrow,
        blockNumber: deployment.deployBlock - 1n,
      });
      expect(codeAt).to.match(/^0x[0-9a-f]+$/);
      expect(codeBefore ?? "0x").to.equal("0x");
    });

    it("uses an existing USDC instead of deploying one (the fork case)", async () => {
      const { deployment, deployer, settler, voucherSigner, publicClient } = await loadFixture(deployedFixture);
      const second = await deployContracts({
        network: "fork",
        publicClient,
        walletClient: deployer,
        settler: settler.account.address,
        voucherSigner: voucherSigner.account.address,
        usdc: deployment.usdc,
      });
      expect(second.usdc).to.equal(deployment.usdc);
      expect(second.usdcIsTestToken).to.equal(false);
      expect(second.escrow).to.not.equal(deployment.escrow);
      expect(second.treasury).to.equal(getAddress(deployer.account.address));
    });

    it("hands the admin role over and renounces the deployer's when `admin` is another address", async () => {
      const { deployer, settler, voucherSigner, newAdmin, publicClient } = await loadFixture(clientsFixture);
      const deployment = await deployContracts({
        network: "hardhat",
        publicClient,
        walletClient: deployer,
        settler: settler.account.address,
        voucherSigner: voucherSigner.account.address,
        admin: newAdmin.account.address,
      });
      const escrow = await hre.viem.getContractAt("SkillEscrow", deployment.escrow);
      expect(await escrow.read.hasRole([DEFAULT_ADMIN_ROLE, newAdmin.account.address])).to.equal(true);
      expect(await escrow.read.hasRole([DEFAULT_ADMIN_ROLE, deployer.account.address])).to.equal(false);
      expect(deployment.admin).to.equal(getAddress(newAdmin.account.address));
    });

    it("refuses a USDC address without a contract, a token with other decimals, and minting a real token", async () => {
      const { deployment, deployer, settler, voucherSigner, alice, publicClient } = await loadFixture(deployedFixture);
      const base = {
        network: "fork",
        publicClient,
        walletClient: deployer,
        settler: settler.account.address,
        voucherSigner: voucherSigner.account.address,
      };
      await expectDeployError(deployContracts({ ...base, usdc: alice.account.address }), /no contract at the USDC address/);
      const wrongDecimals = await hre.viem.deployContract("EighteenDecimalsToken");
      await expectDeployError(deployContracts({ ...base, usdc: wrongDecimals.address }), /has 18 decimals; the escrow expects USDC's 6/);
      await expectDeployError(deployContracts({ ...base, usdc: deployment.escrow }), /does not answer decimals/);
      await expectDeployError(
        deployContracts({ ...base, usdc: deployment.usdc, mint: [{ to: alice.account.address, amountMicros: 1n }] }),
        /cannot mint an existing token/,
      );
    });

    it("explains missing artifacts", () => {
      expect(() => loadArtifact("SkillEscrow", "/nonexistent")).to.throw(DeployError, /npx hardhat compile/);
    });
  });

  describe("deployment file", () => {
    let dir: string;
    beforeEach(() => {
      dir = mkdtempSync(path.join(os.tmpdir(), "deployments-"));
    });
    afterEach(() => rmSync(dir, { recursive: true, force: true }));

    it("round-trips through deployments/<network>.json with deployBlock as a JSON number", async () => {
      const { deployment } = await loadFixture(deployedFixture);
      const file = deploymentPath("localhost", dir);
      expect(file).to.equal(path.join(dir, "localhost.json"));
      writeDeployment(file, deployment);
      const json = JSON.parse(readFileSync(file, "utf8"));
      expect(Object.keys(json)).to.deep.equal([
        "network",
        "chainId",
        "usdc",
        "usdcIsTestToken",
        "escrow",
        "deployBlock",
        "deployer",
        "admin",
        "treasury",
        "settler",
        "voucherSigner",
      ]);
      expect(json.deployBlock).to.equal(Number(deployment.deployBlock));
      expect(readDeployment(file)).to.deep.equal(deployment);
    });

    it("rejects missing files, non-JSON and malformed fields with DeploymentFileError naming the problem", async () => {
      const { deployment } = await loadFixture(deployedFixture);
      const file = path.join(dir, "x.json");
      expect(() => readDeployment(file)).to.throw(DeploymentFileError, /does not exist: deploy first/);
      writeFileSync(file, "{not json");
      expect(() => readDeployment(file)).to.throw(DeploymentFileError, /not JSON/);
      const good = JSON.parse(JSON.stringify({ ...deployment, deployBlock: Number(deployment.deployBlock) }));
      const cases: [Record<string, unknown>, RegExp][] = [
        [{ ...good, escrow: "0x1234" }, /"escrow" must be a 20-byte hex address/],
        [{ ...good, settler: undefined }, /"settler" must be a 20-byte hex address/],
        [{ ...good, chainId: "8453" }, /"chainId" must be a positive integer/],
        [{ ...good, deployBlock: -1 }, /"deployBlock" must be a non-negative integer/],
        [{ ...good, usdcIsTestToken: "yes" }, /"usdcIsTestToken" must be a boolean/],
        [{ ...good, network: "" }, /"network" must be a non-empty string/],
      ];
      for (const [json, message] of cases) {
        writeFileSync(file, JSON.stringify(json));
        expect(() => readDeployment(file)).to.throw(DeploymentFileError, message);
      }
    });

    it("refuses network names that would escape the directory", () => {
      expect(() => deploymentPath("../etc/passwd", dir)).to.throw(DeploymentFileError);
      expect(() => deploymentPath("", dir)).to.throw(DeploymentFileError);
    });
  });

  describe("verifyDeployment", () => {
    it("accepts a live deployment and explains why a stale or foreign one does not match", async () => {
      const { deployment, alice, publicClient } = await loadFixture(deployedFixture);
      expect(await verifyDeployment(publicClient, deployment)).to.deep.equal({ ok: true });
      const cases: [Deployment, RegExp][] = [
        [{ ...deployment, chainId: 31337 }, /chain id is 8453, the file is for 31337/],
        [{ ...deployment, escrow: getAddress(alice.account.address) }, /no contract at escrow/],
        [{ ...deployment, usdc: deployment.escrow }, /holds token/],
        [{ ...deployment, settler: getAddress(alice.account.address) }, /does not hold SETTLER_ROLE/],
        [{ ...deployment, usdc: zeroAddress }, /no contract at usdc/],
      ];
      for (const [stale, reason] of cases) {
        const result = await verifyDeployment(publicClient, stale);
        expect(result.ok).to.equal(false);
        expect(result.ok ? "" : result.reason).to.match(reason);
      }
    });
  });
});

async function expectDeployError(promise: Promise<unknown>, message: RegExp): Promise<void> {
  const error = await promise.then(
    () => expect.fail("expected a DeployError"),
    (e: unknown) => e,
  );
  expect(error).to.be.instanceOf(DeployError);
  expect((error as Error).message).to.match(message);
}
