import { expect } from "chai";
import { parseAbi, type Address, type Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { gatewayPaymasterAbi } from "../../server/chain/abi";
import { DEV_ACCOUNT_INDEX, devAccount } from "../../server/devstack/local-node";
import { type AaStack, gatewayOptionsFor, startAaStack } from "../helpers/aa-stack";
import { type TestStack, startStack } from "../helpers/gateway";
import { send, sessionFor, signedIn } from "../helpers/session";

const ABI = parseAbi([
  "function balanceOf(address) view returns (uint256)",
  "function balances(address) view returns (uint256)",
  "function voucherNonceUsed(address, uint256) view returns (bool)",
]);

/**
 * POST /v1/wallet/withdraw (a server-owned embedded wallet) and /v1/wallet/withdraw/prepare + /submit (a SIWE-owned
 * one), on a real `hardhat node` with the real Alto bundler: money topped up by a USDC transfer to the wallet (swept
 * into the escrow, credited by the indexer) leaves to an outside address in one sponsored UserOperation that redeems
 * the gateway's voucher and passes the USDC on.
 */
describe("POST /v1/wallet/withdraw", function () {
  this.timeout(180_000);
  let aa: AaStack;
  let stack: TestStack;

  const usdcOf = (address: Address) =>
    aa.node.publicClient.readContract({ address: aa.deployment.usdc, abi: ABI, functionName: "balanceOf", args: [address] });
  const escrowBalanceOf = (address: Address) =>
    aa.node.publicClient.readContract({ address: aa.deployment.escrow, abi: ABI, functionName: "balances", args: [address] });
  const nonceUsed = (address: Address, nonce: bigint) =>
    aa.node.publicClient.readContract({
      address: aa.deployment.escrow,
      abi: ABI,
      functionName: "voucherNonceUsed",
      args: [address, nonce],
    });
  const paymasterDeposit = () =>
    aa.node.publicClient.readContract({ address: aa.aa.paymaster, abi: gatewayPaymasterAbi, functionName: "getDeposit" });
  const voucherStatus = (nonce: string) => stack.gw.ledger.db.value<string>("SELECT status FROM vouchers WHERE nonce = ?", [BigInt(nonce)]);
  const voucherCount = async (accountId: string) =>
    Number(await stack.gw.ledger.db.value("SELECT COUNT(*) FROM vouchers WHERE account_id = ?", [accountId]));
  const outsider = () => privateKeyToAccount(generatePrivateKey()).address;

  /** A session of a new account with its embedded wallet, topped up with `micros` by a USDC transfer to the wallet. */
  async function account(provider: "email" | "siwe", subject: string, micros: bigint) {
    const signIn = await stack.gw.sessions.signIn(provider, subject);
    if (!signIn.ok) throw new Error(signIn.reason);
    const wallet = await stack.gw.wallets!.ensureFor(signIn.accountId);
    const { token, csrfToken } = await stack.gw.sessions.issue(signIn.accountId);
    const session = sessionFor(stack, signIn.accountId, token, csrfToken);
    if (micros > 0n) {
      await aa.mint(wallet.address, micros);
      if (wallet.ownerKind === "server") {
        expect(await stack.gw.wallets!.sweepAll()).to.equal(1);
      } else {
        // A SIWE wallet is not swept by the loop: its owner signs the sweep the gateway prepares.
        const owner = subjectOwners.get(subject)!;
        const prepared = await stack.gw.wallets!.prepareOwnerSweep(signIn.accountId);
        if (!prepared.ok) throw new Error(prepared.message);
        const hash = prepared.prepared.userOpHash;
        const submitted = await stack.gw.wallets!.submitOwnerSweep(
          signIn.accountId,
          hash,
          await owner.signMessage({ message: { raw: hash } }),
        );
        if (!submitted.ok) throw new Error(submitted.message);
      }
      await stack.gw.moneyPath!.indexer.poll();
      await stack.gw.moneyPath!.indexer.poll();
      expect(await stack.available(signIn.accountId)).to.equal(micros);
    }
    return { session, wallet };
  }
  const subjectOwners = new Map<string, ReturnType<typeof privateKeyToAccount>>();

  before(async () => {
    aa = await startAaStack();
    const options = gatewayOptionsFor(aa);
    options.chain!.voucherSigner = aa.node.walletFor(devAccount(DEV_ACCOUNT_INDEX.voucherSigner));
    stack = await startStack({ buyerUsd: "0", gateway: options });
  });
  after(async () => {
    await stack?.close();
    await aa?.stop();
  });

  describe("from a server-owned embedded wallet (e-mail sign-in)", () => {
    it("sends exactly 1.50 to the address, debits the balance once, leaves nothing in the wallet to sweep back, and the voucher is redeemed", async () => {
      const { session, wallet } = await account("email", "withdraw@example.com", 5_000_000n);
      expect(wallet.ownerKind).to.equal("server");
      const to = outsider();
      expect(await escrowBalanceOf(wallet.address)).to.equal(5_000_000n);

      const reply = await session.request("POST", "/v1/wallet/withdraw", { amount: "1.5", to: to.toLowerCase() });
      expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
      expect(reply.body.data).to.include({ amount: 1.5, amount_base_units: "1500000", to });
      expect(reply.body.data.tx_hash).to.match(/^0x[0-9a-f]{64}$/);
      expect(reply.body.data.user_op_hash).to.match(/^0x[0-9a-f]{64}$/);
      expect((await aa.node.publicClient.getTransactionReceipt({ hash: reply.body.data.tx_hash })).status).to.equal("success");

      expect(await usdcOf(to)).to.equal(1_500_000n);
      expect(await usdcOf(wallet.address), "nothing rests in the wallet").to.equal(0n);
      expect(await escrowBalanceOf(wallet.address)).to.equal(3_500_000n);
      expect(await stack.available(session.accountId)).to.equal(3_500_000n);
      expect(await nonceUsed(wallet.address, BigInt(reply.body.data.nonce))).to.equal(true);
      expect(await voucherStatus(reply.body.data.nonce)).to.equal("redeemed");

      // The sweep finds nothing; the indexer and the voucher sweeper see the redemption and debit nothing more.
      expect(await stack.gw.wallets!.sweepAll()).to.equal(0);
      await stack.gw.moneyPath!.indexer.poll();
      await stack.gw.moneyPath!.vouchers!.sweep(aa.node.publicClient);
      expect(await stack.available(session.accountId)).to.equal(3_500_000n);
      expect(await voucherStatus(reply.body.data.nonce)).to.equal("redeemed");
      const history = await session.request("GET", "/v1/withdrawals");
      expect(history.body.data).to.have.length(1);
      expect(history.body.data[0]).to.include({ amount: 1.5, status: "redeemed" });

      // All that is left, without an amount.
      const rest = await session.request("POST", "/v1/wallet/withdraw", { to });
      expect(rest.status, JSON.stringify(rest.body)).to.equal(200);
      expect(rest.body.data).to.include({ amount: 3.5, amount_base_units: "3500000" });
      expect(await usdcOf(to)).to.equal(5_000_000n);
      expect(await escrowBalanceOf(wallet.address)).to.equal(0n);
      expect(await usdcOf(wallet.address)).to.equal(0n);
      expect(await stack.available(session.accountId)).to.equal(0n);

      // Now the balance is zero: nothing to withdraw, nothing issued, no gas spent.
      const depositBefore = await paymasterDeposit();
      const empty = await session.request("POST", "/v1/wallet/withdraw", { to });
      expect(empty.status).to.equal(400);
      expect(empty.body).to.deep.include({ success: false, code: "invalid_request" });
      expect(empty.body.error).to.match(/nothing to withdraw/i);
      expect(await paymasterDeposit()).to.equal(depositBefore);
      expect(await voucherCount(session.accountId)).to.equal(2);
    });

    it("refuses without CSRF, a bad `to`, less than a voucher's minimum, more than available (402, no debit), and the owner-signed path, before anything is debited or sent", async () => {
      const { session, wallet } = await account("email", "withdraw-refusals@example.com", 2_000_000n);
      const depositBefore = await paymasterDeposit();
      const to = outsider();

      const noCsrf = await session.request("POST", "/v1/wallet/withdraw", { to }, { csrf: false });
      expect(noCsrf.status).to.equal(403);
      expect(noCsrf.body.code).to.equal("csrf_failed");
      expect((await send(`${stack.url}/v1/wallet/withdraw`, "POST", {}, { to })).status).to.equal(401);

      const badChecksum =
        to.slice(0, 2) + [...to.slice(2)].map((c) => (/[a-f]/.test(c) ? c.toUpperCase() : /[A-F]/.test(c) ? c.toLowerCase() : c)).join("");
      for (const bad of [
        undefined,
        `0x${"00".repeat(20)}`,
        "0x1234",
        42,
        badChecksum,
        aa.deployment.escrow,
        wallet.address,
        wallet.address.toLowerCase(),
      ]) {
        const refused = await session.request("POST", "/v1/wallet/withdraw", { to: bad });
        expect(refused.status, String(bad)).to.equal(400);
        expect(refused.body.code, String(bad)).to.equal("invalid_request");
      }
      const badAmount = await session.request("POST", "/v1/wallet/withdraw", { to, amount: "1.0000001" });
      expect(badAmount.status).to.equal(400);

      const dust = await session.request("POST", "/v1/wallet/withdraw", { to, amount: "0.000001" });
      expect(dust.status).to.equal(400);
      expect(dust.body).to.deep.include({ success: false, code: "amount_below_minimum" });
      expect(dust.body.error).to.include("at least $0.01");

      const tooMuch = await session.request("POST", "/v1/wallet/withdraw", { to, amount: "2.000001" });
      expect(tooMuch.status).to.equal(402);
      expect(tooMuch.body).to.deep.include({ success: false, code: "insufficient_balance" });

      const prepare = await session.request("POST", "/v1/wallet/withdraw/prepare", { to });
      expect(prepare.status).to.equal(409);
      expect(prepare.body.code).to.equal("wrong_withdrawal_flow");

      expect(await stack.available(session.accountId)).to.equal(2_000_000n);
      expect(await voucherCount(session.accountId)).to.equal(0);
      expect(await paymasterDeposit()).to.equal(depositBefore);
      expect(await escrowBalanceOf(wallet.address)).to.equal(2_000_000n);
    });

    it("keeps the voucher valid and returns it when the bundler cannot take the operation, debiting once", async () => {
      const { session, wallet } = await account("email", "withdraw-bundler-down@example.com", 1_000_000n);
      const to = outsider();
      const bundlerUrl = (stack.gw.wallets as unknown as { p: { chain: { bundlerUrl: string } } }).p.chain;
      const realUrl = bundlerUrl.bundlerUrl;
      bundlerUrl.bundlerUrl = "http://127.0.0.1:9/rpc"; // nothing listens on the discard port
      let reply;
      try {
        reply = await session.request("POST", "/v1/wallet/withdraw", { to, amount: "0.4" });
      } finally {
        bundlerUrl.bundlerUrl = realUrl;
      }
      expect(reply.status, JSON.stringify(reply.body)).to.equal(503);
      expect(reply.body).to.deep.include({ success: false, code: "chain_unavailable" });
      expect(reply.body.error).to.match(/voucher was issued and stays valid/);
      expect(reply.body.voucher).to.include({ account: wallet.address, amount: "400000", escrow: aa.deployment.escrow });
      expect(reply.body.voucher.signature).to.match(/^0x[0-9a-f]{130}$/);
      expect(await stack.available(session.accountId)).to.equal(600_000n);
      expect(await voucherStatus(reply.body.voucher.nonce)).to.equal("issued");
      expect(await usdcOf(to)).to.equal(0n);
      expect(await escrowBalanceOf(wallet.address)).to.equal(1_000_000n);
    });
  });

  describe("from a SIWE-owned embedded wallet: prepare, sign, submit", () => {
    it("withdraws with the owner's personal_sign of the UserOperation hash; a wrong signature is refused and the preparation stays usable", async () => {
      const owner = privateKeyToAccount(generatePrivateKey());
      subjectOwners.set(owner.address, owner);
      const { session, wallet } = await account("siwe", owner.address, 3_000_000n);
      expect(wallet.ownerKind).to.equal("siwe");
      const to = outsider();

      const direct = await session.request("POST", "/v1/wallet/withdraw", { to });
      expect(direct.status).to.equal(409);
      expect(direct.body.code).to.equal("wrong_withdrawal_flow");

      const prepared = await session.request("POST", "/v1/wallet/withdraw/prepare", { to, amount: "1.25" });
      expect(prepared.status, JSON.stringify(prepared.body)).to.equal(201);
      expect(prepared.body.data).to.include({
        amount: 1.25,
        amount_base_units: "1250000",
        to,
        wallet: wallet.address,
        owner: owner.address,
      });
      const hash = prepared.body.data.user_op_hash as Hex;
      // The voucher is issued at preparation: the amount has left the balance.
      expect(await stack.available(session.accountId)).to.equal(1_750_000n);

      const intruder = privateKeyToAccount(generatePrivateKey());
      const wrong = await session.request("POST", "/v1/wallet/withdraw/submit", {
        user_op_hash: hash,
        signature: await intruder.signMessage({ message: { raw: hash } }),
      });
      expect(wrong.status).to.equal(400);
      expect(wrong.body.code).to.equal("user_operation_rejected");
      expect(await usdcOf(to)).to.equal(0n);

      const signature = await owner.signMessage({ message: { raw: hash } });
      const noCsrf = await session.request("POST", "/v1/wallet/withdraw/submit", { user_op_hash: hash, signature }, { csrf: false });
      expect(noCsrf.status).to.equal(403);

      const submitted = await session.request("POST", "/v1/wallet/withdraw/submit", { user_op_hash: hash, signature });
      expect(submitted.status, JSON.stringify(submitted.body)).to.equal(200);
      expect(submitted.body.data).to.include({ amount: 1.25, amount_base_units: "1250000", to, nonce: prepared.body.data.nonce });
      expect(submitted.body.data.tx_hash).to.match(/^0x[0-9a-f]{64}$/);
      expect(await usdcOf(to)).to.equal(1_250_000n);
      expect(await usdcOf(wallet.address)).to.equal(0n);
      expect(await escrowBalanceOf(wallet.address)).to.equal(1_750_000n);
      expect(await stack.available(session.accountId)).to.equal(1_750_000n);
      expect(await voucherStatus(prepared.body.data.nonce)).to.equal("redeemed");

      const replay = await session.request("POST", "/v1/wallet/withdraw/submit", { user_op_hash: hash, signature });
      expect(replay.status).to.equal(404);
    });
  });
});

describe("POST /v1/wallet/withdraw without the ERC-4337 stack", () => {
  let stack: TestStack;
  before(async () => {
    stack = await startStack();
  });
  after(async () => {
    await stack?.close();
  });

  it("answers 503 chain_not_configured on each withdrawal endpoint", async () => {
    const session = await signedIn(stack, "no-chain-withdraw@example.com");
    for (const path of ["/v1/wallet/withdraw", "/v1/wallet/withdraw/prepare", "/v1/wallet/withdraw/submit"]) {
      const reply = await session.request("POST", path, { to: "0x000000000000000000000000000000000000dEaD" });
      expect(reply.status, path).to.equal(503);
      expect(reply.body).to.deep.include({ success: false, code: "chain_not_configured" });
    }
  });
});
