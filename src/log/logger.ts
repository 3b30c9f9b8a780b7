import { createRequire } from "node:module";
import { Writable } from "node:stream";
import pino, { type Logger } from "pino";
import type { PrettyOptions, PrettyStream } from "pino-pretty";

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
  "accesssecret",
  "secretaccesskey",
  "runpod_ai_api_key",
  "bucket_secret_access_key",
  "x-api-key",
]);
const REDACTED = "[redacted]";

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
   * Platform mode: one JSON object a line `{requestId, message, level}` (worker-protocol §8).
   * Else pretty, human lines (through pino-pretty, loaded now; JSON lines when it is not installed).
   */
  platform: boolean;
  /** @default "info" */
  level?: string;
  /** Where lines go. @default process.stdout */
  destination?: NodeJS.WritableStream;
  /** Literal secret values (e.g. the API key) scrubbed from every line, wherever they appear. */
  secrets?: readonly string[];
}

/** A writable that replaces each literal secret in the text passing through before forwarding it. */
function scrubbing(destination: NodeJS.WritableStream, secrets: readonly string[]): NodeJS.WritableStream {
  const needles = secrets.filter((s) => s.length >= 4);
  if (needles.length === 0) return destination;
  return new Writable({
    write(chunk: Buffer | string, _enc, callback) {
      let text = typeof chunk === "string" ? chunk : chunk.toString("utf8");
      for (const n of needles) text = text.replaceAll(n, REDACTED);
      destination.write(text);
      callback();
    },
  });
}

/**
 * Creates runlet's pino logger. Secrets are redacted by key name at any depth and, when given,
 * by literal value; per-job loggers are `log.child({ requestId })`.
 */
export function createLogger(options: LoggerOptions): Logger {
  const level = options.level ?? "info";
  const out = scrubbing(options.destination ?? process.stdout, options.secrets ?? []);
  const formatters = {
    log: (obj: Record<string, unknown>) => redactSecrets(obj) as Record<string, unknown>,
  };
  const pretty = options.platform ? null : loadPretty();
  if (pretty === null) {
    return pino(
      {
        level,
        base: null,
        timestamp: false,
        messageKey: "message",
        formatters: { ...formatters, level: (label: string) => ({ level: label.toUpperCase() }) },
        // The platform expects requestId on every line: null outside a job.
        mixin: (_obj, _level, logger) =>
          Object.hasOwn(logger.bindings(), "requestId") ? {} : { requestId: null },
      },
      out,
    );
  }
  const prettyStream = pretty({
    sync: true,
    colorize: false,
    translateTime: "HH:MM:ss.l",
    ignore: "pid,hostname",
    destination: out,
  });
  return pino({ level, base: null, formatters }, prettyStream);
}

export type { Logger };
