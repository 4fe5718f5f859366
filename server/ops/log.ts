import fs from "node:fs";
import pino, { type DestinationStream, type Logger } from "pino";
import { loggedError } from "../error-log";
import { currentRequest } from "./request-context";

/** LOG_LEVEL's values, pino's levels: `silent` logs nothing. */
export const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/**
 * Fields that are never written, where they appear in what is logged (top level, in `headers`
 * or `req.headers`, in a `detail`): API keys, session cookies, CSRF and e-mail link tokens,
 * secrets, private keys. The gateway never logs a request's headers or body in the first
 * place; this is the second line, for an object that reaches a log call by mistake.
 *
 * Exact paths, no wildcards: pino compiles exact paths into plain property checks, while a
 * wildcard path walks every key of every line, which measured about 100 µs per request line.
 */
const SECRET_FIELDS = [
  "authorization",
  "cookie",
  "token",
  "key",
  "apiKey",
  "api_key",
  "secret",
  "signingSecret",
  "signing_secret",
  "password",
  "privateKey",
  "private_key",
  "csrfToken",
  "csrf_token",
];
const HEADERS = ["authorization", "cookie", '["set-cookie"]', '["x-csrf-token"]'];
export const REDACT_PATHS = [
  ...SECRET_FIELDS,
  ...SECRET_FIELDS.map((field) => `detail.${field}`),
  ...HEADERS.map((header) => `headers${header.startsWith("[") ? "" : "."}${header}`),
  ...HEADERS.map((header) => `req.headers${header.startsWith("[") ? "" : "."}${header}`),
];

export interface CreateLoggerParameters {
  level: LogLevel;
  /** Human-readable lines (pino-pretty, in a worker thread) for a terminal; JSON lines otherwise. */
  pretty?: boolean;
  /** Where JSON lines go; standard output by default, written asynchronously. */
  destination?: DestinationStream;
}

/**
 * The gateway's logger: one JSON object a line, with the id of the request being answered
 * (`request_id`) added to every line written while answering it.
 */
export function createLogger(parameters: CreateLoggerParameters): Logger {
  const options: pino.LoggerOptions = {
    level: parameters.level,
    redact: { paths: REDACT_PATHS, censor: "[redacted]" },
    timestamp: pino.stdTimeFunctions.isoTime,
    mixin: () => {
      const request = currentRequest();
      return request ? { request_id: request.id } : {};
    },
  };
  if (parameters.destination) return pino(options, parameters.destination);
  // Nothing to write: no destination of ours, so no buffer and no timer (a test process starts hundreds of silent
  // gateways).
  if (parameters.level === "silent") return pino({ ...options, enabled: false });
  if (parameters.pretty) {
    return pino({
      ...options,
      transport: {
        target: "pino-pretty",
        options: { colorize: true, singleLine: true, translateTime: "SYS:HH:MM:ss.l", ignore: "pid,hostname" },
      },
    });
  }
  return pino(options, logDestination(1));
}

/** How many bytes of lines the log destination gathers before it writes them (LOG_FLUSH_MS bounds how long they wait). */
export const LOG_BUFFER_BYTES = 4096;
/** How long a line may wait in the destination's buffer, at most, when fewer than LOG_BUFFER_BYTES have gathered. */
export const LOG_FLUSH_MS = 250;

/** How many LOG_FLUSH_MS periods without a line the destination's flush timer runs on before it stops. */
const IDLE_FLUSHES = 2;

/**
 * Where the gateway's JSON lines go (a file descriptor or a path): written asynchronously, a line on the call path being
 * a buffer append, not a write(2) that waits; and gathered, one write(2) on libuv's thread pool for about 15 request
 * lines rather than one for each (a thread-pool round trip a request, measured in docs/benchmarks.md), at most
 * LOG_FLUSH_MS late. What is buffered is written when the process exits (pino flushes the destination on exit); only a
 * process killed outright loses it, at most LOG_FLUSH_MS of lines.
 *
 * The flush timer runs while lines come, and stops IDLE_FLUSHES periods after the last (sonic-boom's own periodicFlush
 * never stops, and writes an empty string each period when there is nothing to write: for every destination ever
 * made, four thread-pool writes a second).
 */
export function logDestination(dest: number | string): DestinationStream {
  // A file is opened here, synchronously: opened by the destination it would not be ready for the flush on exit of a
  // process that exits at once (sonic-boom throws "not ready yet" from it).
  const fd = typeof dest === "number" ? dest : fs.openSync(dest, "a");
  const destination = pino.destination({ dest: fd, sync: false, minLength: LOG_BUFFER_BYTES });
  let timer: NodeJS.Timeout | undefined;
  let wrote = false;
  let idle = 0;
  const stop = () => {
    clearInterval(timer);
    timer = undefined;
  };
  const tick = () => {
    if (wrote) idle = 0;
    else if (++idle > IDLE_FLUSHES) return stop();
    wrote = false;
    // A flush while a write is in flight is skipped by sonic-boom: the next period's flush writes what is left.
    try {
      destination.flush();
    } catch {
      stop(); // destroyed
    }
  };
  const active = () => {
    wrote = true;
    if (timer === undefined) {
      idle = 0;
      timer = setInterval(tick, LOG_FLUSH_MS).unref();
    }
  };
  destination.once("close", stop);
  // A write that ends may leave lines behind it (a flush met it in flight and was skipped): it counts as activity, so
  // the timer runs on until they are written, however long the write took. The idle flushes write 0 bytes.
  destination.on("write", (bytes: number) => {
    if (bytes > 0) active();
  });
  const write = destination.write.bind(destination);
  destination.write = (line: string) => {
    active();
    return write(line);
  };
  return destination;
}

/** The shape the gateway's parts log through: a message, and the error or detail behind it. */
export type LogFunction = (message: string, error?: unknown) => void;

/**
 * The parts of the gateway log through a plain function (they know nothing of pino); this is
 * that function over the logger. A line with an Error is logged at level error with the
 * error's summary (`error`: its short message, contract function and causes), a line with another detail at warn, a plain line at info.
 */
export function logFunction(logger: Logger): LogFunction {
  return (message, error) => {
    if (error === undefined || error === "") logger.info(message);
    // The error's summary, not the error: see ../error-log.ts (a viem error would bring its contract's whole ABI).
    else if (error instanceof Error) logger.error({ error: loggedError(error) }, message);
    else logger.warn({ detail: error }, message);
  };
}
