/**
 * What the model reads when a call fails in an expected way. The SDK's errors are recognised by
 * their HTTP status (duck-typed, so two copies of the SDK in one install still match): 400, 402,
 * 429 and 502 become one line the model can act on; anything else is not the model's to fix
 * (a bad API key, an unknown skill, the gateway down) and is thrown.
 */

/** The shape of the SDK's SkillGatewayError that the mapping needs. */
interface GatewayErrorLike {
  status: number | undefined;
  code: string;
  message: string;
  retryAfterMs?: number;
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

/** The failure to report for an expected error (400, 402, 429, 502), or null: throw it. */
export function failureOf(error: unknown, slug: string): SkillToolFailure | null {
  if (!isGatewayError(error) || error.status === undefined) return null;
  const said = oneLine(error.message);
  const base = { code: error.code, status: error.status };
  switch (error.status) {
    case 402:
      // Adding funds does not lift a key's spending limit: the model is told its paid calls stop until then.
      if (error.code === "key_spend_limit_reached") {
        return {
          ...base,
          message: `Spending limit reached: ${said} Nothing was charged. Calls of ${slug} or any paid skill with this API key are refused until the limit resets or its owner raises it.`,
        };
      }
      return {
        ...base,
        message: `Insufficient balance: ${said} Nothing was charged. Add funds to the Skill Gateway account before calling ${slug} again.`,
      };
    case 429: {
      const wait = error.retryAfterMs !== undefined ? ` Retry after ${Math.ceil(error.retryAfterMs / 1000)} s.` : " Retry later.";
      return { ...base, retryAfterMs: error.retryAfterMs, message: `Rate limited: ${said} Nothing was charged.${wait}` };
    }
    case 400:
      return { ...base, message: `Invalid input for ${slug}: ${said} Nothing was charged. Fix the arguments and call again.` };
    case 502:
      return { ...base, message: `The skill ${slug} failed: ${said} Nothing was charged. You may retry, or do without it.` };
    default:
      return null;
  }
}
