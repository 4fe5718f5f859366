/**
 * What a log line says of a caught error: its short message, the contract function it was calling, and the chain of its
 * causes, each in a line. Never the whole error object: pino's serializer writes every property of an error, and a
 * viem ContractFunctionExecutionError carries the contract's whole ABI and the call's arguments, so that one line about
 * a chain node that went away was about 15 KB, written again at every retry.
 *
 * Like config.ts and errors.ts, this file sits outside the layers: any part may import it, and it imports nothing.
 */

/** The most causes followed: a chain longer than this is cut (a cycle too). */
const CAUSES_MAX = 5;
/** The longest text kept of one message, and the most stack frames kept. */
const MESSAGE_CHARS_MAX = 300;
const STACK_FRAMES_MAX = 8;

/** A caught error as a log line carries it. */
export interface LoggedError {
  /** The error's class, e.g. ContractFunctionExecutionError. */
  type: string;
  /** Its short message (viem's shortMessage), on one line. */
  message: string;
  /** The contract function it was calling, for a viem contract error. */
  function?: string;
  /** The contract it was calling. */
  contract?: string;
  /** Each cause's class and short message, outermost first; the last one's details (an RPC's own words) besides. */
  causes: string[];
  /** Where it was thrown: the first frames of its stack, without the message the stack repeats. */
  stack?: string;
}

function oneLine(text: string): string {
  const line = text.replace(/\s+/g, " ").trim();
  return line.length > MESSAGE_CHARS_MAX ? `${line.slice(0, MESSAGE_CHARS_MAX)}...` : line;
}

function shortMessageOf(error: Error): string {
  const short = (error as { shortMessage?: unknown }).shortMessage;
  return oneLine(typeof short === "string" && short !== "" ? short : (error.message.split("\n")[0] ?? ""));
}

/** The summary of `error` for a log line: small whatever the error holds. */
export function loggedError(error: unknown): LoggedError {
  if (!(error instanceof Error)) return { type: typeof error, message: oneLine(String(error)), causes: [] };
  const fields = error as { functionName?: unknown; contractAddress?: unknown };
  const causes: string[] = [];
  const seen = new Set<unknown>([error]);
  let cause: unknown = error.cause;
  while (cause !== undefined && cause !== null && causes.length < CAUSES_MAX && !seen.has(cause)) {
    seen.add(cause);
    if (cause instanceof Error) {
      const details = (cause as { details?: unknown }).details;
      const last = !(cause.cause instanceof Error);
      causes.push(
        `${cause.name}: ${shortMessageOf(cause)}${last && typeof details === "string" && details !== "" ? ` (${oneLine(details)})` : ""}`,
      );
      cause = cause.cause;
    } else {
      causes.push(oneLine(String(cause)));
      break;
    }
  }
  const frames = (error.stack ?? "")
    .split("\n")
    .filter((line) => /^\s+at /.test(line))
    .slice(0, STACK_FRAMES_MAX)
    .map((line) => line.trim());
  return {
    type: error.name,
    message: shortMessageOf(error),
    ...(typeof fields.functionName === "string" ? { function: fields.functionName } : {}),
    ...(typeof fields.contractAddress === "string" ? { contract: fields.contractAddress } : {}),
    causes,
    ...(frames.length > 0 ? { stack: frames.join("\n") } : {}),
  };
}

/** The same on one line of text, for a log written with console.error. */
export function loggedErrorText(error: unknown): string {
  const summary = loggedError(error);
  const where = summary.function ? ` in ${summary.function}${summary.contract ? ` of ${summary.contract}` : ""}` : "";
  return [`${summary.type}${where}: ${summary.message}`, ...summary.causes.map((cause) => `caused by ${cause}`)].join("; ");
}
