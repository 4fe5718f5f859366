/**
 * A gateway settling on the local chain, for tests/test_receipts.py: the in-process Hardhat chain served over
 * JSON-RPC on HTTP (test/helpers/receipt-stack.ts), two paid calls settled in one batch and one paid call left
 * unsettled, announced as one JSON line on stdout. A line `stop-gateway` on stdin stops the gateway (the chain and
 * its RPC stay up) and is answered `stopped`; it runs until its stdin closes.
 *
 *   node -r ts-node/register/transpile-only clients/python/tests/receipt_server.ts
 */
import readline from "node:readline";
import { startReceiptStack } from "../../../test/helpers/receipt-stack";

async function main(): Promise<void> {
  const s = await startReceiptStack();
  const callId = await s.paidCall();
  const otherCallId = await s.paidCall();
  const batch = await s.settle();
  const waitingCallId = await s.paidCall();
  process.stdout.write(
    JSON.stringify({
      url: s.stack.url,
      key: s.stack.key,
      rpc_url: s.rpc.url,
      escrow: s.chain.deployment.escrow,
      usdc: s.chain.deployment.usdc,
      batch,
      call_id: callId,
      other_call_id: otherCallId,
      waiting_call_id: waitingCallId,
    }) + "\n",
  );
  let closing = false;
  const close = async () => {
    if (closing) return;
    closing = true;
    await s.close();
    process.exit(0);
  };
  const lines = readline.createInterface({ input: process.stdin });
  lines.on("line", (line) => {
    if (line.trim() === "stop-gateway") void s.stopGateway().then(() => process.stdout.write("stopped\n"));
  });
  lines.on("close", close);
  process.on("SIGTERM", close);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
