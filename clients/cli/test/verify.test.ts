// In a clone the SDK is not built: its source stands in (clients/typescript/source.cjs).
import "../../typescript/source.cjs";
import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { expect } from "chai";
import { type ReceiptStack, startReceiptStack } from "../../../test/helpers/receipt-stack";
import { EXIT } from "../src/errors";
import { buildCli } from "./built-cli";

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

describe("skill-gateway verify against the local chain", function () {
  this.timeout(120_000);
  let s: ReceiptStack;
  let built: { launcher: string; dir: string };
  let dir: string;
  let callId: string;
  let batch: number;
  let savedFile: string;

  /** The built CLI as a child process, with the gateway's URL and key in its environment unless `env` replaces them. */
  const cli = (args: string[], env: NodeJS.ProcessEnv = { SKILL_GATEWAY_URL: s.stack.url, SKILL_GATEWAY_API_KEY: s.stack.key }) =>
    new Promise<Run>((resolve) => {
      const child = execFile(
        process.execPath,
        [built.launcher, ...args],
        { cwd: dir, env: { PATH: process.env.PATH, ...env } },
        (error, stdout, stderr) => resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
      child.stdin?.end("");
    });
  /** The saved receipt with `change` applied, written to a file of its own. */
  const editedFile = (name: string, change: (data: Record<string, any>) => void) => {
    const copy = JSON.parse(fs.readFileSync(savedFile, "utf8"));
    change(copy.data ?? copy);
    const file = path.join(dir, name);
    fs.writeFileSync(file, JSON.stringify(copy));
    return file;
  };

  before(async function () {
    [built, s] = await Promise.all([buildCli(), startReceiptStack()]);
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "sg-cli-verify-"));
    callId = await s.paidCall();
    await s.paidCall();
    batch = await s.settle();
    savedFile = path.join(dir, "receipt.json");
    // Saved as a user would: the gateway's whole answer, with curl.
    fs.writeFileSync(savedFile, JSON.stringify(await s.receipt(callId)));
  });
  after(async function () {
    await s?.close();
    if (built) fs.rmSync(built.dir, { recursive: true, force: true });
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it("verify <call-id> --rpc fetches the receipt once and proves it: amount, seller share, fee, batch, block, exit 0", async function () {
    const run = await cli(["verify", callId, "--rpc", s.rpc.url]);
    expect(run.code, run.stderr).to.equal(EXIT.ok);
    expect(run.stdout).to.include(`Proven: call ${callId} is in batch ${batch} of the escrow ${s.chain.deployment.escrow} on chain 8453.`);
    expect(run.stdout).to.match(/ {2}amount {8}\$0\.001 USDC, paid by 0x[0-9a-fA-F]{40}\n/);
    expect(run.stdout).to.include("  seller share  $0.0009 USDC");
    expect(run.stdout).to.include("  platform fee  $0.0001 USDC");
    expect(run.stdout).to.match(/ {2}block {9}\d+ \(tx 0x[0-9a-f]{64}, \d+ confirmations\)/);
  });

  it("--json prints what is proven, amounts exact; --save keeps the receipt for later", async function () {
    const saveTo = path.join(dir, "fetched.json");
    const run = await cli(["verify", callId, "--rpc", s.rpc.url, "--json", "--save", saveTo]);
    expect(run.code, run.stderr).to.equal(EXIT.ok);
    const out = JSON.parse(run.stdout);
    expect(out).to.deep.include({
      proven: true,
      call_id: callId,
      amount: "0.001",
      amount_base_units: "1000",
      seller_share: "0.0009",
      platform_fee: "0.0001",
      batch_number: batch,
      chain_id: 8453,
      escrow: s.chain.deployment.escrow,
    });
    expect(out.block_number).to.be.a("number");
    expect(JSON.parse(fs.readFileSync(saveTo, "utf8"))).to.include({ call_id: callId, status: "settled" });
  });

  it("each failure has its own exit code and one clear line; --json gives its code", async function () {
    const tampered = await cli(["verify", "--receipt", editedFile("amount.json", (d) => (d.receipt.amount = "5000")), "--rpc", s.rpc.url]);
    expect(tampered.code).to.equal(EXIT.receiptTampered);
    expect(tampered.stderr).to.match(/^skill-gateway: Not proven: The receipt's fields do not hash to its leaf /);
    expect(tampered.stdout).to.equal("");

    const sibling = editedFile("sibling.json", (d) => (d.proof[0] = `0x${"cd".repeat(32)}`));
    const wrong = await cli(["verify", "--receipt", sibling, "--rpc", s.rpc.url, "--json"]);
    expect(wrong.code).to.equal(EXIT.receiptWrongProof);
    expect(JSON.parse(wrong.stderr)).to.include({ code: "wrong_proof" });

    const waiting = await s.paidCall();
    const unsettled = await cli(["verify", waiting, "--rpc", s.rpc.url]);
    expect(unsettled.code).to.equal(EXIT.receiptUnsettled);
    expect(unsettled.stderr).to.equal(
      `skill-gateway: Not proven: Call ${waiting} is charged but not settled yet: its batch has not been posted; ask again later.\n`,
    );

    const down = await cli(["verify", "--receipt", savedFile, "--rpc", "http://127.0.0.1:1"]);
    expect(down.code).to.equal(EXIT.chainUnreachable);
    expect(down.stderr).to.match(/^skill-gateway: Not proven: The chain at http:\/\/127\.0\.0\.1:1 did not answer: /);

    const elsewhere = await cli(["verify", "--receipt", savedFile, "--rpc", s.rpc.url, "--escrow", s.chain.deployment.usdc]);
    expect(elsewhere.code).to.equal(EXIT.wrongChain);

    const notJson = path.join(dir, "not.json");
    fs.writeFileSync(notJson, "receipt?");
    const invalid = await cli(["verify", "--receipt", notJson, "--rpc", s.rpc.url]);
    expect(invalid.code).to.equal(EXIT.usage);
    expect(invalid.stderr).to.include("is not JSON");

    const both = await cli(["verify", callId, "--receipt", savedFile, "--rpc", s.rpc.url]);
    expect(both.code).to.equal(EXIT.usage);
    const noRpc = await cli(["verify", callId]);
    expect(noRpc.code).to.equal(EXIT.usage);
    expect(noRpc.stderr).to.include("--rpc <url>");
    // Exit codes do not collide: each failure is told apart by a script.
    expect(
      new Set([EXIT.receiptTampered, EXIT.receiptWrongProof, EXIT.receiptUnsettled, EXIT.chainUnreachable, EXIT.wrongChain]).size,
    ).to.equal(5);
  });

  it("verify --help names the options and the exit codes", async function () {
    const help = await cli(["verify", "--help"]);
    expect(help.code).to.equal(EXIT.ok);
    expect(help.stdout).to.include("--receipt <file>");
    expect(help.stdout).to.include(`${EXIT.receiptTampered} tampered`);
  });

  // Last: it stops the gateway.
  it("verify --receipt <file> --rpc proves a saved receipt with the gateway stopped and no key or URL at all", async function () {
    await s.stopGateway();
    const run = await cli(["verify", "--receipt", savedFile, "--rpc", s.rpc.url], {});
    expect(run.code, run.stderr).to.equal(EXIT.ok);
    expect(run.stdout).to.include(`Proven: call ${callId} is in batch ${batch}`);
    // Fetching needs the gateway: by call id it now fails as any command does when it cannot reach it.
    const byId = await cli(["verify", callId, "--rpc", s.rpc.url], { SKILL_GATEWAY_URL: s.stack.url, SKILL_GATEWAY_API_KEY: s.stack.key });
    expect(byId.code).to.equal(EXIT.gateway);
  });
});
