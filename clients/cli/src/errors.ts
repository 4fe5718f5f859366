import { formatUsd } from "./skill-md";

/**
 * The CLI's failures and their exit codes. Every failure prints one line on stderr and exits
 * with the code of its kind, so a script can tell "add funds" from "fix the input" without
 * parsing text. The SDK's errors are mapped by their HTTP status and code.
 */

/** Exit codes, in the README's table. */
export const EXIT = {
  ok: 0,
  /** A bug or an unexpected failure. */
  internal: 1,
  /** Bad arguments or options: an unknown command, an --input that is not a JSON object, ... */
  usage: 2,
  /** No such skill in the marketplace, or not in the manifest. */
  notFound: 3,
  /** No API key, or the gateway refused it (401). */
  auth: 4,
  /** The balance is below the call's price (402). */
  insufficientBalance: 5,
  /** A rate limit or the daily limit (429). */
  rateLimited: 6,
  /** The input was refused: by the skill's schema or by its backend (400). */
  badInput: 7,
  /** The skill's backend failed, timed out or answered something unusable (502). */
  skillFailed: 8,
  /** The gateway failed (500, other statuses) or could not be reached. */
  gateway: 9,
  /** The manifest or a file the CLI would write is unusable. */
  manifest: 10,
  /** The API key's spending limit for its period is reached (402 key_spend_limit_reached): wait for its reset, or raise it. */
  spendLimit: 11,
  /** The skill costs more than the call's cap (409 price_above_max): its price rose since it was pinned; re-add it to accept. */
  priceAboveMax: 12,
  /** `verify`: the receipt was changed (its fields do not hash to its leaf, or its call ids disagree). */
  receiptTampered: 13,
  /** `verify`: the proof does not lead from the receipt to the escrow's root for its batch. */
  receiptWrongProof: 14,
  /** `verify`: the call is not settled yet (not charged, waiting for its batch, or the batch is not on the chain). */
  receiptUnsettled: 15,
  /** `verify`: the RPC did not answer. */
  chainUnreachable: 16,
  /** `verify`: the RPC serves another chain than the receipt's, or no escrow at its address. */
  wrongChain: 17,
  /**
   * The API key may not do this (403): a scope it lacks (`scope_missing`), a skill it may not call
   * (`skill_not_allowed`), a key wider than itself (`authority_exceeded`). Retrying cannot help, unlike exit 9.
   */
  forbidden: 18,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** A failure the CLI reports as is: its message is the one line printed. */
export class CliError extends Error {
  override readonly name = "CliError";
  constructor(
    message: string,
    readonly exitCode: ExitCode,
    readonly code: string,
  ) {
    super(message);
  }
}

/** The shape of the SDK's SkillGatewayError that the mapping needs (no runtime import of the SDK). */
interface GatewayErrorLike {
  status: number | undefined;
  code: string;
  message: string;
  /** PriceAboveMaxError's: what the skill costs now, in USD. */
  price?: number;
}

function isGatewayError(error: unknown): error is GatewayErrorLike {
  return error instanceof Error && typeof (error as { code?: unknown }).code === "string" && "status" in error;
}

/** The exit code for any thrown value: CliError's own, the SDK's by status (and by code within 402), else internal. */
export function exitCodeFor(error: unknown): ExitCode {
  if (error instanceof CliError) return error.exitCode;
  if (isGatewayError(error)) {
    // Adding funds does not lift a key's spending limit: a script tells the two 402s apart.
    if (error.status === 402 && error.code === "key_spend_limit_reached") return EXIT.spendLimit;
    if (isPriceAboveMax(error)) return EXIT.priceAboveMax;
    switch (error.status) {
      case 400:
        return EXIT.badInput;
      case 401:
        return EXIT.auth;
      case 402:
        return EXIT.insufficientBalance;
      case 403:
        return EXIT.forbidden;
      case 404:
        return EXIT.notFound;
      case 429:
        return EXIT.rateLimited;
      case 502:
        return EXIT.skillFailed;
      default:
        return EXIT.gateway;
    }
  }
  return EXIT.internal;
}

/** The stable snake_case code reported with --json: the gateway's, the CLI's, or `internal_error`. */
export function errorCodeFor(error: unknown): string {
  if (error instanceof CliError || isGatewayError(error)) return error.code;
  return "internal_error";
}

function isPriceAboveMax(error: GatewayErrorLike): boolean {
  return error.status === 409 && error.code === "price_above_max";
}

/**
 * The failure of a call of a pinned skill (one `add` wrote into the manifest, whose calls carry the price it was added
 * at as their max_price) that the gateway refused because the skill now costs more: one sentence with both prices and
 * how to accept the new one, instead of the gateway's, which speaks of max_price. Any other error is returned as is.
 */
export function pinnedPriceError(error: unknown, skill: { slug: string; price: number }): unknown {
  if (!isGatewayError(error) || !isPriceAboveMax(error)) return error;
  const now = typeof error.price === "number" ? ` to ${formatUsd(error.price)}` : "";
  const pinned = skill.price > 0 ? `at ${formatUsd(skill.price)}` : "free";
  return new CliError(
    `The price of ${skill.slug} rose${now} per call since it was added ${pinned}: nothing was charged. Re-add the skill to accept the new price: skill-gateway add ${skill.slug}`,
    EXIT.priceAboveMax,
    "price_above_max",
  );
}

/** The one line printed for a failure. */
export function errorMessageFor(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.replace(/\s*\n\s*/g, " ").trim() || "unknown error";
}
