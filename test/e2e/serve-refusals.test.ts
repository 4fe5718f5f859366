import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { expect } from "chai";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { type Deployment, deployContracts, writeDeployment } from "../../server/devstack/deploy";
import { DEV_ACCOUNT_INDEX, type LocalNode, devAccount, devPrivateKey, startLocalNode } from "../../server/devstack/local-node";
import { runServeToExit } from "../helpers/serve-process";
import { loadServeConfig } from "../../server/config";
import { check, refusalLine } from "../../server/main";

/** A port nothing listens on: bound, then closed. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe("npm run serve refuses a configuration that does not fit", function () {
  this.timeout(120_000);
  let node: LocalNode;
  let deployment: Deployment;
  let dir: string;
  /** Writes `deployment` with `changes` to a file of its own and returns its path. */
  const deploymentFile = (name: string, changes: Partial<Deployment> = {}) => {
    const file = path.join(dir, `${name}.json`);
    writeDeployment(file, { ...deployment, ...changes });
    return file;
  };
  /** A configuration that starts: the chain, its deployment and the keys the deployment gave its roles. */
  const good = () => ({
    CHAIN_RPC_URL: node.rpcUrl,
    DEPLOYMENT_FILE: deploymentFile("good"),
    DB_PATH: path.join(dir, "gateway.db"),
    PORT: "0",
    SETTLER_PRIVATE_KEY: devPrivateKey(DEV_ACCOUNT_INDEX.settler),
    VOUCHER_SIGNER_PRIVATE_KEY: devPrivateKey(DEV_ACCOUNT_INDEX.voucherSigner),
  });

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "skill-gw-serve-refusals-"));
    node = await startLocalNode();
    deployment = await deployContracts({
      network: "serve-test",
      publicClient: node.publicClient,
      walletClient: node.walletFor(devAccount(DEV_ACCOUNT_INDEX.deployer)),
      settler: devAccount(DEV_ACCOUNT_INDEX.settler).address,
      voucherSigner: devAccount(DEV_ACCOUNT_INDEX.voucherSigner).address,
    });
  });
  after(async () => {
    await node?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const cases: [string, () => Promise<Record<string, string>> | Record<string, string>, RegExp][] = [
    [
      "a missing settler key",
      () => {
        const { SETTLER_PRIVATE_KEY: _, ...rest } = good();
        return rest;
      },
      /^npm run serve refused to start: SETTLER_PRIVATE_KEY is required by npm run serve$/,
    ],
    [
      "a malformed voucher-signer key",
      () => ({ ...good(), VOUCHER_SIGNER_PRIVATE_KEY: "0x12345" }),
      /^npm run serve refused to start: VOUCHER_SIGNER_PRIVATE_KEY must be 0x followed by 64 hex digits$/,
    ],
    [
      "a deployment file for another chain id",
      () => ({ ...good(), DEPLOYMENT_FILE: deploymentFile("other-chain", { chainId: 31337 }) }),
      /^npm run serve refused to start: DEPLOYMENT_FILE \S+other-chain\.json does not match the chain at CHAIN_RPC_URL: chain id is 8453, the file is for 31337$/,
    ],
    [
      "a deployment whose escrow address has no code",
      () => ({ ...good(), DEPLOYMENT_FILE: deploymentFile("no-code", { escrow: privateKeyToAccount(generatePrivateKey()).address }) }),
      /^npm run serve refused to start: DEPLOYMENT_FILE \S+no-code\.json does not match the chain at CHAIN_RPC_URL: no contract at escrow 0x[0-9a-fA-F]{40}$/,
    ],
    [
      "a settler key that is not the deployment's settler",
      () => ({ ...good(), SETTLER_PRIVATE_KEY: devPrivateKey(DEV_ACCOUNT_INDEX.demoBuyer) }),
      /^npm run serve refused to start: SETTLER_PRIVATE_KEY is the key of 0x[0-9a-fA-F]{40}, but the deployment file's settler is 0x[0-9a-fA-F]{40}$/,
    ],
    [
      "a chain that does not answer",
      async () => ({ ...good(), CHAIN_RPC_URL: `http://127.0.0.1:${await closedPort()}` }),
      /^npm run serve refused to start: CHAIN_RPC_URL: http:\/\/127\.0\.0\.1:\d+ did not answer the deployment check \(.+\)$/,
    ],
    [
      "a funding key for a token that is not a test token",
      () => ({
        ...good(),
        DEPLOYMENT_FILE: deploymentFile("real-token", { usdcIsTestToken: false }),
        FUNDING_PRIVATE_KEY: devPrivateKey(DEV_ACCOUNT_INDEX.deployer),
      }),
      /^npm run serve refused to start: FUNDING_PRIVATE_KEY funds sandbox card top-ups by minting test USDC, but the deployment's token 0x[0-9a-fA-F]{40} is not a test token$/,
    ],
    [
      "embedded wallets on a deployment that has no account-abstraction contracts",
      () => ({
        ...good(),
        BUNDLER_URL: "http://127.0.0.1:1/rpc",
        PAYMASTER_SIGNER_PRIVATE_KEY: generatePrivateKey(),
        WALLET_ENCRYPTION_KEY: "42".repeat(32),
      }),
      /^npm run serve refused to start: DEPLOYMENT_FILE \S+good\.json has no "accountAbstraction" section, which embedded wallets \(BUNDLER_URL\) need$/,
    ],
  ];
  /** What `npm run serve` would print for `env`: its refusal line, or what else happened. */
  async function refusalFor(env: Record<string, string>): Promise<string> {
    try {
      await check(loadServeConfig(env));
      return "(started)";
    } catch (error) {
      return refusalLine(error) ?? `(failed: ${(error as Error).message})`;
    }
  }

  // Every case through serve's own checks, in this process (each would otherwise be a process of its own: about
  // 3 s of CPU to load the gateway); two of them (one refused by the settings, one by the chain) as `npm run serve`
  // itself, for the exit code, the one line on stderr and the database left untouched.
  for (const [what, settings, line] of cases) {
    it(`refuses ${what} with one line naming the setting`, async () => {
      const refusal = await refusalFor(await settings());
      expect(refusal.split("\n"), refusal).to.have.length(1);
      expect(refusal).to.match(line);
    });
  }
  for (const [what, settings, line] of cases.filter(
    ([what]) => what === "a missing settler key" || what === "a deployment file for another chain id",
  )) {
    it(`exits 78 with one line naming the setting, and touches no database, for ${what} (npm run serve)`, async () => {
      const env = await settings();
      const exit = await runServeToExit(env);
      expect(exit.code, exit.stderr).to.equal(78);
      expect(exit.stdout).to.equal("");
      const lines = exit.stderr.trimEnd().split("\n");
      expect(lines, exit.stderr).to.have.length(1);
      expect(lines[0]).to.match(line);
      expect(fs.existsSync(env.DB_PATH ?? path.join(dir, "gateway.db"))).to.equal(false);
    });
  }
});
