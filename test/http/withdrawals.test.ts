import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { expect } from "chai";
import hre from "hardhat";
import { getAddress } from "viem";
import { linkAddress } from "../../server/settlement/addresses";
import { loadArtifact } from "../../server/devstack/deploy";
import { loadConfig } from "../../server/config";
import { type RunningGateway, startGateway } from "../../server/index";
import { assertBalanced } from "../../server/ledger/invariants";
import { settlementStores } from "../../server/settlement/store";
import { type LocalChain, USDC, startLocalChain } from "../helpers/chain";

describe("POST /v1/withdrawals", function () {
  this.timeout(60_000);
  let chain: LocalChain;
  let snapshot: string;
  let dir: string;
  let gw: RunningGateway;
  let key: string;

  const post = async (body: unknown, k: string | null = key) => {
    const res = await fetch(`${gw.url}/v1/withdrawals`, {
      method: "POST",
      headers: { "content-type": "application/json", ...(k ? { authorization: `Bearer ${k}` } : {}) },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as any };
  };

  before(async () => {
    chain = await startLocalChain();
    snapshot = await chain.snapshot();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "skill-gw-withdraw-"));
    const signer = (await hre.viem.getWalletClients())[2];
    gw = await startGateway(loadConfig({}, { port: 0, dbPath: path.join(dir, "gateway.db"), logLevel: "silent" }), {
      log: () => {},
      chain: {
        publicClient: chain.publicClient,
        deployBlock: chain.deployment.deployBlock,
        voucherSigner: signer,
        escrowAddress: chain.deployment.escrow,
        chainId: 8453,
      },
    });
    await gw.ledger.ensureAccount({ id: "alice", kind: "user", name: "Alice" });
    expect((await linkAddress(gw.ledger, { accountId: "alice", address: chain.address("alice") })).ok).to.equal(true);
    await chain.deposit("alice", 5n * USDC);
    await gw.ledger.credit("alice", 5n * USDC, "deposit", "test deposit");
    key = (await gw.keys.create("alice", { scopes: ["funds:withdraw", "usage:read"] })).key;
  });
  after(async () => {
    await gw.close();
    fs.rmSync(dir, { recursive: true, force: true });
    await chain.revert(snapshot);
  });

  it("returns a voucher the escrow pays, and takes the amount off the balance at once", async () => {
    const res = await post({ amount: "2.5" });
    expect(res.status).to.equal(200);
    expect(res.body.success).to.equal(true);
    const { voucher, signature, escrow, chain_id, amount } = res.body.data;
    expect(amount).to.equal(2.5);
    expect(voucher).to.include({ account: getAddress(chain.address("alice")), amount: "2500000" });
    expect(chain_id).to.equal(8453);

    const balance = await (await fetch(`${gw.url}/v1/balance`, { headers: { authorization: `Bearer ${key}` } })).json();
    expect((balance as any).data.available).to.equal(2.5);

    const alice = (await hre.viem.getWalletClients()).find((w) => w.account.address === chain.address("alice"))!;
    const tx = await alice.writeContract({
      address: escrow,
      abi: loadArtifact("SkillEscrow").abi,
      functionName: "withdrawWithVoucher",
      args: [
        { account: voucher.account, amount: BigInt(voucher.amount), nonce: BigInt(voucher.nonce), deadline: BigInt(voucher.deadline) },
        signature,
      ],
      account: alice.account,
      chain: alice.chain,
    });
    expect((await chain.receipt(tx)).status).to.equal("success");
    expect(await chain.escrowBalance(chain.address("alice"))).to.equal(2_500_000n);
    await assertBalanced(gw.db);
  });

  it("refuses more than is available with 402, and a malformed amount with 400, charging nothing", async () => {
    const tooMuch = await post({ amount: "3" });
    expect(tooMuch.status).to.equal(402);
    expect(tooMuch.body).to.include({ success: false, code: "insufficient_balance" });
    const malformed = await post({ amount: "1.0000001" });
    expect(malformed.status).to.equal(400);
    expect((await gw.ledger.balance("alice")).availableMicros).to.equal(2_500_000n);
  });

  it("needs an API key", async () => {
    expect((await post({}, null)).status).to.equal(401);
  });

  it("lists the account's vouchers", async () => {
    const res = await fetch(`${gw.url}/v1/withdrawals`, { headers: { authorization: `Bearer ${key}` } });
    const body = (await res.json()) as any;
    expect(body.data).to.have.length(1);
    expect(body.data[0]).to.include({ amount: 2.5, status: "issued" });
  });
});

describe("POST /v1/withdrawals: the account's bounds (issue 23)", function () {
  this.timeout(60_000);
  let chain: LocalChain;
  let snapshot: string;
  let dir: string;
  let gw: RunningGateway;
  let key: string;

  const post = async (body: unknown) => {
    const res = await fetch(`${gw.url}/v1/withdrawals`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
      body: JSON.stringify(body),
    });
    return { status: res.status, retryAfter: res.headers.get("retry-after"), body: (await res.json()) as any };
  };
  /** Marks a voucher redeemed, as the sweep does once it reads its VoucherRedeemed log. */
  const redeemed = (nonce: string) =>
    settlementStores(gw.db).vouchers.settle(chain.address("bob").toLowerCase(), BigInt(nonce), "redeemed");

  before(async () => {
    chain = await startLocalChain();
    snapshot = await chain.snapshot();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "skill-gw-withdraw-bounds-"));
    const signer = (await hre.viem.getWalletClients())[2];
    const config = loadConfig({}, { port: 0, dbPath: path.join(dir, "gateway.db"), logLevel: "silent" });
    gw = await startGateway(
      { ...config, vouchersOpenPerAccountMax: 2, voucherRateLimitPerHour: 3 },
      {
        log: () => {},
        chain: {
          publicClient: chain.publicClient,
          deployBlock: chain.deployment.deployBlock,
          voucherSigner: signer,
          escrowAddress: chain.deployment.escrow,
          chainId: 8453,
        },
      },
    );
    await gw.ledger.ensureAccount({ id: "bob", kind: "user", name: "Bob" });
    expect((await linkAddress(gw.ledger, { accountId: "bob", address: chain.address("bob") })).ok).to.equal(true);
    await gw.ledger.credit("bob", 5n * USDC, "deposit", "test deposit");
    key = (await gw.keys.create("bob", { scopes: ["funds:withdraw", "usage:read"] })).key;
  });
  after(async () => {
    await gw.close();
    fs.rmSync(dir, { recursive: true, force: true });
    await chain.revert(snapshot);
  });

  it("refuses a voucher under the minimum with 400 amount_below_minimum, naming the minimum, and takes nothing", async () => {
    const dust = await post({ amount: "0.000001" });
    expect(dust.status).to.equal(400);
    expect(dust.body).to.include({ success: false, code: "amount_below_minimum" });
    expect(dust.body.error).to.include("at least $0.01");
    expect((await gw.ledger.balance("bob")).availableMicros).to.equal(5n * USDC);
  });

  it("refuses one open voucher more than the account may hold with 429 rate_limited, until the first expires", async () => {
    for (let i = 0; i < 2; i++) expect((await post({ amount: "0.5" })).status).to.equal(200);
    const third = await post({ amount: "0.5" });
    expect(third.status).to.equal(429);
    expect(third.body).to.include({ success: false, code: "rate_limited" });
    expect(third.body.error).to.include("already holds 2 open withdrawal vouchers");
    // The first voucher's deadline is an hour away: it stops counting the second after.
    expect(Number(third.retryAfter)).to.be.within(3_590, 3_601);
    expect(third.body.retry_after_sec).to.equal(Number(third.retryAfter));
    expect((await gw.ledger.balance("bob")).availableMicros).to.equal(4n * USDC);
  });

  it("refuses one voucher more in an hour than the account may be issued with 429 rate_limited, until the first leaves the hour", async () => {
    const open = (await (await fetch(`${gw.url}/v1/withdrawals`, { headers: { authorization: `Bearer ${key}` } })).json()) as any;
    await redeemed(open.data[0].nonce);
    expect((await post({ amount: "0.5" })).status, "the third of the hour, with an open place").to.equal(200);
    await redeemed(open.data[1].nonce);

    const fourth = await post({ amount: "0.5" });
    expect(fourth.status).to.equal(429);
    expect(fourth.body).to.include({ success: false, code: "rate_limited" });
    expect(fourth.body.error).to.include("was issued 3 withdrawal vouchers in the last hour");
    expect(Number(fourth.retryAfter)).to.be.within(3_590, 3_600);
    expect((await gw.ledger.balance("bob")).availableMicros).to.equal(3_500_000n);
    await assertBalanced(gw.db);
  });
});

describe("POST /v1/withdrawals without a chain", () => {
  it("answers 503 in the envelope", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "skill-gw-nochain-"));
    const gw = await startGateway(loadConfig({}, { port: 0, dbPath: path.join(dir, "gateway.db"), logLevel: "silent" }), { log: () => {} });
    try {
      await gw.ledger.ensureAccount({ id: "bob", kind: "user", name: "Bob" });
      const { key } = await gw.keys.create("bob", { scopes: ["funds:withdraw"] });
      const res = await fetch(`${gw.url}/v1/withdrawals`, { method: "POST", headers: { authorization: `Bearer ${key}` }, body: "{}" });
      expect(res.status).to.equal(503);
      expect(await res.json()).to.include({ success: false, code: "chain_not_configured" });
    } finally {
      await gw.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
