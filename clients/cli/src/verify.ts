// ---- `skill-gateway verify`: a call's charge, checked against the chain alone --------------------------------------
//
// `verify <call-id> --rpc <url>` fetches the call's receipt from the gateway once; `verify --receipt <file> --rpc <url>`
// reads one saved earlier and needs nothing from the gateway. Either way the SDK's verifyReceipt checks its Merkle
// proof against the escrow's batch root, read over the RPC URL given. Exit 0 only for a proven receipt; each failure
// has its own exit code (./errors.ts, EXIT) and --json code.

import fs from "node:fs";
import type { Command } from "commander";
import { type ProvenReceipt, type ReceiptFailureCode, microsToUsdText, verifyReceipt } from "@skill-gateway/sdk";
import { type CliConfig, accountClient } from "./config";
import { CliError, EXIT, type ExitCode } from "./errors";

/** The exit code of each way a receipt is not proven. */
export const RECEIPT_EXIT: Record<ReceiptFailureCode, ExitCode> = {
  invalid_receipt: EXIT.usage,
  tampered_receipt: EXIT.receiptTampered,
  wrong_proof: EXIT.receiptWrongProof,
  unsettled: EXIT.receiptUnsettled,
  wrong_chain: EXIT.wrongChain,
  chain_unreachable: EXIT.chainUnreachable,
};

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const usage = (message: string) => new CliError(message, EXIT.usage, "invalid_option");

interface VerifyOptions {
  rpc: string;
  receipt?: string;
  escrow?: string;
  save?: string;
}

/** What --json prints for a proven receipt: amounts as exact USD strings and as base units (micro-USDC). */
export function provenJson(p: ProvenReceipt): Record<string, unknown> {
  return {
    proven: true,
    call_id: p.callId,
    amount: microsToUsdText(p.amountMicros),
    amount_base_units: p.amountMicros.toString(),
    seller_share: microsToUsdText(p.sellerShareMicros),
    seller_share_base_units: p.sellerShareMicros.toString(),
    platform_fee: microsToUsdText(p.platformFeeMicros),
    platform_fee_base_units: p.platformFeeMicros.toString(),
    account: p.account,
    seller: p.seller,
    batch_number: p.batchNumber,
    receipts_root: p.receiptsRoot,
    leaf: p.leaf,
    escrow: p.escrow,
    chain_id: p.chainId,
    block_number: p.blockNumber === null ? null : Number(p.blockNumber),
    tx_hash: p.txHash,
    confirmations: p.confirmations === null ? null : Number(p.confirmations),
  };
}

/** The lines printed for a proven receipt. */
export function provenText(p: ProvenReceipt): string {
  const block =
    p.blockNumber === null
      ? "not confirmed by the receipt's transaction"
      : `${p.blockNumber} (tx ${p.txHash}, ${p.confirmations} confirmations)`;
  return [
    `Proven: call ${p.callId} is in batch ${p.batchNumber} of the escrow ${p.escrow} on chain ${p.chainId}.`,
    `  amount        $${microsToUsdText(p.amountMicros)} USDC, paid by ${p.account}`,
    `  seller share  $${microsToUsdText(p.sellerShareMicros)} USDC, to ${p.seller}`,
    `  platform fee  $${microsToUsdText(p.platformFeeMicros)} USDC`,
    `  batch         ${p.batchNumber}, root ${p.receiptsRoot}`,
    `  block         ${block}`,
    `  leaf          ${p.leaf}`,
    "",
  ].join("\n");
}

export function addVerifyCommand(
  program: Command,
  configOf: (cmd: Command) => CliConfig,
  print: (config: CliConfig, json: unknown, text: () => string) => void,
): void {
  program
    .command("verify")
    .description(
      "check a call's charge against the chain alone: its receipt's Merkle proof against the escrow's batch root, read over --rpc",
    )
    .argument("[call-id]", "the call's id (X-Call-Id, or metadata.call_id): its receipt is fetched from the gateway once")
    .requiredOption("--rpc <url>", "the chain's JSON-RPC URL, your own: the gateway is not asked")
    .option(
      "--receipt <file>",
      "a receipt saved earlier (the JSON GET /v1/calls/:id/receipt returns) instead of a call id: no gateway needed",
    )
    .option("--escrow <address>", "the SkillEscrow to check against (default: the one the receipt names)")
    .option("--save <file>", "with a call id: also write the fetched receipt there, to verify again later with --receipt")
    .addHelpText(
      "after",
      `
Exit codes: 0 proven; ${EXIT.usage} not a receipt (or bad usage); ${EXIT.receiptTampered} tampered (its fields do not hash to its leaf, or
its call ids disagree); ${EXIT.receiptWrongProof} wrong proof (it does not lead to the escrow's root for the batch); ${EXIT.receiptUnsettled} not settled yet;
${EXIT.chainUnreachable} the RPC did not answer; ${EXIT.wrongChain} the RPC's chain is not the receipt's, or has no escrow there. Fetching a
receipt fails as other commands do (3 unknown call, 4 no key, 9 gateway).
`,
    )
    .action(async (callId: string | undefined, options: VerifyOptions, cmd: Command) => {
      const config = configOf(cmd);
      if ((callId === undefined) === (options.receipt === undefined))
        throw usage("Name a call id, or a saved receipt with --receipt <file>: one of the two.");
      if (!/^https?:\/\/\S+$/i.test(options.rpc)) throw usage(`--rpc must be an http(s) JSON-RPC URL, not ${JSON.stringify(options.rpc)}.`);
      if (options.escrow !== undefined && !/^0x[0-9a-fA-F]{40}$/.test(options.escrow))
        throw usage(`--escrow must be an address (0x and 40 hex digits), not ${JSON.stringify(options.escrow)}.`);
      if (options.save !== undefined && callId === undefined)
        throw usage("--save writes a receipt fetched by call id; --receipt already names a file.");

      let receipt: unknown;
      if (callId !== undefined) {
        if (!UUID.test(callId)) throw usage(`A call id is a UUID, not ${JSON.stringify(callId)}.`);
        receipt = await accountClient(config).receipt(callId);
        if (options.save !== undefined) fs.writeFileSync(options.save, `${JSON.stringify(receipt, null, 2)}\n`);
      } else {
        let text: string;
        try {
          text = fs.readFileSync(options.receipt!, "utf8");
        } catch (error) {
          throw usage(
            `Cannot read the receipt file ${options.receipt}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}.`,
          );
        }
        try {
          receipt = JSON.parse(text);
        } catch {
          throw new CliError(
            `${options.receipt} is not JSON: expected a receipt saved from GET /v1/calls/:id/receipt.`,
            EXIT.usage,
            "invalid_receipt",
          );
        }
      }

      const result = await verifyReceipt(receipt, { rpcUrl: options.rpc, escrow: options.escrow, callId });
      if (!result.ok) throw new CliError(`Not proven: ${result.message}`, RECEIPT_EXIT[result.code], result.code);
      print(config, provenJson(result), () => provenText(result));
    });
}
