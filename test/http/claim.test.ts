import { expect } from "chai";
import { getAddress, parseAbi, type Address, type Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { gatewayPaymasterAbi } from "../../server/chain/abi";
import { linkAddress } from "../../server/settlement/addresses";
import { DEV_ACCOUNT_INDEX, devAccount } from "../../server/devstack/local-node";
import { type AaStack, gatewayOptionsFor, startAaStack } from "../helpers/aa-stack";
import { type TestStack, startStack } from "../helpers/gateway";
import { type TestSession, send, sessionFor, signedIn } from "../helpers/session";

const ESCROW = parseAbi(["function earnings(address seller) view returns (uint256)", "function balanceOf(address) view returns (uint256)"]);

/**
 * POST /v1/seller/claim (a server-owned embedded wallet) and /v1/seller/claim/prepare + /submit (a SIWE-owned
 * one), on a real `hardhat node` with the real Alto bundler: a seller lists a skill, a buyer who topped up on-chain
 * pays for calls, the settler posts the batch, and the seller's wallet claims its 90% through a sponsored
 * UserOperation.
 */
describe("POST /v1/seller/claim", function () {
  this.timeout(180_000);
  let aa: AaStack;
  let stack: TestStack;
  let buyerKey: string;

  const usdcOf = (address: Address) =>
    aa.node.publicClient.readContract({ address: aa.deployment.usdc, abi: ESCROW, functionName: "balanceOf", args: [address] });
  const claimable = (address: Address) =>
    aa.node.publicClient.readContract({ address: aa.deployment.escrow, abi: ESCROW, functionName: "earnings", args: [address] });
  const paymasterDeposit = () =>
    aa.node.publicClient.readContract({ address: aa.aa.paymaster, abi: gatewayPaymasterAbi, functionName: "getDeposit" });
  const pollIndexer = async () => {
    await stack.gw.moneyPath!.indexer.poll();
    await stack.gw.moneyPath!.indexer.poll();
  };

  /** A session of an account with its embedded wallet (server-owned for e-mail, owner-signed for SIWE). */
  async function seller(provider: "email" | "siwe", subject: string, beforeWallet?: (accountId: string) => Promise<void>) {
    const signIn = await stack.gw.sessions.signIn(provider, subject);
    if (!signIn.ok) throw new Error(signIn.reason);
    await beforeWallet?.(signIn.accountId);
    const wallet = await stack.gw.wallets!.ensureFor(signIn.accountId);
    const { token, csrfToken } = await stack.gw.sessions.issue(signIn.accountId);
    return { session: sessionFor(stack, signIn.accountId, token, csrfToken), wallet };
  }

  /** Lists a skill as `session` and has the buyer pay for `calls` calls of it; then the settler posts the batch. */
  async function earn(session: TestSession, slug: string, price: string, calls: number): Promise<void> {
    const created = await session.request("POST", "/v1/seller/skills", {
      slug,
      name: slug,
      price,
      backend_url: `${stack.backend.url}/echo`,
    });
    if (created.status !== 201 && created.body?.code !== "slug_taken") throw new Error(JSON.stringify(created.body));
    for (let i = 0; i < calls; i++) {
      const call = await stack.post("/v1/call", { skill_id: slug, input: { i } }, { key: buyerKey });
      expect(call.status, JSON.stringify(call.body)).to.equal(200);
    }
    const run = await stack.gw.moneyPath!.settler!.runOnce();
    expect(run.calls).to.be.greaterThan(0);
  }

  before(async () => {
    aa = await startAaStack();
    const options = gatewayOptionsFor(aa);
    options.chain!.settlerWallet = aa.node.walletFor(devAccount(DEV_ACCOUNT_INDEX.settler));
    stack = await startStack({ buyerUsd: "0", gateway: options });

    // A buyer whose balance is real: USDC sent to its embedded wallet, swept into the escrow, credited.
    const buyer = await signedIn(stack, "buyer@example.com");
    const wallet = await stack.gw.wallets!.ensureFor(buyer.accountId);
    await aa.mint(wallet.address, 20_000_000n);
    expect(await stack.gw.wallets!.sweepAll()).to.equal(1);
    await pollIndexer();
    expect(await stack.available(buyer.accountId)).to.equal(20_000_000n);
    buyerKey = (await stack.gw.keys.create(buyer.accountId)).key;
  });
  after(async () => {
    await stack?.close();
    await aa?.stop();
  });

  describe("from a server-owned embedded wallet (e-mail sign-in)", () => {
    it("pays exactly the seller's 90% to the wallet, returns the transaction, and a second claim has nothing to claim and spends no gas", async () => {
      const { session, wallet } = await seller("email", "seller@example.com");
      expect(wallet.ownerKind).to.equal("server");
      await earn(session, "claim-echo", "0.5", 4); // 2.00 paid, 1.80 to the seller

      expect(await claimable(wallet.address)).to.equal(1_800_000n);
      const claimed = await session.request("POST", "/v1/seller/claim");
      expect(claimed.status, JSON.stringify(claimed.body)).to.equal(200);
      expect(claimed.body.data).to.include({ amount: 1.8, amount_base_units: "1800000", to: wallet.address });
      expect(claimed.body.data.tx_hash).to.match(/^0x[0-9a-f]{64}$/);
      expect(claimed.body.data.user_op_hash).to.match(/^0x[0-9a-f]{64}$/);
      const receipt = await aa.node.publicClient.getTransactionReceipt({ hash: claimed.body.data.tx_hash });
      expect(receipt.status).to.equal("success");
      expect(await usdcOf(wallet.address)).to.equal(1_800_000n);
      expect(await claimable(wallet.address)).to.equal(0n);
      const earnings = await session.request("GET", "/v1/earnings");
      expect(earnings.body.data).to.include({ settled: 1.8, claimable: 0, claimed: 1.8 });

      const depositBefore = await paymasterDeposit();
      const again = await session.request("POST", "/v1/seller/claim");
      expect(again.status).to.equal(409);
      expect(again.body).to.deep.include({ success: false, code: "nothing_to_claim" });
      expect(await paymasterDeposit(), "no UserOperation was sent").to.equal(depositBefore);

      // The wallet sweep turns the claimed USDC into the seller's spendable balance (at least the minimum deposit).
      expect(await stack.gw.wallets!.sweepAll()).to.equal(1);
      await pollIndexer();
      expect(await stack.available(session.accountId)).to.equal(1_800_000n);
      expect(await usdcOf(wallet.address)).to.equal(0n);
    });

    it("pays to `to` when given (claimTo)", async () => {
      const { session, wallet } = await seller("email", "seller-to@example.com");
      await earn(session, "claim-to-echo", "0.1", 3); // 0.30 paid, 0.27 to the seller
      const recipient = privateKeyToAccount(generatePrivateKey()).address;
      const claimed = await session.request("POST", "/v1/seller/claim", { to: recipient.toLowerCase() });
      expect(claimed.status, JSON.stringify(claimed.body)).to.equal(200);
      expect(claimed.body.data).to.include({ amount: 0.27, to: recipient });
      expect(await usdcOf(recipient)).to.equal(270_000n);
      expect(await usdcOf(wallet.address)).to.equal(0n);
      expect(await claimable(wallet.address)).to.equal(0n);
    });

    it("refuses a missing CSRF token, a bad or zero `to`, and the owner-signed path, before anything is sent", async () => {
      const { session } = await seller("email", "seller-refusals@example.com");
      await earn(session, "claim-refusals", "0.1", 1);
      const depositBefore = await paymasterDeposit();

      const noCsrf = await session.request("POST", "/v1/seller/claim", {}, { csrf: false });
      expect(noCsrf.status).to.equal(403);
      expect(noCsrf.body.code).to.equal("csrf_failed");
      const anonymous = await send(`${stack.url}/v1/seller/claim`, "POST", {}, {});
      expect(anonymous.status).to.equal(401);

      const recipient = privateKeyToAccount(generatePrivateKey()).address;
      const badChecksum =
        recipient.slice(0, 2) +
        [...recipient.slice(2)].map((c) => (/[a-f]/.test(c) ? c.toUpperCase() : /[A-F]/.test(c) ? c.toLowerCase() : c)).join("");
      for (const to of [`0x${"00".repeat(20)}`, "0x1234", 42, badChecksum]) {
        const refused = await session.request("POST", "/v1/seller/claim", { to });
        expect(refused.status, String(to)).to.equal(400);
        expect(refused.body.code).to.equal("invalid_request");
      }
      const prepare = await session.request("POST", "/v1/seller/claim/prepare", {});
      expect(prepare.status).to.equal(409);
      expect(prepare.body.code).to.equal("wrong_claim_flow");
      expect(await paymasterDeposit()).to.equal(depositBefore);
      expect(await claimable(getAddress((await session.request("GET", "/v1/earnings")).body.data.address))).to.equal(90_000n);
    });

    it("refuses an account whose payout address is not its embedded wallet: that address must claim itself", async () => {
      const payout = privateKeyToAccount(generatePrivateKey()).address;
      const { session } = await seller("email", "seller-elsewhere@example.com", async (accountId) => {
        expect((await linkAddress(stack.gw.ledger, { accountId, address: payout })).ok).to.equal(true);
      });
      const refused = await session.request("POST", "/v1/seller/claim");
      expect(refused.status).to.equal(409);
      expect(refused.body.code).to.equal("payout_address_not_wallet");
      expect(refused.body.error.toLowerCase()).to.contain(payout.toLowerCase());
    });
  });

  describe("from a SIWE-owned embedded wallet: prepare, sign, submit", () => {
    it("claims with the owner's personal_sign of the UserOperation hash; a wrong signature is refused and the claim stays usable", async () => {
      const owner = privateKeyToAccount(generatePrivateKey());
      const { session, wallet } = await seller("siwe", owner.address);
      expect(wallet.ownerKind).to.equal("siwe");
      await earn(session, "claim-siwe", "0.5", 2); // 1.00 paid, 0.90 to the seller

      const direct = await session.request("POST", "/v1/seller/claim");
      expect(direct.status).to.equal(409);
      expect(direct.body.code).to.equal("wrong_claim_flow");

      const prepared = await session.request("POST", "/v1/seller/claim/prepare");
      expect(prepared.status, JSON.stringify(prepared.body)).to.equal(201);
      expect(prepared.body.data).to.include({
        amount: 0.9,
        amount_base_units: "900000",
        to: wallet.address,
        wallet: wallet.address,
        owner: owner.address,
      });
      expect(Date.parse(prepared.body.data.expires_at)).to.be.greaterThan(Date.now());
      const hash = prepared.body.data.user_op_hash as Hex;

      const noCsrf = await session.request(
        "POST",
        "/v1/seller/claim/submit",
        { user_op_hash: hash, signature: await owner.signMessage({ message: { raw: hash } }) },
        { csrf: false },
      );
      expect(noCsrf.status).to.equal(403);
      const intruder = privateKeyToAccount(generatePrivateKey());
      const wrong = await session.request("POST", "/v1/seller/claim/submit", {
        user_op_hash: hash,
        signature: await intruder.signMessage({ message: { raw: hash } }),
      });
      expect(wrong.status).to.equal(400);
      expect(wrong.body.code).to.equal("user_operation_rejected");
      expect(await claimable(wallet.address)).to.equal(900_000n);

      const submitted = await session.request("POST", "/v1/seller/claim/submit", {
        user_op_hash: hash,
        signature: await owner.signMessage({ message: { raw: hash } }),
      });
      expect(submitted.status, JSON.stringify(submitted.body)).to.equal(200);
      expect(submitted.body.data).to.include({ amount: 0.9, amount_base_units: "900000", to: wallet.address });
      expect(submitted.body.data.tx_hash).to.match(/^0x[0-9a-f]{64}$/);
      expect(await usdcOf(wallet.address)).to.equal(900_000n); // a SIWE wallet is not swept: its owner decides
      expect(await claimable(wallet.address)).to.equal(0n);

      // Spent: the same hash is unknown now, and there is nothing left to prepare a claim for.
      const replay = await session.request("POST", "/v1/seller/claim/submit", {
        user_op_hash: hash,
        signature: await owner.signMessage({ message: { raw: hash } }),
      });
      expect(replay.status).to.equal(404);
      const empty = await session.request("POST", "/v1/seller/claim/prepare");
      expect(empty.status).to.equal(409);
      expect(empty.body.code).to.equal("nothing_to_claim");
    });

    it("prepares a claimTo(to), which only this account can submit", async () => {
      const owner = privateKeyToAccount(generatePrivateKey());
      const { session, wallet } = await seller("siwe", owner.address);
      await earn(session, "claim-siwe-to", "0.2", 1); // 0.18 to the seller
      const recipient = privateKeyToAccount(generatePrivateKey()).address;
      const prepared = await session.request("POST", "/v1/seller/claim/prepare", { to: recipient });
      expect(prepared.status, JSON.stringify(prepared.body)).to.equal(201);
      expect(prepared.body.data).to.include({ amount: 0.18, to: recipient });
      const hash = prepared.body.data.user_op_hash as Hex;
      const signature = await owner.signMessage({ message: { raw: hash } });

      const stranger = await seller("siwe", privateKeyToAccount(generatePrivateKey()).address);
      expect((await stranger.session.request("POST", "/v1/seller/claim/submit", { user_op_hash: hash, signature })).status).to.equal(404);
      // A sweep's submit endpoint does not take a claim's hash either.
      expect((await session.request("POST", "/v1/wallet/sweep/submit", { user_op_hash: hash, signature })).status).to.equal(404);

      const submitted = await session.request("POST", "/v1/seller/claim/submit", { user_op_hash: hash, signature });
      expect(submitted.status, JSON.stringify(submitted.body)).to.equal(200);
      expect(submitted.body.data).to.include({ amount: 0.18, to: recipient });
      expect(await usdcOf(recipient)).to.equal(180_000n);
      expect(await usdcOf(wallet.address)).to.equal(0n);
    });
  });
});

describe("POST /v1/seller/claim without the ERC-4337 stack", () => {
  let stack: TestStack;
  before(async () => {
    stack = await startStack();
  });
  after(async () => {
    await stack?.close();
  });

  it("answers 503 chain_not_configured on each claim endpoint", async () => {
    const session = await signedIn(stack, "no-chain@example.com");
    for (const path of ["/v1/seller/claim", "/v1/seller/claim/prepare", "/v1/seller/claim/submit"]) {
      const reply = await session.request("POST", path, {});
      expect(reply.status, path).to.equal(503);
      expect(reply.body).to.deep.include({ success: false, code: "chain_not_configured" });
    }
  });
});
