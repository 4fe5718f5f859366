import { expect } from "chai";
import hre from "hardhat";
import { type Address, getAddress } from "viem";
import { linkAddress } from "../../server/settlement/addresses";
import { loadArtifact } from "../../server/devstack/deploy";
import { type IssuedVoucher, VoucherIssuer } from "../../server/settlement/vouchers";
import { openDatabase } from "../../server/db/db";
import { SqliteDatabase } from "../../server/db/sqlite-database";
import { SCHEMA } from "../../server/schema";
import { assertBalanced } from "../../server/ledger/invariants";
import { Ledger } from "../../server/ledger/ledger";
import { type LocalChain, USDC, startLocalChain } from "../helpers/chain";
import { DEFAULT_VOUCHER_LIMITS } from "../helpers/vouchers";

describe("withdrawal vouchers", function () {
  this.timeout(60_000);
  let chain: LocalChain;
  let db: SqliteDatabase;
  let ledger: Ledger;
  let issuer: VoucherIssuer;
  let snapshot: string;
  const escrowAbi = loadArtifact("SkillEscrow").abi;
  const usdcAbi = loadArtifact("TestUSDC").abi;

  const chainTimeSec = async () => Number((await chain.publicClient.getBlock({ blockTag: "latest" })).timestamp);
  const wallet = async (address: Address) => (await hre.viem.getWalletClients()).find((w) => w.account.address === address)!;
  const redeem = async (issued: IssuedVoucher) => {
    const w = await wallet(chain.address("alice"));
    return w.writeContract({
      address: issued.escrow,
      abi: escrowAbi,
      functionName: "withdrawWithVoucher",
      args: [issued.voucher, issued.signature],
      account: w.account,
      chain: w.chain,
    });
  };
  const walletUsdc = (address: Address) =>
    chain.publicClient.readContract({
      address: chain.deployment.usdc,
      abi: usdcAbi,
      functionName: "balanceOf",
      args: [address],
    }) as Promise<bigint>;

  before(async () => {
    chain = await startLocalChain();
    snapshot = await chain.snapshot();
  });
  after(async () => {
    await chain.revert(snapshot);
  });

  beforeEach(async () => {
    db = new SqliteDatabase(openDatabase(":memory:", SCHEMA));
    ledger = await Ledger.open(db);
    await ledger.ensureAccount({ id: "alice", kind: "user", name: "Alice" });
    await ledger.ensureAccount({ id: "seller", kind: "seller", name: "Seller" });
    const linked = await linkAddress(ledger, { accountId: "alice", address: chain.address("alice") });
    expect(linked.ok).to.equal(true);
    await chain.deposit("alice", 10n * USDC);
    await ledger.credit("alice", 10n * USDC, "deposit", "test deposit");
    const signer = (await hre.viem.getWalletClients())[2];
    issuer = new VoucherIssuer({
      ledger,
      signer,
      escrowAddress: chain.deployment.escrow,
      chainId: 8453,
      ttlSec: 600,
      limits: DEFAULT_VOUCHER_LIMITS,
      deployBlock: chain.deployment.deployBlock,
    });
  });
  afterEach(async () => {
    await assertBalanced(db);
    await db.close();
  });

  it("debits the ledger at issue, and the escrow pays the voucher to the account's own wallet", async () => {
    const before = await walletUsdc(chain.address("alice"));
    const escrowBefore = await chain.escrowBalance(chain.address("alice"));
    const result = await issuer.issue("alice", { amountMicros: 4n * USDC, nowSec: await chainTimeSec() });
    if (!result.ok) throw new Error(result.reason);
    expect((await ledger.balance("alice")).availableMicros).to.equal(6n * USDC);
    expect(result.issued.voucher).to.include({ amount: 4n * USDC, account: getAddress(chain.address("alice")) });

    await chain.receipt(await redeem(result.issued));
    expect(await walletUsdc(chain.address("alice"))).to.equal(before + 4n * USDC);
    expect(await chain.escrowBalance(chain.address("alice"))).to.equal(escrowBefore - 4n * USDC);
    expect(await issuer.sweep(chain.publicClient)).to.deep.equal({ redeemed: 1, returned: 0 });
    expect((await ledger.balance("alice")).availableMicros).to.equal(6n * USDC);
  });

  it("withdraws all the available balance by default, never what calls hold", async () => {
    const held = await ledger.hold({
      accountId: "alice",
      sellerAccountId: "seller",
      skillId: "x",
      charge: { chargedMicros: USDC, sellerMicros: 900_000n, feeMicros: 100_000n },
    });
    expect(held.ok).to.equal(true);
    const result = await issuer.issue("alice", { nowSec: await chainTimeSec() });
    if (!result.ok) throw new Error(result.reason);
    expect(result.issued.voucher.amount).to.equal(9n * USDC);
    expect(await ledger.balance("alice")).to.deep.equal({ availableMicros: 0n, heldMicros: USDC });
  });

  it("refuses more than the available balance, and nothing at all, writing nothing", async () => {
    const tooMuch = await issuer.issue("alice", { amountMicros: 11n * USDC });
    expect(tooMuch).to.deep.equal({ ok: false, reason: "insufficient_balance", availableMicros: 10n * USDC });
    await issuer.issue("alice", { nowSec: await chainTimeSec() });
    expect(await issuer.issue("alice")).to.deep.include({ ok: false, reason: "nothing_to_withdraw" });
    expect(await db.value("SELECT COUNT(*) FROM vouchers")).to.equal(1n);
  });

  it("gives every voucher a fresh random nonce, so none collides with one the escrow has seen", async () => {
    const nowSec = await chainTimeSec();
    const nonces = new Set<bigint>();
    for (let i = 0; i < 3; i++) {
      const r = await issuer.issue("alice", { amountMicros: USDC, nowSec });
      if (!r.ok) throw new Error(r.reason);
      expect(r.issued.voucher.nonce > 0n && r.issued.voucher.nonce < 2n ** 63n).to.equal(true);
      nonces.add(r.issued.voucher.nonce);
    }
    expect(nonces.size).to.equal(3);
  });

  it("gives an unredeemed voucher back once the chain's clock passes its deadline, and the escrow then refuses it", async () => {
    const result = await issuer.issue("alice", { amountMicros: 3n * USDC, nowSec: await chainTimeSec() });
    if (!result.ok) throw new Error(result.reason);
    expect(await issuer.sweep(chain.publicClient)).to.deep.equal({ redeemed: 0, returned: 0 });
    await hre.network.provider.request({ method: "evm_increaseTime", params: [601] });
    await chain.mine();
    expect(await issuer.sweep(chain.publicClient)).to.deep.equal({ redeemed: 0, returned: 1 });
    expect((await ledger.balance("alice")).availableMicros).to.equal(10n * USDC);
    let reverted = false;
    await redeem(result.issued).catch(() => (reverted = true));
    expect(reverted, "an expired voucher was paid").to.equal(true);
    expect(await issuer.sweep(chain.publicClient)).to.deep.equal({ redeemed: 0, returned: 0 });
  });

  it("gives an expired voucher back once when two sweeps run at the same time", async () => {
    const result = await issuer.issue("alice", { amountMicros: 3n * USDC, nowSec: await chainTimeSec() });
    if (!result.ok) throw new Error(result.reason);
    expect((await ledger.balance("alice")).availableMicros).to.equal(7n * USDC);
    await hre.network.provider.request({ method: "evm_increaseTime", params: [601] });
    await chain.mine();
    const signer = (await hre.viem.getWalletClients())[2];
    const other = new VoucherIssuer({
      ledger,
      signer,
      escrowAddress: chain.deployment.escrow,
      chainId: 8453,
      ttlSec: 600,
      limits: DEFAULT_VOUCHER_LIMITS,
      deployBlock: chain.deployment.deployBlock,
    });

    const sweeps = await Promise.all([issuer.sweep(chain.publicClient), other.sweep(chain.publicClient)]);

    expect(sweeps.map((s) => s.returned).sort()).to.deep.equal([0, 1]);
    expect((await ledger.balance("alice")).availableMicros).to.equal(10n * USDC);
  });

  it("refuses an account without an escrow address, and an address that is not the account's", async () => {
    await ledger.ensureAccount({ id: "bob", kind: "user", name: "Bob" });
    await ledger.credit("bob", USDC, "deposit");
    expect(await issuer.issue("bob")).to.deep.equal({ ok: false, reason: "no_address" });
    expect(await issuer.issue("alice", { address: chain.address("bob") })).to.deep.equal({ ok: false, reason: "address_not_yours" });
  });
});
