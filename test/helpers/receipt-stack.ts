import hre from "hardhat";
// hre.viem's types, for the client packages' tsconfigs that compile this helper without hardhat.config.ts.
import type {} from "@nomicfoundation/hardhat-viem";
import { linkAddress } from "../../server/settlement/addresses";
import { type LocalChain, USDC, gatewayChain, startLocalChain } from "./chain";
import { type TestStack, startStack } from "./gateway";
import { type RpcBridge, startRpcBridge } from "./rpc-bridge";

/**
 * A gateway settling on the in-process chain, for the receipt verifiers' tests (the SDK's verifyReceipt, the CLI's
 * `verify`, the Python client's verify_receipt): a buyer with 10 USDC deposited on-chain, a seller with a wallet
 * address, the chain served over HTTP (./rpc-bridge.ts), and settlement run only when a test asks (`settle`).
 */
export interface ReceiptStack {
  chain: LocalChain;
  stack: TestStack;
  rpc: RpcBridge;
  /** A paid call of `echo` ($0.001); resolves with its call id. */
  paidCall(): Promise<string>;
  /** Posts the batch of every paid call not yet settled; resolves with its number. */
  settle(): Promise<number>;
  /** GET /v1/calls/:callId/receipt's whole answer (the envelope), as a user would save it. */
  receipt(callId: string): Promise<{ success: true; data: Record<string, any> }>;
  /** Stops the gateway (and its backend) for good; the chain and its RPC stay up. */
  stopGateway(): Promise<void>;
  close(): Promise<void>;
}

export async function startReceiptStack(): Promise<ReceiptStack> {
  const chain = await startLocalChain();
  const snapshot = await chain.snapshot();
  const seller = (await hre.viem.getWalletClients())[6].account.address;
  const stack = await startStack({
    buyerUsd: "0",
    // Settled when a test says so, never by the loop meanwhile.
    config: { settleIntervalMs: 86_400_000 },
    gateway: { chain: await gatewayChain(chain) },
  });
  const rpc = await startRpcBridge();
  for (const [accountId, address] of [
    [stack.buyerId, chain.address("alice")],
    [stack.sellerId, seller],
  ] as const) {
    const linked = await linkAddress(stack.gw.ledger, { accountId, address });
    if (!linked.ok) throw new Error(`linking ${address}: ${linked.reason}`);
  }
  let gatewayStopped = false;
  await chain.deposit("alice", 10n * USDC);
  await stack.gw.moneyPath!.indexer.poll();

  return {
    chain,
    stack,
    rpc,
    paidCall: async () => {
      const res = await stack.post("/v1/call", { skill_id: "echo", input: { text: "hi" } });
      if (res.status !== 200) throw new Error(`the paid call failed: ${res.status} ${JSON.stringify(res.body)}`);
      return res.body.metadata.call_id as string;
    },
    settle: async () => {
      const run = await stack.gw.moneyPath!.settler!.runOnce();
      if (!("batch" in run) || typeof run.batch !== "number") throw new Error(`nothing settled: ${JSON.stringify(run)}`);
      return run.batch;
    },
    receipt: async (callId) => {
      const res = await stack.get(`/v1/calls/${callId}/receipt`);
      if (res.status !== 200) throw new Error(`GET receipt: ${res.status} ${JSON.stringify(res.body)}`);
      return res.body;
    },
    stopGateway: async () => {
      gatewayStopped = true;
      await stack.close();
    },
    close: async () => {
      await rpc.close();
      if (!gatewayStopped) await stack.close();
      await chain.revert(snapshot);
    },
  };
}
