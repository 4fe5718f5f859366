/**
 * What the model reads when a call fails in an expected way. The SDK's errors are recognised by
 * their HTTP status (duck-typed, so two copies of the SDK in one install still match): 400, 402,
 * 429, 502 and 409 price_above_max become one line the model can act on; anything else is not
 * the model's to fix (a bad API key, an unknown skill, the gateway down) and is thrown. The line
 * says each thing once: the gateway's own words are not prefixed with what they already say.
 */

/** The shape of the SDK's SkillGatewayError that the mapping needs. */
interface GatewayErrorLike {
  status: number | undefined;
  code: string;
  message: string;
  retryAfterMs?: number;
  /** The typed numbers of InsufficientBalanceError and PriceAboveMaxError (USD), when the gateway sent them. */
  price?: number;
  available?: number;
  maxPrice?: number;
}

function isGatewayError(error: unknown): error is GatewayErrorLike {
  return error instanceof Error && typeof (error as { code?: unknown }).code === "string" && "status" in error;
}

/** A failure reported to the model rather than thrown. */
export interface SkillToolFailure {
  /** The one line the model reads. */
  message: string;
  /** The gateway's snake_case code: `insufficient_balance`, `rate_limited`, ... */
  code: string;
  status: number;
  /** For a 429: when to retry, when the gateway said. */
  retryAfterMs?: number;
}

const oneLine = (text: string) =>
  text
    .replace(/\s*\n\s*/g, " ")
    .trim()
    .replace(/([^.!?])$/, "$1.");

/** `label: said`, or `said` alone when it already begins with the label's words (the gateway's "Insufficient balance: ..."). */
const labelled = (label: string, said: string) => (said.toLowerCase().startsWith(label.toLowerCase()) ? said : `${label}: ${said}`);

/** " Nothing was charged.", unless the gateway's words already say so ("You were not charged."). */
const uncharged = (said: string) => (/not charged|nothing was charged/i.test(said) ? "" : " Nothing was charged.");

/** A price as the tool descriptions write it: `$0.001`, without float noise. */
const usd = (value: number) => `$${Number(value.toPrecision(12))}`;

/** The failure to report for an expected error (400, 402, 409 price_above_max, 429, 502), or null: throw it. */
export function failureOf(error: unknown, slug: string): SkillToolFailure | null {
  if (!isGatewayError(error) || error.status === undefined) return null;
  const said = oneLine(error.message);
  const base = { code: error.code, status: error.status };
  switch (error.status) {
    case 402: {
      // Adding funds does not lift a key's spending limit: the model is told its paid calls stop until then. The
      // gateway's message names the limit, what is spent and when it resets.
      if (error.code === "key_spend_limit_reached") {
        return {
          ...base,
          message: `${said}${uncharged(said)} Paid calls with this API key, of ${slug} or any other skill, are refused until the limit allows them.`,
        };
      }
      const shortfall =
        error.price !== undefined && error.available !== undefined
          ? `Insufficient balance: calling ${slug} costs ${usd(error.price)} and ${usd(error.available)} is available.`
          : labelled("Insufficient balance", said);
      return {
        ...base,
        message: `${shortfall}${uncharged(shortfall)} Add funds to the Skill Gateway account before calling ${slug} again.`,
      };
    }
    case 409: {
      // The tool was made at a price (its description says it, and every call carries it as max_price): the seller
      // has raised it since. The model cannot accept a new price; the person who added the skill can.
      if (error.code !== "price_above_max") return null;
      const rose = error.price !== undefined ? ` to ${usd(error.price)} per call` : "";
      const pinned = error.maxPrice !== undefined ? `, above the ${usd(error.maxPrice)} this tool was made at` : "";
      return {
        ...base,
        message: `The price of ${slug} rose${rose}${pinned}: nothing was charged. Do without it, or ask the user to re-add the skill (skill-gateway add ${slug}) or make the tool again to accept the new price.`,
      };
    }
    case 429: {
      const wait = error.retryAfterMs !== undefined ? ` Retry after ${Math.ceil(error.retryAfterMs / 1000)} s.` : " Retry later.";
      // The gateway's per-minute refusal says "Rate limit exceeded: ..."; its daily cap's does not say rate limit.
      const limited = /^rate limit/i.test(said) ? said : `Rate limited: ${said}`;
      return { ...base, retryAfterMs: error.retryAfterMs, message: `${limited}${uncharged(limited)}${wait}` };
    }
    case 400:
      return { ...base, message: `Invalid input for ${slug}: ${said}${uncharged(said)} Fix the arguments and call again.` };
    case 502:
      return { ...base, message: `The skill ${slug} failed: ${said}${uncharged(said)} You may retry, or do without it.` };
    default:
      return null;
  }
}
