import { ApiError } from "./errors";

/** An integer query parameter within [min, max]; `fallback` when absent, 400 when malformed. */
export function intParam(raw: unknown, name: string, fallback: number, min: number, max: number): number {
  if (raw === undefined) return fallback;
  if (typeof raw !== "string" || !/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
    throw new ApiError("invalid_request", `${name} must be an integer from ${min} to ${max}.`);
  }
  return Number(raw);
}
