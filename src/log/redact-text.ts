/**
 * The scrubbing of secrets from text: the log's last step before a line is written, and the same
 * step for everything else that leaves the worker (an unhealthy ping's reason, a failed job's error
 * message and traceback, telemetry's error messages). Imports nothing, so the heartbeat thread can
 * load it without the logger.
 *
 * What goes:
 * - each given literal secret (the worker's API key, a job's s3Config keys), of any length and any
 *   characters; one shorter than {@link ALONE_BELOW_CHARS} only where it stands alone;
 * - the user and password of a URL (`https://user:pw@host` becomes `https://[redacted]@host`);
 * - the value of a secret-named query parameter (`?token=…`, `access_token`, `api_key`, `password`,
 *   `X-Amz-Signature`, `X-Amz-Credential`, `X-Amz-Security-Token`, …);
 * - a bearer token (`Bearer abc…`).
 */

export const REDACTED = "[redacted]";

/**
 * `user:password@` (or a lone token) in a URL: `https://user:pw@host` becomes `https://[redacted]@host`.
 * The scheme is bounded (32 characters): unbounded, a long dotted run in a line that holds an `@`
 * made the match quadratic (seconds for 100 KB), on every logger's every line.
 */
const URL_CREDENTIALS = /\b([a-z][a-z0-9+.-]{0,31}:\/\/)[^/\s"'@]+@/gi;

/**
 * A secret-named query parameter's value: the name follows `?` or `&` and is one of the listed
 * names (bounded alternatives, so the match stays linear); the value runs to the next `&`, `#`,
 * white space or quote.
 */
const SECRET_QUERY =
  /([?&](?:[a-z0-9_.-]{0,32}[_.-])?(?:token|access_token|api_key|apikey|api-key|password|passwd|secret|client_secret|signature|sig|x-amz-signature|x-amz-credential|x-amz-security-token|x-goog-signature|x-goog-credential)=)[^&#\s"'\\]+/gi;

/** `Bearer <token>` (an Authorization header's value quoted in an error), in any case. */
const BEARER = /\b(bearer\s+)[A-Za-z0-9._~+/=-]{4,}/gi;

/** The cheap look before {@link BEARER}: the word in any case (`BeArEr` too, as the pattern takes it). */
const BEARER_WORD = /bearer/i;

/** Shorter secrets are only replaced where they stand alone, so a 2-character key does not blank every word holding it. */
export const ALONE_BELOW_CHARS = 8;

/** Escapes `text` for use inside a regular expression. */
function literal(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
}

/**
 * A function that scrubs `secrets` and the patterns above from a text. `json`: the text is JSON
 * (a log line), so a secret is looked for only as JSON writes it (a key holding `"` or `\` is
 * escaped); else both as it is and as JSON writes it.
 */
export function textScrubber(secrets: readonly string[], json = false): (text: string) => string {
  const forms = new Set<string>();
  for (const secret of secrets) {
    if (typeof secret !== "string" || secret === "") continue;
    const escaped = JSON.stringify(secret).slice(1, -1);
    forms.add(escaped);
    if (!json) forms.add(secret);
  }
  const long = [...forms].filter((f) => f.length >= ALONE_BELOW_CHARS).sort((a, b) => b.length - a.length);
  const short = [...forms].filter((f) => f.length < ALONE_BELOW_CHARS);
  const alone =
    short.length === 0
      ? undefined
      : new RegExp(`(?<![A-Za-z0-9_])(?:${short.map(literal).join("|")})(?![A-Za-z0-9_])`, "g");
  return (input) => {
    let text = input;
    for (const n of long) if (text.includes(n)) text = text.replaceAll(n, REDACTED);
    if (alone !== undefined) text = text.replace(alone, REDACTED);
    if (text.includes("@")) text = text.replace(URL_CREDENTIALS, `$1${REDACTED}@`);
    // Cheap looks first: most lines hold no query and no bearer token (a log line's every write runs this).
    if (text.includes("?") && text.includes("=")) text = text.replace(SECRET_QUERY, `$1${REDACTED}`);
    if (BEARER_WORD.test(text)) text = text.replace(BEARER, `$1${REDACTED}`);
    return text;
  };
}

/** Where a logger made by createLogger keeps its literal secrets, for {@link redactText}. */
export const LOG_SECRETS: unique symbol = Symbol.for("runlet.log.secrets");

/** The literal secrets a logger scrubs (an empty list for a logger runlet did not make). */
export function logSecrets(log: object | undefined): readonly string[] {
  const held = (log as Record<symbol, unknown> | undefined)?.[LOG_SECRETS];
  return Array.isArray(held) ? (held as string[]) : [];
}

/**
 * `text` as it may leave the worker: scrubbed as `log` scrubs its lines (its literal secrets, a
 * child logger's too), plus `extra` literal secrets (a job's s3Config keys), plus the patterns.
 */
export function redactText(text: string, log?: object, extra: readonly string[] = []): string {
  return textScrubber([...logSecrets(log), ...extra])(text);
}

/** The literal secrets a delivered job carries: its s3Config's access key id and secret. */
export function jobSecrets(job: unknown): string[] {
  const config = (job as { s3Config?: unknown } | null | undefined)?.s3Config;
  if (typeof config !== "object" || config === null) return [];
  const out: string[] = [];
  for (const [key, value] of Object.entries(config)) {
    if (typeof value === "string" && /access|secret|key|token|password/i.test(key) && value.length >= 4)
      out.push(value);
  }
  return out;
}
