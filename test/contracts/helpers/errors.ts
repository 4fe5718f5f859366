import { AssertionError, expect } from "chai";
import {
  BaseError,
  ContractFunctionExecutionError,
  ContractFunctionRevertedError,
  decodeErrorResult,
  isHex,
  type Abi,
  type Hex,
} from "viem";

/** Addresses come back checksummed from the decoder; compare them case-insensitively. */
function normalize(value: unknown): unknown {
  if (typeof value === "string" && /^0x[0-9a-fA-F]{40}$/.test(value)) return value.toLowerCase();
  if (Array.isArray(value)) return value.map(normalize);
  return value;
}

export type DecodedRevert = { errorName: string; args: readonly unknown[] };

type Cause = { cause?: unknown; data?: unknown };

/** Raw revert data found anywhere in the cause chain (a 0x-prefixed hex `data` field). */
function findRawRevertData(error: unknown): Hex | undefined {
  for (let cause: unknown = error; cause && typeof cause === "object"; cause = (cause as Cause).cause) {
    const data = (cause as Cause).data;
    if (typeof data === "string" && isHex(data) && data.length >= 10) return data;
    if (data && typeof data === "object" && typeof (data as Cause).data === "string") {
      const nested = (data as Cause).data as string;
      if (isHex(nested) && nested.length >= 10) return nested;
    }
  }
  return undefined;
}

/**
 * Finds the custom error a failed viem contract call reverted with, by name and arguments.
 *
 * Over HTTP (a `hardhat node`, a real chain) viem puts a decoded ContractFunctionRevertedError in the cause
 * chain. Hardhat 2's in-process network does not (NomicFoundation/hardhat#6856): viem sees an UnknownRpcError
 * whose cause, Hardhat's SolidityError, carries the raw revert data. The raw data is then decoded here with the
 * ABI viem attached to the ContractFunctionExecutionError, plus `extraAbis` for errors raised by another
 * contract (e.g. the token, bubbled up by SafeERC20). Throws if `error` is not a decodable contract revert, so
 * a test can never pass on an unrelated failure.
 */
export function decodeRevert(error: unknown, extraAbis: readonly Abi[] = []): DecodedRevert {
  const describe = () => (error instanceof Error ? error.message : String(error));
  if (!(error instanceof BaseError)) throw new AssertionError(`expected a viem contract error, got: ${describe()}`);

  const reverted = error.walk((cause) => cause instanceof ContractFunctionRevertedError);
  if (reverted instanceof ContractFunctionRevertedError && reverted.data?.errorName) {
    return { errorName: reverted.data.errorName, args: reverted.data.args ?? [] };
  }

  const execution = error.walk((cause) => cause instanceof ContractFunctionExecutionError);
  const abis = [...(execution instanceof ContractFunctionExecutionError ? [execution.abi] : []), ...extraAbis];
  const raw = (reverted instanceof ContractFunctionRevertedError ? reverted.raw : undefined) ?? findRawRevertData(error);
  if (!raw || raw === "0x") throw new AssertionError(`expected a revert with data, got: ${describe()}`);
  try {
    const decoded = decodeErrorResult({ abi: abis.flat() as Abi, data: raw });
    return { errorName: decoded.errorName, args: decoded.args ?? [] };
  } catch {
    throw new AssertionError(`revert data ${raw.slice(0, 10)} matches no error in the given ABIs: ${describe()}`);
  }
}

/**
 * Asserts that `call` reverts with the custom error `errorName` and exactly the arguments `args`.
 * Never a bare "expect revert": the name and every argument are checked.
 */
export async function expectRevert(
  call: Promise<unknown>,
  errorName: string,
  args: readonly unknown[] = [],
  extraAbis: readonly Abi[] = [],
): Promise<void> {
  let outcome: unknown;
  try {
    outcome = await call;
  } catch (error) {
    const decoded = decodeRevert(error, extraAbis);
    expect(decoded.errorName, "error name").to.equal(errorName);
    expect(normalize(decoded.args), `arguments of ${errorName}`).to.deep.equal(normalize(args));
    return;
  }
  throw new AssertionError(`expected a revert with ${errorName}, but the call succeeded (${String(outcome)})`);
}
