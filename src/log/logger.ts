import { createRequire } from "node:module";
import pino, { type Logger } from "pino";
import type { PrettyOptions, PrettyStream } from "pino-pretty";
import { LOG_SECRETS, REDACTED, textScrubber } from "./redact-text.js";

type PrettyFactory = (options: PrettyOptions) => PrettyStream;

let prettyFactory: PrettyFactory | null | undefined;

/**
 * pino-pretty, loaded on the first local-mode logger and never bundled (`runlet build` keeps it
 * out): a worker on the platform logs JSON lines and does not pay for it. `null` when it cannot
 * be found, as in a bundle run without node_modules; the logger then writes JSON lines too.
 */
function loadPretty(): PrettyFactory | null {
  if (prettyFactory === undefined) {
    try {
      const loaded = createRequire(import.meta.url)("pino-pretty") as
        | PrettyFactory
        | { default: PrettyFactory };
      prettyFactory = typeof loaded === "function" ? loaded : loaded.default;
    } catch {
      // Not installed beside this copy of runlet (a bundle in an image): JSON lines instead.
      prettyFactory = null;
    }
  }
  return prettyFactory;
}

/** Keys whose values never reach a log, at any depth (compared case-insensitively). */
const SECRET_KEYS = new Set([
  "apikey",
  "api_key",
  "authorization",
  "accessid",
  "accesskeyid",
  "bucket_access_key_id",
  "password",
  "accesssecret",
  "secretaccesskey",
  "runpod_ai_api_key",
  "bucket_secret_access_key",
  "x-api-key",
]);

/**
 * True when a log object needs no redaction: no key is secret-named and no value is an object to
 * look into (a job's "Started." and most lines are like this: copying them cost more than writing).
 */
function plainAndSafe(obj: Record<string, unknown>): boolean {
  for (const key in obj) {
    if (!Object.hasOwn(obj, key)) continue;
    const value = obj[key];
    if ((typeof value === "object" && value !== null) || SECRET_KEYS.has(key.toLowerCase())) return false;
  }
  return true;
}

/** Returns a copy of `value` with every secret-named key replaced by `[redacted]` (cycles and depth bounded). */
export function redactSecrets(value: unknown, depth = 0, seen = new WeakSet<object>()): unknown {
  if (typeof value !== "object" || value === null) return value;
  if (depth > 8 || seen.has(value)) return "[…]";
  seen.add(value);
  if (Array.isArray(value)) return value.map((v) => redactSecrets(v, depth + 1, seen));
  if (value instanceof Error) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    out[k] = SECRET_KEYS.has(k.toLowerCase()) ? REDACTED : redactSecrets(v, depth + 1, seen);
  }
  return out;
}

/** Options of {@link createLogger}. */
export interface LoggerOptions {
  /**
   * Platform mode: one JSON object a line `{requestId, message, level}` (docs/protocol.md, "Logs").
   * Else pretty, human lines (through pino-pretty, loaded now; JSON lines when it is not installed).
   */
  platform: boolean;
  /** @default "info" */
  level?: string;
  /** Where lines go. @default process.stdout */
  destination?: NodeJS.WritableStream;
  /** Literal secret values (e.g. the API key) scrubbed from every line, wherever they appear. */
  secrets?: readonly string[];
  /** JSON lines: bytes that may wait in the destination before lines are dropped. @default {@link MAX_BUFFERED_LOG_BYTES} */
  maxBufferedBytes?: number;
}

/**
 * The platform expects `requestId` on every line: null outside a job. Read from the logger's
 * serialised bindings (a job's logger and its children carry `"requestId":`), not from
 * `bindings()`, which parses them anew for every line.
 */
function requestIdMixin(_obj: object, _level: number, logger: Logger): object {
  const chindings = (logger as unknown as Record<symbol, unknown>)[pino.symbols.chindingsSym];
  // A new object each time: pino merges the line's own fields into it.
  return typeof chindings === "string" && chindings.includes('"requestId":') ? {} : { requestId: null };
}

/**
 * How many bytes of log lines may wait in the destination's buffer (a pipe whose reader fell
 * behind or stopped) before further lines are dropped, counted, and reported by one line once the
 * reader catches up: a worker's stdout is asynchronous for a pipe, so without it a stalled reader
 * made the process's memory grow with every line for ever (issue 41).
 */
export const MAX_BUFFERED_LOG_BYTES = 8 * 1_048_576; // 8 MiB

/** Destinations already listened to for errors (one listener each, however many loggers share one), and whether each failed. */
const heard = new WeakMap<object, { failed: boolean }>();

/**
 * Listens to `out` for its first error (EPIPE: its reader is gone; ENOSPC: it is /dev/full) and
 * reports it once on stderr, where lines go on being dropped; the error never reaches the process.
 * Both kinds of logger do this (the pretty one too: pino-pretty's pipe swallowed the error, so a
 * local worker whose stdout failed said nothing, issue 51 item 13).
 */
function reportFailure(out: NodeJS.WritableStream): { readonly failed: boolean } {
  let state = heard.get(out);
  if (state === undefined) {
    const fresh = { failed: false };
    state = fresh;
    heard.set(out, fresh);
    out.on("error", (err: Error) => {
      if (fresh.failed) return;
      fresh.failed = true;
      try {
        if (out !== process.stderr) {
          process.stderr.write(
            `runlet: writing the log failed (${err.message}); log lines are dropped from now on\n`,
          );
        }
      } catch {
        // stderr is gone too: nothing is left to tell.
      }
    });
  }
  return state;
}

/**
 * `out` as pino writes to it, bounded: past {@link MAX_BUFFERED_LOG_BYTES} waiting, lines are
 * dropped and counted; the next line that fits is preceded by one that says how many were
 * dropped. A destination that fails (EPIPE: its reader is gone) is reported once on stderr and
 * its lines are dropped from then on; the error never reaches the process.
 */
function boundedDestination(
  out: NodeJS.WritableStream,
  maxBufferedBytes: number,
): { write(line: string): boolean; readonly writableLength: number } {
  let dropped = 0;
  const failure = reportFailure(out);
  const waiting = (): number => (out as { writableLength?: number }).writableLength ?? 0;
  return {
    /** The bytes waiting in `out`, as a Writable says: what others that log here bound themselves by (a sidecar's lines). */
    get writableLength(): number {
      return waiting();
    },
    write(line: string): boolean {
      if (
        failure.failed ||
        (out as { destroyed?: boolean }).destroyed === true ||
        waiting() > maxBufferedBytes
      ) {
        dropped += 1;
        return true;
      }
      if (dropped > 0) {
        const count = dropped;
        dropped = 0;
        out.write(
          `${JSON.stringify({ level: "WARN", requestId: null, code: "RUNLET_TASK_FAILED", task: "log write", dropped: count, message: `${count} log lines were dropped: the reader of this worker's output fell more than ${maxBufferedBytes} bytes behind` })}\n`,
        );
      }
      return out.write(line);
    },
  };
}

/**
 * Creates runlet's pino logger. Secrets are redacted by key name at any depth and, when given,
 * by literal value; per-job loggers are `log.child({ requestId })`.
 */
export function createLogger(options: LoggerOptions): Logger {
  const level = options.level ?? "info";
  const out = options.destination ?? process.stdout;
  // pino's last step before a line is written (`hooks.streamWrite`): lines are JSON when this runs
  // (pino-pretty reads them afterwards), so a secret is looked for as JSON writes it.
  const hooks = { hooks: { streamWrite: textScrubber(options.secrets ?? [], true) } };
  const formatters = {
    log: (obj: Record<string, unknown>) =>
      plainAndSafe(obj) ? obj : (redactSecrets(obj) as Record<string, unknown>),
  };
  const pretty = options.platform ? null : loadPretty();
  if (pretty === null) {
    const destination = boundedDestination(out, options.maxBufferedBytes ?? MAX_BUFFERED_LOG_BYTES);
    return withSecrets(
      pino(
        {
          level,
          base: null,
          timestamp: false,
          messageKey: "message",
          formatters: { ...formatters, level: (label: string) => ({ level: label.toUpperCase() }) },
          mixin: requestIdMixin,
          ...hooks,
        },
        destination,
      ),
      options.secrets,
    );
  }
  reportFailure(out);
  const prettyStream = pretty({
    sync: true,
    colorize: false,
    translateTime: "HH:MM:ss.l",
    ignore: "pid,hostname",
    destination: out,
  });
  return withSecrets(pino({ level, base: null, formatters, ...hooks }, prettyStream), options.secrets);
}

/**
 * Keeps the logger's literal secrets on it (its children inherit them), so what else leaves the
 * worker is scrubbed as its lines are (redact-text.ts, `redactText`).
 */
function withSecrets(log: Logger, secrets: readonly string[] | undefined): Logger {
  Object.defineProperty(log, LOG_SECRETS, { value: Object.freeze([...(secrets ?? [])]), enumerable: false });
  return log;
}

export type { Logger };
