import { type Address, isAddress, zeroAddress } from "viem";
import { usdToMicros } from "../ledger/money";
import { ApiError } from "./errors";

/**
 * Fields of a JSON request body that several routes read the same way, each refused with a
 * 400 invalid_request that names the field.
 */

/** A JSON body that must be an object; an empty body is an empty object. */
export function objectBody(body: unknown): Record<string, unknown> {
  if (body === undefined || body === null || body === "") return {};
  if (typeof body !== "object" || Array.isArray(body)) throw new ApiError("invalid_request", "Body must be a JSON object.");
  return body as Record<string, unknown>;
}

/**
 * An optional USD amount ("1.50" or 1.5, at most 6 decimals) in base units; undefined when absent.
 * An empty string is refused, not read as absent: for a withdrawal, absent means "everything".
 */
export function optionalUsd(value: unknown, name: string): bigint | undefined {
  if (value === undefined || value === null) return undefined;
  try {
    if (typeof value !== "string" && typeof value !== "number") throw new RangeError("not a string or number");
    return usdToMicros(String(value));
  } catch {
    throw new ApiError("invalid_request", `${name} must be a USD amount with at most 6 decimals, e.g. "1.50".`);
  }
}

/** An address, EIP-55 checksummed or all lowercase, never the zero address. */
export function address(value: unknown, name: string): Address {
  if (typeof value !== "string" || !isAddress(value, { strict: true })) {
    throw new ApiError("invalid_request", `${name} must be a 0x-prefixed 20-byte address, EIP-55 checksummed or all lowercase.`);
  }
  if (value.toLowerCase() === zeroAddress) throw new ApiError("invalid_request", `${name} must not be the zero address.`);
  return value as Address;
}
