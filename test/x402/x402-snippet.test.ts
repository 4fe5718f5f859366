import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { expect } from "chai";
import hre from "hardhat";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { FUND_MAX_MICROS, fundPayer, isLoopbackUrl, parseFundArguments } from "../../scripts/fund";
import { linkAddress } from "../../server/settlement/addresses";
import { docSnippet } from "../helpers/doc-snippets";
import { type LocalChain, gatewayChain, startLocalChain } from "../helpers/chain";
import { type TestStack, startStack } from "../helpers/gateway";

/*
 * docs/clients.md's x402 snippet, run with `node` as written, paying from a wallet funded by `npm run fund`'s own
 * function on the local chain: the way a developer pays per call from plain JavaScript.
 */

const DOC = path.join(__dirname, "..", "..", "docs", "clients.md");
const REPO = path.join(__dirname, "..", "..");

describe("x402 from plain JavaScript (docs/clients.md and docs/x402.md, x402.mjs)", function () {
  this.timeout(120_000);
  let chain: LocalChain;
  let snapshot: string;
  let stack: TestStack;
  let dir: string;

  before(async function () {
    chain = await startLocalChain();
    snapshot = await chain.snapshot();
    const wallets = await hre.viem.getWalletClients();
    stack = await startStack({ gateway: { chain: await gatewayChain(chain) } });
    expect((await linkAddress(stack.gw.ledger, { accountId: stack.sellerId, address: wallets[7].account.address })).ok).to.equal(true);
    await stack.addSkill("uppercase", "/echo", { priceMicros: 2_000n });
    // The snippet's imports (@x402/fetch, @x402/evm, viem) are the repository's: a project of its own would install them.
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "sg-x402-snippet-"));
    fs.symlinkSync(fs.realpathSync(path.join(REPO, "node_modules")), path.join(dir, "node_modules"), "dir");
  });
  after(async function () {
    await stack?.close();
    if (snapshot) await chain.revert(snapshot);
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it("npm run fund's mint gives a fresh payer test USDC, and the snippet pays for a call with it", async function () {
    const payerKey = generatePrivateKey();
    const payer = privateKeyToAccount(payerKey).address;
    const [deployer] = await hre.viem.getWalletClients();
    const funded = await fundPayer({
      publicClient: chain.publicClient,
      walletClient: deployer,
      usdc: chain.deployment.usdc,
      ...parseFundArguments([payer, "0.5"]),
    });
    expect(funded.balanceMicros).to.equal(500_000n);

    // docs/x402.md shows the same snippet: one text, so running it runs both.
    expect(docSnippet(path.join(REPO, "docs", "x402.md"), "x402.mjs")).to.equal(docSnippet(DOC, "x402.mjs"));
    fs.writeFileSync(path.join(dir, "x402.mjs"), docSnippet(DOC, "x402.mjs"));
    const run = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) =>
      execFile(
        process.execPath,
        ["x402.mjs"],
        {
          cwd: dir,
          env: { PATH: process.env.PATH, SKILL_GATEWAY_URL: stack.url, PAYER_KEY: payerKey, USDC_ADDRESS: chain.deployment.usdc },
        },
        (error, stdout, stderr) => resolve({ code: error ? 1 : 0, stdout, stderr }),
      ),
    );
    expect(run.code, run.stderr).to.equal(0);
    const [answer, transaction] = run.stdout.trim().split("\n");
    expect(JSON.parse(answer)).to.deep.include({ success: true, data: { text: "hi" } });
    expect(transaction).to.match(/^0x[0-9a-f]{64}$/);
    expect(await chain.usdcOf(payer)).to.equal(500_000n - 2_000n);
  });

  it("npm run fund refuses what it cannot mint, in one line", function () {
    const address = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";
    expect(parseFundArguments([address, "5"])).to.deep.equal({ to: address, amountMicros: 5_000_000n });
    expect(parseFundArguments([address.toLowerCase(), "0.000001"]).amountMicros).to.equal(1n);
    for (const [args, message] of [
      [[], /^usage: npm run fund -- <address> <usd>/],
      [["0x123", "5"], /^"0x123" is not an address/],
      [[address, "five"], /^"five" is not a USD amount with at most 6 decimals/],
      [[address, "0.0000001"], /is not a USD amount with at most 6 decimals/],
      [[address, "0"], /^The amount must be above 0/],
      [[address, "1000.000001"], /^At most \$1000 per run/],
    ] as const) {
      expect(() => parseFundArguments(args), JSON.stringify(args)).to.throw(message);
    }
    expect(FUND_MAX_MICROS).to.equal(1_000_000_000n);
    expect([
      isLoopbackUrl("http://127.0.0.1:8545"),
      isLoopbackUrl("http://localhost:8545"),
      isLoopbackUrl("https://mainnet.base.org"),
    ]).to.deep.equal([true, true, false]);
  });
});
