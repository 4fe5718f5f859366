import { expect } from "chai";
import { getAddress } from "viem";
import { type ReceiptStack, startReceiptStack } from "../../../test/helpers/receipt-stack";
import { type ProvenReceipt, type ReceiptFailure, SkillGateway, type VerifyReceiptResult, verifyReceipt } from "../src";

/** A deep copy of a saved receipt with `change` applied: what someone editing the file would hand the verifier. */
function edited(saved: { data: Record<string, any> }, change: (data: Record<string, any>) => void): unknown {
  const copy = JSON.parse(JSON.stringify(saved)) as { data: Record<string, any> };
  change(copy.data);
  return copy;
}

function failure(result: VerifyReceiptResult): ReceiptFailure {
  if (result.ok) throw new Error(`expected a failure, got a proven receipt of call ${result.callId}`);
  return result;
}

function proven(result: VerifyReceiptResult): ProvenReceipt {
  if (!result.ok) throw new Error(`expected a proven receipt, got ${result.code}: ${result.message}`);
  return result;
}

describe("verifyReceipt against the local chain", function () {
  this.timeout(120_000);
  let s: ReceiptStack;
  let client: SkillGateway;
  let callId: string;
  let other: string;
  let saved: { success: true; data: Record<string, any> };
  let batch: number;

  before(async function () {
    s = await startReceiptStack();
    client = new SkillGateway({ apiKey: s.stack.key, baseUrl: s.stack.url, maxRetries: 0 });
    // Three calls in one batch: the proof of each has siblings.
    callId = await s.paidCall();
    other = await s.paidCall();
    await s.paidCall();
    batch = await s.settle();
    saved = await s.receipt(callId);
  });
  after(async function () {
    await s?.close();
  });

  it("proves a settled call's receipt fetched through the SDK: amount, seller share, fee, batch, block, escrow and leaf", async function () {
    const receipt = await client.receipt(callId);
    expect(receipt.status).to.equal("settled");
    const result = proven(await verifyReceipt(receipt, { rpcUrl: s.rpc.url, callId }));
    // echo costs $0.001: 1,000 micro-USDC, of which the platform's 10% fee is 100.
    expect(result).to.deep.include({
      callId,
      amountMicros: 1_000n,
      sellerShareMicros: 900n,
      platformFeeMicros: 100n,
      batchNumber: batch,
      chainId: 8453,
      escrow: s.chain.deployment.escrow,
      account: getAddress(s.chain.address("alice")),
    });
    const settled = (await s.stack.gw.moneyPath!.settler!.receiptFor(callId)) as { txHash: string; receiptsRoot: string };
    const tx = await s.chain.publicClient.getTransactionReceipt({ hash: settled.txHash as `0x${string}` });
    expect(result.blockNumber).to.equal(tx.blockNumber);
    expect(result.txHash).to.equal(settled.txHash);
    expect(result.confirmations).to.equal((await s.chain.head()) - tx.blockNumber + 1n);
    expect(result.receiptsRoot).to.equal(settled.receiptsRoot);
    expect(result.leaf).to.equal(saved.data.leaf);
    expect(s.rpc.requests).to.be.greaterThan(0);
  });

  it("refuses a receipt whose amount was changed: its fields no longer hash to its leaf (tampered_receipt)", async function () {
    const result = failure(
      await verifyReceipt(
        edited(saved, (d) => (d.receipt.amount = "2000")),
        { rpcUrl: s.rpc.url },
      ),
    );
    expect(result.code).to.equal("tampered_receipt");
    expect(result.message).to.match(/do not hash to its leaf/);
  });

  it("refuses a changed amount even without the leaf to compare: the proof no longer reaches the batch's root (wrong_proof)", async function () {
    const result = failure(
      await verifyReceipt(
        edited(saved, (d) => {
          d.receipt.amount = "999999";
          delete d.leaf;
        }),
        { rpcUrl: s.rpc.url },
      ),
    );
    expect(result.code).to.equal("wrong_proof");
  });

  it("refuses a proof with a wrong sibling (wrong_proof), naming the batch's root on the escrow", async function () {
    expect(saved.data.proof.length).to.be.greaterThan(0);
    const result = failure(
      await verifyReceipt(
        edited(saved, (d) => (d.proof[0] = `0x${"ab".repeat(32)}`)),
        { rpcUrl: s.rpc.url },
      ),
    );
    expect(result.code).to.equal("wrong_proof");
    expect(result.message).to.include(`batch ${batch}'s root ${saved.data.receipts_root}`);
  });

  it("refuses another call's proof with this call's receipt (wrong_proof)", async function () {
    const theirs = await s.receipt(other);
    const result = failure(
      await verifyReceipt(
        edited(saved, (d) => (d.proof = theirs.data.proof)),
        { rpcUrl: s.rpc.url },
      ),
    );
    expect(result.code).to.equal("wrong_proof");
  });

  it("refuses a receipt whose call ids disagree, or one for another call than the one asked (tampered_receipt)", async function () {
    const swapped = failure(
      await verifyReceipt(
        edited(saved, (d) => (d.call_id = other)),
        { rpcUrl: s.rpc.url },
      ),
    );
    expect(swapped.code).to.equal("tampered_receipt");
    const asked = failure(await verifyReceipt(saved, { rpcUrl: s.rpc.url, callId: other }));
    expect(asked.code).to.equal("tampered_receipt");
    expect(asked.message).to.equal(`This receipt is for call ${callId}, not for call ${other}.`);
  });

  it("says a charged call waiting for its batch is unsettled, from the gateway's answer and from a batch not on chain", async function () {
    const waiting = await s.paidCall();
    const answer = await client.receipt(waiting);
    expect(answer).to.deep.equal({ call_id: waiting, status: "unsettled" });
    const result = failure(await verifyReceipt(answer, { rpcUrl: s.rpc.url }));
    expect(result.code).to.equal("unsettled");
    expect(result.callId).to.equal(waiting);
    // A receipt naming a batch the escrow has not recorded.
    const ahead = failure(
      await verifyReceipt(
        edited(saved, (d) => (d.batch_number = batch + 5)),
        { rpcUrl: s.rpc.url },
      ),
    );
    expect(ahead.code).to.equal("unsettled");
    expect(ahead.message).to.include(`Batch ${batch + 5} is not on chain 8453`);
  });

  it("says when the chain does not answer (chain_unreachable), and when it holds no escrow there (wrong_chain)", async function () {
    const down = failure(await verifyReceipt(saved, { rpcUrl: "http://127.0.0.1:1", timeoutMs: 2_000 }));
    expect(down.code).to.equal("chain_unreachable");
    expect(down.message).to.match(/^The chain at http:\/\/127\.0\.0\.1:1 did not answer: /);
    const nowhere = failure(await verifyReceipt(saved, { rpcUrl: s.rpc.url, escrow: s.chain.address("bob") }));
    expect(nowhere.code).to.equal("wrong_chain");
    const otherChain = failure(
      await verifyReceipt(
        edited(saved, (d) => (d.chain_id = 1)),
        { rpcUrl: s.rpc.url },
      ),
    );
    expect(otherChain.code).to.equal("wrong_chain");
    expect(otherChain.message).to.equal(`The receipt is for chain 1, but ${s.rpc.url} serves chain 8453.`);
  });

  it("refuses what is not a receipt (invalid_receipt)", async function () {
    for (const bad of [null, "x", [], { call_id: callId, status: "settled" }, edited(saved, (d) => (d.receipt.amount = "-1"))]) {
      expect(failure(await verifyReceipt(bad, { rpcUrl: s.rpc.url })).code, JSON.stringify(bad)?.slice(0, 80)).to.equal("invalid_receipt");
    }
  });
  // Last: it stops the gateway.
  it("proves a saved receipt (the whole JSON answer, read back from a file) with the gateway stopped", async function () {
    const file = JSON.parse(JSON.stringify(saved));
    await s.stopGateway();
    const gone = await fetch(`${s.stack.url}/healthz`).then(
      () => "answered",
      () => "unreachable",
    );
    expect(gone).to.equal("unreachable");
    const result = proven(await verifyReceipt(file, { rpcUrl: s.rpc.url }));
    expect(result).to.deep.include({ callId, amountMicros: 1_000n, sellerShareMicros: 900n, platformFeeMicros: 100n, batchNumber: batch });
  });
});
