import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { expect } from "chai";
import hre from "hardhat";
import { decodePaymentRequiredHeader, decodePaymentResponseHeader, encodePaymentSignatureHeader } from "@x402/core/http";
import type { PaymentPayload, PaymentRequired } from "@x402/core/types";
import { ExactEvmScheme } from "@x402/evm/exact/client";
import { wrapFetchWithPaymentFromConfig } from "@x402/fetch";
import { type Address, type Hex, createWalletClient, custom } from "viem";
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from "viem/accounts";
import { linkAddress } from "../../server/settlement/addresses";
import { loadArtifact } from "../../server/devstack/deploy";
import { reconcile } from "../../server/settlement/reconcile";
import { assertBalanced } from "../../server/ledger/invariants";
import { settlementStores } from "../../server/settlement/store";
import { earningsOf } from "../../server/settlement/earnings";
import { X402PaymentsStore } from "../../server/x402/payments-store";
import { EscrowX402Settler } from "../../server/x402/escrow-settlement";
import { callIdToBytes32 } from "../../server/chain/receipts";
import { X402_SOURCE_ID } from "../../server/ledger/ledger";
import { type LocalChain, gatewayChain, startLocalChain } from "../helpers/chain";
import { describeEachEngine } from "../helpers/engines";
import { ContractChecker } from "../helpers/openapi";
import { type TestStack, startStack } from "../helpers/gateway";

const escrowAbi = loadArtifact("SkillEscrow").abi;

const usdcAbi = loadArtifact("TestUSDC").abi;

/**
 * Pay-per-call with x402 against the real protocol packages: the payer is a viem account holding test USDC on the
 * local chain, paying through @x402/fetch with the `exact` EVM scheme of @x402/evm, exactly as any x402 client would.
 * Every assertion is on money: the payer's USDC, the seller's and the treasury's claimable earnings in the escrow,
 * and the ledger's books.
 */
describeEachEngine("x402: pay per call without an account", (engine) => {
  let chain: LocalChain;
  let snapshot: string;
  let stack: TestStack;
  let seller: Address;
  let treasury: Address;
  let payer: PrivateKeyAccount;
  let paidFetch: typeof fetch;

  const usdcOf = (address: Address) => chain.usdcOf(address);
  const escrowEarnings = (address: Address) =>
    chain.publicClient.readContract({
      address: chain.deployment.escrow,
      abi: escrowAbi,
      functionName: "earnings",
      args: [address],
    }) as Promise<bigint>;
  const url = (slug: string) => `${stack.url}/x402/skills/${slug}/call`;
  /** What the escrow holds pending for x402 calls not yet completed or refunded. */
  const pendingTotal = () =>
    chain.publicClient.readContract({
      address: chain.deployment.escrow,
      abi: escrowAbi,
      functionName: "x402PendingTotal",
    }) as Promise<bigint>;
  let checker: ContractChecker;
  /** Checks an answer against the API's OpenAPI document (what it declares for the route, status and body). */
  const conforms = async (method: string, target: string, res: Response) => {
    const text = await res.clone().text();
    const problems = checker.problems(method, target, {
      status: res.status,
      contentType: res.headers.get("content-type"),
      body: JSON.parse(text),
    });
    expect(problems, problems.join("\n")).to.deep.equal([]);
  };
  const post = async (target: string, body: unknown, headers: Record<string, string> = {}) => {
    const res = await fetch(target, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: JSON.stringify(body),
    });
    await conforms("POST", target, res);
    return res;
  };

  before(async function () {
    this.timeout(120_000);
    chain = await startLocalChain();
    snapshot = await chain.snapshot();
    const wallets = await hre.viem.getWalletClients();
    treasury = wallets[0].account.address;
    seller = wallets[7].account.address;
    stack = await startStack({ engine: engine.name, gateway: { chain: await gatewayChain(chain) } });
    checker = new ContractChecker((await (await fetch(`${stack.url}/openapi.json`)).json()) as never);
    expect((await linkAddress(stack.gw.ledger, { accountId: stack.sellerId, address: seller })).ok).to.equal(true);
    await stack.addSkill("paid", "/echo", { priceMicros: 2_000n });
    await stack.addSkill("paid-broken", "/fail", { priceMicros: 2_000n });

    payer = privateKeyToAccount(generatePrivateKey());
    await chain.mintUsdc(payer.address, 1_000_000n);
    // The client pays only assets it knows (Base's USDC) unless told otherwise: the local chain's test USDC is opted
    // into, with a cap per payment, as a client of a gateway on a test chain would.
    paidFetch = wrapFetchWithPaymentFromConfig(fetch, {
      schemes: [{ network: "eip155:*", client: new ExactEvmScheme(payer) }],
      spendControls: { allowedAssets: [{ network: "eip155:8453", asset: chain.deployment.usdc, maxAmountPerPayment: "10000" }] },
    });
  });
  after(async () => {
    await stack?.close();
    if (snapshot) await chain.revert(snapshot);
  });

  it("answers 402 in the spec's envelope with a PAYMENT-REQUIRED header describing the exact scheme on this chain", async () => {
    const res = await post(url("paid"), { text: "hi" });
    expect(res.status).to.equal(402);
    const body = (await res.json()) as any;
    expect(body).to.include({ success: false, code: "payment_required" });
    expect(body.error).to.match(/\$0\.002/);
    const required: PaymentRequired = decodePaymentRequiredHeader(res.headers.get("payment-required")!);
    expect(required.x402Version).to.equal(2);
    expect(required.resource.url).to.equal(url("paid"));
    expect(required.accepts).to.have.length(1);
    expect(required.accepts[0]).to.deep.include({
      scheme: "exact",
      network: "eip155:8453",
      asset: chain.deployment.usdc,
      amount: "2000",
      payTo: chain.deployment.escrow,
      extra: { name: "USD Coin", version: "2" },
    });
  });

  it("a paid call returns the data and a PAYMENT-RESPONSE naming the transaction; payer −price, seller +90%, treasury +10%", async () => {
    const [payerBefore, sellerBefore, treasuryBefore] = [
      await usdcOf(payer.address),
      await escrowEarnings(seller),
      await escrowEarnings(treasury),
    ];
    const res = await paidFetch(url("paid"), {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ text: "hi" }),
    });
    expect(res.status).to.equal(200);
    const body = (await res.json()) as any;
    expect(body).to.deep.include({ success: true, data: { text: "hi" } });
    expect(body.metadata).to.include({ skillId: "paid", cost: 0.002 });
    const settled = decodePaymentResponseHeader(res.headers.get("payment-response")!);
    expect(settled).to.include({ success: true, network: "eip155:8453", payer: payer.address });
    const receipt = await chain.publicClient.getTransactionReceipt({ hash: settled.transaction as Hex });
    expect(receipt.status).to.equal("success");

    expect(await usdcOf(payer.address)).to.equal(payerBefore - 2_000n);
    expect(await escrowEarnings(seller)).to.equal(sellerBefore + 1_800n);
    expect(await escrowEarnings(treasury)).to.equal(treasuryBefore + 200n);

    // The books: the seller's earned and the platform's fees, from the x402 source; the call in the calls log.
    const callId = res.headers.get("x-call-id")!;
    const call = await stack.gw.db.one<{ account_id: string; endpoint: string; outcome: string; charged_micros: bigint }>(
      "SELECT account_id, endpoint, outcome, charged_micros FROM calls WHERE id = ?",
      [callId],
    );
    expect(call).to.deep.equal({ account_id: X402_SOURCE_ID, endpoint: "x402", outcome: "success", charged_micros: 2_000n });
    expect(await stack.earned()).to.equal(1_800n);
    await assertBalanced(stack.gw.db);
  });

  it("the broken skill settles nothing: the payment collected before the call is refunded, the payer keeps the money", async () => {
    const [payerBefore, sellerBefore] = [await usdcOf(payer.address), await escrowEarnings(seller)];
    const res = await paidFetch(url("paid-broken"), { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
    expect(res.status).to.equal(502);
    const body = (await res.json()) as any;
    expect(body).to.include({ success: false, code: "skill_error" });
    expect(body.error).to.match(/Your payment is refunded\.$/);
    expect(res.headers.get("payment-response")).to.equal(null);
    expect(await usdcOf(payer.address)).to.equal(payerBefore);
    expect(await escrowEarnings(seller)).to.equal(sellerBefore);
    expect((await new X402PaymentsStore(stack.gw.db).get(res.headers.get("x-call-id")!))?.status).to.equal("refunded");
    expect(await pendingTotal()).to.equal(0n);
  });

  /** A payment signed by the real client for `slug`'s requirements (optionally changed before signing). */
  async function signedPayment(slug: string, change: (r: PaymentRequired["accepts"][0]) => void = () => {}): Promise<string> {
    const required = decodePaymentRequiredHeader((await post(url(slug), {})).headers.get("payment-required")!);
    const requirements = { ...required.accepts[0] };
    change(requirements);
    const created = await new ExactEvmScheme(payer).createPaymentPayload(2, requirements);
    const payload: PaymentPayload = { ...created, accepted: requirements, resource: required.resource } as PaymentPayload;
    return encodePaymentSignatureHeader(payload);
  }

  /**
   * A payer holding exactly the price that can send transactions (it has ETH), and `moveAway`, which sends its USDC
   * to someone else and resolves with the receipt once mined.
   */
  async function spendingPayer() {
    const spender = privateKeyToAccount(generatePrivateKey());
    const [funder] = await hre.viem.getWalletClients();
    await chain.receipt(
      await funder.sendTransaction({ to: spender.address, value: 10n ** 18n, account: funder.account, chain: funder.chain }),
    );
    await chain.mintUsdc(spender.address, 2_000n);
    const wallet = createWalletClient({ account: spender, transport: custom(hre.network.provider) });
    const moveAway = async () =>
      chain.receipt(
        await wallet.writeContract({
          address: chain.deployment.usdc,
          abi: usdcAbi,
          functionName: "transfer",
          args: [funder.account.address, 2_000n],
          chain: null,
        } as never),
      );
    return { spender, moveAway };
  }

  it("refuses a replayed payment: the same authorization pays for one call only", async () => {
    const header = await signedPayment("paid");
    const first = await post(url("paid"), { text: "once" }, { "payment-signature": header });
    expect(first.status).to.equal(200);
    const payerAfterFirst = await usdcOf(payer.address);
    const again = await post(url("paid"), { text: "twice" }, { "payment-signature": header });
    expect(again.status).to.equal(402);
    // Refused by the reservation (payment_reused), or by the token's simulation once the nonce is used on-chain.
    expect(["payment_reused", "payment_invalid"]).to.include(((await again.json()) as any).code);
    expect(await usdcOf(payer.address)).to.equal(payerAfterFirst);
  });

  it("refuses concurrent replays of one authorization: exactly one call runs and pays", async () => {
    const header = await signedPayment("paid");
    const before = await usdcOf(payer.address);
    const results = await Promise.all(
      Array.from({ length: 5 }, () => post(url("paid"), { text: "race" }, { "payment-signature": header })),
    );
    const statuses = results.map((r) => r.status).sort();
    expect(statuses).to.deep.equal([200, 402, 402, 402, 402]);
    expect(await usdcOf(payer.address)).to.equal(before - 2_000n);
  });

  it("refuses an underpaying payment before the skill runs", async () => {
    const before = await usdcOf(payer.address);
    const header = await signedPayment("paid", (r) => (r.amount = "1999"));
    const res = await post(url("paid"), { text: "cheap" }, { "payment-signature": header });
    expect(res.status).to.equal(402);
    const body = (await res.json()) as any;
    expect(body).to.include({ code: "payment_invalid" });
    expect(body.error).to.match(/amount 1999 is not the price 2000/);
    expect(decodePaymentRequiredHeader(res.headers.get("payment-required")!).error).to.equal("invalid_payment_requirements");
    expect(await usdcOf(payer.address)).to.equal(before);
  });

  it("refuses a payment to another address, and a malformed header", async () => {
    const header = await signedPayment("paid", (r) => (r.payTo = seller));
    const wrong = await post(url("paid"), {}, { "payment-signature": header });
    expect(wrong.status).to.equal(402);
    expect(((await wrong.json()) as any).error).to.match(/payTo/);
    const junk = await post(url("paid"), {}, { "payment-signature": "not-base64-json" });
    expect(junk.status).to.equal(402);
    expect((await junk.json()) as any).to.include({ code: "payment_invalid" });
  });

  it("refuses a payer without the funds, saying so", async () => {
    const poor = privateKeyToAccount(generatePrivateKey());
    const required = decodePaymentRequiredHeader((await post(url("paid"), {})).headers.get("payment-required")!);
    const created = await new ExactEvmScheme(poor).createPaymentPayload(2, required.accepts[0]);
    const header = encodePaymentSignatureHeader({
      ...created,
      accepted: required.accepts[0],
      resource: required.resource,
    } as PaymentPayload);
    const res = await post(url("paid"), {}, { "payment-signature": header });
    expect(res.status).to.equal(402);
    expect(((await res.json()) as any).error).to.match(/balance is below the price/);
  });

  it("refuses an authorization valid for longer than asked, and one not valid yet", async () => {
    const far = await signedPayment("paid", (r) => (r.maxTimeoutSeconds = 100_000));
    const res = await post(url("paid"), {}, { "payment-signature": far });
    expect(res.status).to.equal(402);
    expect(((await res.json()) as any).error).to.match(/longer than the \d+ s asked/);
  });

  it("a payer who tries to spend the money while the skill runs cannot: it was collected before the call, which is paid", async function () {
    this.timeout(60_000);
    const { spender, moveAway } = await spendingPayer();
    await stack.addSkill("paid-gated", "/gated", { priceMicros: 2_000n });
    const required = decodePaymentRequiredHeader((await post(url("paid-gated"), {})).headers.get("payment-required")!);
    const created = await new ExactEvmScheme(spender).createPaymentPayload(2, required.accepts[0]);
    const header = encodePaymentSignatureHeader({
      ...created,
      accepted: required.accepts[0],
      resource: required.resource,
    } as PaymentPayload);
    const sellerBefore = await escrowEarnings(seller);

    const answer = post(url("paid-gated"), { text: "slow" }, { "payment-signature": header });
    await stack.backend.nextRequest("/gated");
    // Forwarded: the payment is already in the escrow, pending. The payer's attempt to move its USDC away fails.
    expect(await usdcOf(spender.address)).to.equal(0n);
    expect(await pendingTotal()).to.equal(2_000n);
    const moved = await moveAway().then(
      () => "sent",
      (error: Error) => error.message,
    );
    expect(moved).to.match(/ERC20InsufficientBalance/);
    stack.backend.openGate();
    const res = await answer;
    expect(res.status).to.equal(200);
    expect((await res.json()) as any).to.deep.include({ success: true, data: { text: "slow" } });
    expect(decodePaymentResponseHeader(res.headers.get("payment-response")!)).to.include({ success: true, payer: spender.address });
    expect(await escrowEarnings(seller)).to.equal(sellerBefore + 1_800n);
    expect(await pendingTotal()).to.equal(0n);
    expect((await new X402PaymentsStore(stack.gw.db).get(res.headers.get("x-call-id")!))?.status).to.equal("settled");
    await assertBalanced(stack.gw.db);
  });

  it("a payer whose USDC left before the collection is refused before the skill runs, nothing paid", async function () {
    this.timeout(60_000);
    const { spender, moveAway } = await spendingPayer();
    await stack.addSkill("paid-counted", "/echo", { priceMicros: 2_000n });
    const required = decodePaymentRequiredHeader((await post(url("paid-counted"), {})).headers.get("payment-required")!);
    const header = encodePaymentSignatureHeader({
      ...(await new ExactEvmScheme(spender).createPaymentPayload(2, required.accepts[0])),
      accepted: required.accepts[0],
      resource: required.resource,
    } as PaymentPayload);
    // The payer's funds leave between the gateway's read and its collection (the verifier read them a moment before).
    const verifier = (stack.gw.x402 as unknown as { deps?: { verifier: { funds: (...args: never[]) => Promise<unknown> } } })?.deps
      ?.verifier;
    expect(verifier, "the x402 service's verifier").to.not.equal(undefined);
    const funds = verifier!.funds.bind(verifier);
    verifier!.funds = async (...args: never[]) => {
      const read = await funds(...args);
      verifier!.funds = funds;
      await moveAway();
      return read;
    };
    const ranBefore = stack.backend.hits.get("/echo") ?? 0;
    const res = await post(url("paid-counted"), { text: "x" }, { "payment-signature": header });
    expect(res.status).to.equal(402);
    const body = (await res.json()) as any;
    expect(body).to.include({ success: false, code: "payment_settlement_failed" });
    expect(body.error).to.equal(
      "Payment could not be collected: the payer's USDC no longer covers the price. Nothing was paid, and the skill was not called.",
    );
    expect(stack.backend.hits.get("/echo") ?? 0).to.equal(ranBefore);
    expect(decodePaymentResponseHeader(res.headers.get("payment-response")!)).to.include({
      success: false,
      errorReason: "settlement_failed",
    });
  });

  it("ten authorizations on a balance that covers one call: the skill runs once, is paid once, nine are refused before it runs", async function () {
    this.timeout(60_000);
    await stack.addSkill("paid-slow", "/slow", { priceMicros: 2_000n });
    const thrifty = privateKeyToAccount(generatePrivateKey());
    await chain.mintUsdc(thrifty.address, 2_000n);
    const required = decodePaymentRequiredHeader((await post(url("paid-slow"), {})).headers.get("payment-required")!);
    const headers = await Promise.all(
      Array.from({ length: 10 }, async () =>
        encodePaymentSignatureHeader({
          ...(await new ExactEvmScheme(thrifty).createPaymentPayload(2, required.accepts[0])),
          accepted: required.accepts[0],
          resource: required.resource,
        } as PaymentPayload),
      ),
    );
    const [ranBefore, sellerBefore] = [stack.backend.hits.get("/slow") ?? 0, await escrowEarnings(seller)];
    const answers = await Promise.all(headers.map((header) => post(url("paid-slow"), { text: "once" }, { "payment-signature": header })));
    const bodies = (await Promise.all(answers.map((res) => res.json()))) as any[];
    expect(answers.map((res) => res.status).sort()).to.deep.equal([200, 402, 402, 402, 402, 402, 402, 402, 402, 402]);
    // Refused at the reservation (the balance is taken by one in flight), or at the collection (it was already collected).
    for (const body of bodies.filter((b) => !b.success)) expect(["payment_invalid", "payment_settlement_failed"]).to.include(body.code);
    // The backend ran once: no call ran that the balance could not pay for.
    expect((stack.backend.hits.get("/slow") ?? 0) - ranBefore).to.equal(1);
    expect(await usdcOf(thrifty.address)).to.equal(0n);
    expect(await escrowEarnings(seller)).to.equal(sellerBefore + 1_800n);
    await assertBalanced(stack.gw.db);
  });

  it("lists the payable skills in the protocol's discovery format", async () => {
    const res = await fetch(`${stack.url}/x402/discovery/resources?limit=100`);
    expect(res.status).to.equal(200);
    await conforms("GET", `${stack.url}/x402/discovery/resources?limit=100`, res);
    const list = (await res.json()) as any;
    expect(list.x402Version).to.equal(2);
    const paid = list.items.find((i: { resource: string }) => i.resource === url("paid"));
    expect(paid).to.deep.include({ type: "http", x402Version: 2 });
    expect(paid.accepts[0]).to.include({ scheme: "exact", amount: "2000", payTo: chain.deployment.escrow });
    expect(list.pagination).to.include({ limit: 100, offset: 0 });
    expect(list.pagination.total).to.equal(list.items.length);
  });

  it("the seller's earnings and the reconciliation count x402 revenue", async () => {
    const res = await paidFetch(url("paid"), { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
    expect(res.status).to.equal(200);
    const report = await reconcile({
      stores: settlementStores(stack.gw.db),
      publicClient: chain.publicClient,
      escrowAddress: chain.deployment.escrow,
      fromBlock: chain.deployment.deployBlock,
    });
    expect(report.differences).to.deep.equal([]);
    expect(report.ok).to.equal(true);
    const x402Payments = await stack.gw.db.value<bigint>("SELECT COUNT(*) FROM x402_payments WHERE status = 'settled'");
    expect(Number(x402Payments)).to.be.greaterThan(0);
    // The seller's earnings (what the dashboard shows): every settled x402 share, all of it claimable on-chain.
    const earnings = await earningsOf(settlementStores(stack.gw.db), stack.sellerId, chain.publicClient, chain.deployment.escrow);
    expect(earnings.settledMicros).to.equal(BigInt(x402Payments!) * 1_800n);
    expect(earnings.claimableMicros).to.equal(earnings.settledMicros);
    expect(earnings.pendingMicros).to.equal(0n);
    await assertBalanced(stack.gw.db);
  });
});

/**
 * A crash between the chain and the books: payments a gateway left open are resolved when it starts again, from
 * what the chain says. One was reserved and never sent (closed, nothing paid); one was collected but its call never
 * ran (refunded); one was answered and its completion never mined (completed now, once, with its ledger entry); one
 * is still in flight and valid (left waiting); one was completed on-chain but never recorded (recorded now).
 */
describe("x402: payments left open by a crash are resolved at the next start", () => {
  let chain: LocalChain;
  let snapshot: string;
  const usdcBalance = (address: Address) =>
    chain.publicClient.readContract({
      address: chain.deployment.usdc,
      abi: usdcAbi,
      functionName: "balanceOf",
      args: [address],
    }) as Promise<bigint>;

  before(async function () {
    this.timeout(120_000);
    chain = await startLocalChain();
    snapshot = await chain.snapshot();
  });
  // Each test's books start empty: so does its chain (an escrow whose events no test's ledger has would not reconcile).
  afterEach(async () => {
    await chain.revert(snapshot);
    snapshot = await chain.snapshot();
  });
  after(async () => {
    if (snapshot) await chain.revert(snapshot);
  });

  it("a completion mined but not recorded (the books' commit failed): the payment stays open, and the next start records it", async function () {
    this.timeout(120_000);
    const wallets = await hre.viem.getWalletClients();
    const seller = wallets[9].account.address;
    const connection = await gatewayChain(chain);
    const folder = fs.mkdtempSync(path.join(os.tmpdir(), "skill-gw-x402-"));
    const dbPath = path.join(folder, "gateway.db");
    const first = await startStack({ dbPath, gateway: { chain: connection } });
    expect((await linkAddress(first.gw.ledger, { accountId: first.sellerId, address: seller })).ok).to.equal(true);
    await first.addSkill("paid", "/echo", { priceMicros: 2_000n });
    const payer = privateKeyToAccount(generatePrivateKey());
    await chain.mintUsdc(payer.address, 10_000n);
    const paidFetch = wrapFetchWithPaymentFromConfig(fetch, {
      schemes: [{ network: "eip155:*", client: new ExactEvmScheme(payer) }],
      spendControls: { allowedAssets: [{ network: "eip155:8453", asset: chain.deployment.usdc, maxAmountPerPayment: "10000" }] },
    });
    // The books' transaction fails once, after the chain has the completion.
    const ledger = first.gw.ledger;
    const original = ledger.recordX402Payment.bind(ledger);
    ledger.recordX402Payment = async () => {
      ledger.recordX402Payment = original;
      throw new Error("disk full");
    };
    const res = await paidFetch(`${first.url}/x402/skills/paid/call`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    expect(res.status).to.equal(500);
    const callId = res.headers.get("x-call-id");
    const open = await first.gw.db.one<{ call_id: string; status: string }>("SELECT call_id, status FROM x402_payments");
    expect(open?.status).to.equal("collected");
    if (callId) expect(open?.call_id).to.equal(callId);
    expect(await usdcBalance(payer.address)).to.equal(8_000n);
    await first.close();

    const second = await startStack({ dbPath, gateway: { chain: connection } });
    try {
      expect((await new X402PaymentsStore(second.gw.db).get(open!.call_id))?.status).to.equal("settled");
      expect(await second.earned()).to.equal(1_800n);
      await assertBalanced(second.gw.db);
      const report = await reconcile({
        stores: settlementStores(second.gw.db),
        publicClient: chain.publicClient,
        escrowAddress: chain.deployment.escrow,
        fromBlock: chain.deployment.deployBlock,
      });
      expect(report.differences).to.deep.equal([]);
    } finally {
      await second.close();
      fs.rmSync(folder, { recursive: true, force: true });
    }
  });

  it("refunds a collection the crash left unrecorded, completes a decided completion, closes the unsent one, leaves the in-flight one", async function () {
    this.timeout(120_000);
    const wallets = await hre.viem.getWalletClients();
    const seller = wallets[8].account.address;
    const gatewayChainConnection = await gatewayChain(chain);
    // The database outlives the first gateway (a stack removes only its own temporary folder).
    const folder = fs.mkdtempSync(path.join(os.tmpdir(), "skill-gw-x402-"));
    const dbPath = path.join(folder, "gateway.db");
    const first = await startStack({ dbPath, gateway: { chain: gatewayChainConnection } });
    expect((await linkAddress(first.gw.ledger, { accountId: first.sellerId, address: seller })).ok).to.equal(true);
    const skill = await first.addSkill("paid", "/echo", { priceMicros: 2_000n });

    const payer = privateKeyToAccount(generatePrivateKey());
    await chain.mintUsdc(payer.address, 1_000_000n);
    const nowS = BigInt(Math.floor(Date.now() / 1000));
    const authorize = async () => {
      const nonce = `0x${Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("hex")}` as Hex;
      const message = {
        from: payer.address,
        to: chain.deployment.escrow,
        value: 2_000n,
        validAfter: 0n,
        validBefore: nowS + 3_600n,
        nonce,
      };
      const signature = await payer.signTypedData({
        domain: { name: "USD Coin", version: "2", chainId: 8453, verifyingContract: chain.deployment.usdc },
        types: {
          TransferWithAuthorization: [
            { name: "from", type: "address" },
            { name: "to", type: "address" },
            { name: "value", type: "uint256" },
            { name: "validAfter", type: "uint256" },
            { name: "validBefore", type: "uint256" },
            { name: "nonce", type: "bytes32" },
          ],
        },
        primaryType: "TransferWithAuthorization",
        message,
      });
      return { ...message, signature };
    };
    const payments = new X402PaymentsStore(first.gw.db);
    const reserve = async (callId: string, auth: Awaited<ReturnType<typeof authorize>>) =>
      expect(
        await payments.reserve(
          {
            callId,
            skillId: skill.id,
            sellerAccountId: first.sellerId,
            payer: auth.from.toLowerCase(),
            nonce: auth.nonce,
            validAfter: 0n,
            validBefore: auth.validBefore,
            amountMicros: 2_000n,
            sellerMicros: 1_800n,
            feeMicros: 200n,
          },
          null,
          Date.now(),
          1_000_000n,
        ),
      ).to.deep.include({ kind: "reserved" });
    const settler = new EscrowX402Settler({
      publicClient: chain.publicClient,
      walletClient: gatewayChainConnection.x402Wallet!,
      escrowAddress: chain.deployment.escrow,
    });
    const ids = ["01", "02", "03", "04"].map((n) => `0195f0a0-0000-7000-8000-0000000000${n}`);

    // 1. Collected on-chain, then the "crash" before the books knew: the call never ran.
    const collectedAuth = await authorize();
    await reserve(ids[0], collectedAuth);
    expect(await payments.markCollecting(ids[0], await chain.publicClient.getBlockNumber({ cacheTime: 0 }))).to.equal(true);
    expect((await settler.collect(collectedAuth, seller, 200n, callIdToBytes32(ids[0]))).kind).to.equal("mined");
    // 2. Reserved, never sent.
    await reserve(ids[1], await authorize());
    // 3. Collecting when the crash came, not on-chain, still valid: its fate is not known yet.
    await reserve(ids[2], await authorize());
    expect(await payments.markCollecting(ids[2], await chain.publicClient.getBlockNumber({ cacheTime: 0 }))).to.equal(true);
    // 4. Collected, answered, its completion decided but never mined.
    const answeredAuth = await authorize();
    await reserve(ids[3], answeredAuth);
    expect(await payments.markCollecting(ids[3], await chain.publicClient.getBlockNumber({ cacheTime: 0 }))).to.equal(true);
    const answered = await settler.collect(answeredAuth, seller, 200n, callIdToBytes32(ids[3]));
    if (answered.kind !== "mined") throw new Error(`collect: ${answered.kind}`);
    expect(await payments.markCollected(ids[3], answered.txHash, answered.pending)).to.equal(true);
    await first.gw.db.transaction(async (tx) => expect(await payments.markDecided(ids[3], "completing", tx)).to.equal(true));
    expect(await usdcBalance(payer.address)).to.equal(1_000_000n - 4_000n);
    await first.close();

    const second = await startStack({ dbPath, gateway: { chain: gatewayChainConnection } });
    try {
      const status = async (callId: string) => (await new X402PaymentsStore(second.gw.db).get(callId))?.status;
      expect(await Promise.all(ids.map(status))).to.deep.equal(["refunded", "released", "collecting", "settled"]);
      // The unanswered call's payment went back; the answered one's paid the seller.
      expect(await usdcBalance(payer.address)).to.equal(1_000_000n - 2_000n);
      expect(await second.earned()).to.equal(1_800n);
      expect(
        await chain.publicClient.readContract({ address: chain.deployment.escrow, abi: escrowAbi, functionName: "x402PendingTotal" }),
      ).to.equal(0n);
      const lines = await second.gw.db.all<{ id: string; http_status: number; charged_micros: bigint }>(
        "SELECT id, http_status, charged_micros FROM calls ORDER BY id",
      );
      expect(lines.map((l) => [l.id, Number(l.http_status), l.charged_micros])).to.deep.equal([
        [ids[0], 500, 0n],
        [ids[1], 500, 0n],
        [ids[3], 200, 2_000n],
      ]);
      await assertBalanced(second.gw.db);
      const report = await reconcile({
        stores: settlementStores(second.gw.db),
        publicClient: chain.publicClient,
        escrowAddress: chain.deployment.escrow,
        fromBlock: chain.deployment.deployBlock,
      });
      expect(report.differences).to.deep.equal([]);
    } finally {
      await second.close();
      fs.rmSync(folder, { recursive: true, force: true });
    }
  });
});
