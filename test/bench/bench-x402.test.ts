import { expect } from "chai";
import { compileContracts } from "../helpers/chain";
import { decodePaymentRequiredHeader, decodePaymentResponseHeader } from "@x402/core/http";
import { type Address, erc20Abi, keccak256, toHex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { type X402Peer, startX402Peer, x402Fetch } from "../../scripts/bench/x402-peer";
import { type Deployment, deployContracts } from "../../server/devstack/deploy";
import { DEV_ACCOUNT_INDEX, type LocalNode, devAccount, devPrivateKey, startLocalNode } from "../../server/devstack/local-node";
import { type TestBackend, startTestBackend } from "../helpers/backend";

const PRICE_MICROS = 1_000n;
const CALLS = 3;

describe("the benchmark's x402 peer (scripts/bench/x402-peer.ts)", function () {
  this.timeout(60_000);
  const payer = privateKeyToAccount(keccak256(toHex("x402 peer test payer")));
  const seller = devAccount(6).address;
  let node: LocalNode | undefined;
  let backend: TestBackend | undefined;
  let peer: X402Peer | undefined;
  let deployment: Deployment;

  before(async () => {
    await compileContracts();
    node = await startLocalNode({ sameSecondBlocks: true });
    deployment = await deployContracts({
      network: "localhost",
      publicClient: node.publicClient,
      walletClient: node.walletFor(devAccount(DEV_ACCOUNT_INDEX.deployer)),
      settler: devAccount(DEV_ACCOUNT_INDEX.settler).address,
      voucherSigner: devAccount(DEV_ACCOUNT_INDEX.voucherSigner).address,
      mint: [{ to: payer.address, amountMicros: 1_000_000n }],
    });
    backend = await startTestBackend();
    peer = await startX402Peer({
      rpcUrl: node.rpcUrl,
      usdc: deployment.usdc,
      payTo: seller,
      priceMicros: PRICE_MICROS,
      facilitatorKey: devPrivateKey(5),
      backendUrl: `${backend.url}/echo`,
    });
  });
  after(async () => {
    await peer?.close();
    await backend?.close();
    await node?.stop();
  });

  const usdcOf = (address: Address) =>
    node!.publicClient.readContract({ address: deployment.usdc, abi: erc20Abi, functionName: "balanceOf", args: [address] });

  it("answers an unpaid call 402 with the exact scheme's requirements on this chain", async () => {
    const res = await fetch(`${peer!.url}/echo`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
    await res.text();
    expect(res.status).to.equal(402);
    const required = decodePaymentRequiredHeader(res.headers.get("payment-required")!);
    expect(required.x402Version).to.equal(2);
    expect(required.accepts).to.have.length(1);
    expect(required.accepts[0]).to.include({
      scheme: "exact",
      network: "eip155:8453",
      asset: deployment.usdc,
      amount: PRICE_MICROS.toString(),
      payTo: seller,
    });
    expect(required.accepts[0].extra).to.deep.equal({ name: "USD Coin", version: "2" });
  });

  it("is paid by @x402/fetch, settling each call on-chain: the payer loses exactly price × calls, the seller gains it", async () => {
    const pay = x402Fetch(payer, { allow: { network: peer!.network, asset: deployment.usdc, maxAmountPerPaymentMicros: PRICE_MICROS } });
    const [payerBefore, sellerBefore] = [await usdcOf(payer.address), await usdcOf(seller)];
    const transactions = new Set<string>();
    for (let i = 0; i < CALLS; i++) {
      const res = await pay(`${peer!.url}/echo`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ call: i }),
      });
      expect(res.status).to.equal(200);
      expect(await res.json()).to.deep.equal({ call: i });
      const settlement = decodePaymentResponseHeader(res.headers.get("payment-response")!);
      expect(settlement).to.include({ success: true, network: "eip155:8453", payer: payer.address });
      const receipt = await node!.publicClient.getTransactionReceipt({ hash: settlement.transaction as `0x${string}` });
      expect(receipt.status).to.equal("success");
      expect(receipt.from).to.equal(peer!.facilitatorAddress.toLowerCase());
      transactions.add(settlement.transaction);
    }
    expect(transactions.size).to.equal(CALLS);
    expect(payerBefore - (await usdcOf(payer.address))).to.equal(PRICE_MICROS * BigInt(CALLS));
    expect((await usdcOf(seller)) - sellerBefore).to.equal(PRICE_MICROS * BigInt(CALLS));
    // The payer signs; the facilitator pays the gas.
    expect(await node!.publicClient.getBalance({ address: payer.address })).to.equal(0n);
  });
});
