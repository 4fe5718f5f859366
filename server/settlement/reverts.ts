/**
 * Decoding a contract revert into the custom error it carries, whichever way the RPC passed it along.
 */
import { type Abi, BaseError, ContractFunctionRevertedError, decodeErrorResult, isHex } from "viem";
import { skillEscrowAbi } from "../chain/abi";

/** A contract revert, decoded. */
export type DecodedRevert = { errorName: string; args: readonly unknown[] };

/**
 * The custom error a contract call reverted with. Over HTTP viem decodes it (a ContractFunctionRevertedError
 * in the cause chain); Hardhat's in-process network only passes the raw revert data along, decoded here
 * against `abi` (the escrow's by default; a caller whose call reaches another contract adds that one's errors).
 * Undefined when the failure is not a decodable revert (a network error, say).
 */
export function decodeRevert(error: unknown, abi: Abi = skillEscrowAbi): DecodedRevert | undefined {
  if (error instanceof BaseError) {
    const reverted = error.walk((cause) => cause instanceof ContractFunctionRevertedError);
    if (reverted instanceof ContractFunctionRevertedError && reverted.data?.errorName) {
      return { errorName: reverted.data.errorName, args: reverted.data.args ?? [] };
    }
  }
  for (
    let cause: unknown = error, depth = 0;
    cause && typeof cause === "object" && depth < 16;
    cause = (cause as { cause?: unknown }).cause, depth++
  ) {
    for (const data of [
      (cause as { data?: unknown }).data,
      ((cause as { data?: { data?: unknown } }).data as { data?: unknown } | undefined)?.data,
    ]) {
      if (typeof data !== "string" || !isHex(data) || data.length < 10) continue;
      try {
        const decoded = decodeErrorResult({ abi, data });
        return { errorName: decoded.errorName, args: decoded.args ?? [] };
      } catch {
        // Not one of the escrow's errors; keep looking down the chain.
      }
    }
  }
  return undefined;
}
