import { RunletError } from "../errors.js";
import { retryAfterMs } from "../wait.js";

/**
 * Error bodies of the management API (docs/protocol.md, "Errors"): v1 answers `{message}`, v2 an RFC 9457
 * problem `{title, status, detail, errors?}`. Both become one RunletError, RUNLET_MANAGEMENT_HTTP,
 * so callers match one code and read the same `details` whichever version answered.
 */

/** What a failed management call carries in `err.details`. */
export interface ManagementErrorDetails {
  /** The HTTP status of the answer. */
  readonly status: number;
  /** The problem's `title` (v2), else the status text. */
  readonly title: string;
  /** The problem's `detail` (v2) or the `message` (v1), else the start of the body. */
  readonly detail: string;
  /** The validation messages of a v2 problem (`errors`), else empty. */
  readonly errors: readonly string[];
  readonly method: string;
  /** The request path (never the query, never a key). */
  readonly path: string;
  /** The server's `Retry-After`, in ms, when it sent one. */
  readonly retryAfterMs?: number;
}

const STATUS_TEXT: Readonly<Record<number, string>> = {
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  409: "Conflict",
  422: "Unprocessable Content",
  429: "Too Many Requests",
  500: "Internal Server Error",
  502: "Bad Gateway",
  503: "Service Unavailable",
};

/** What to do about each status (docs/protocol.md, "Errors"), appended to the message. */
const REMEDY: Readonly<Record<number, string>> = {
  400: "fix the request",
  401: "check the API key",
  403: "the key has no access to this resource; use a key that does",
  404: "check the id",
  429: "rate limited; retry later with back-off",
};

const MAX_DETAIL_CHARS = 500;

function asStringArray(value: unknown): string[] {
  if (!Array.isArray(value)) return [];
  return value.map((v) => (typeof v === "string" ? v : JSON.stringify(v)));
}

/** Reads `title`, `detail` and `errors` from a v2 problem, a v1 `{message}` or any other body. */
export function parseErrorBody(
  status: number,
  bodyText: string,
): Pick<ManagementErrorDetails, "title" | "detail" | "errors"> {
  const fallbackTitle = STATUS_TEXT[status] ?? `HTTP ${status}`;
  let parsed: unknown;
  try {
    parsed = bodyText.length > 0 ? JSON.parse(bodyText) : undefined;
  } catch {
    // Not JSON (a proxy's HTML page, say): keep the start of the text as the detail.
    parsed = undefined;
  }
  if (typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)) {
    const body = parsed as Record<string, unknown>;
    if (typeof body["title"] === "string" || typeof body["detail"] === "string") {
      return {
        title: typeof body["title"] === "string" ? body["title"] : fallbackTitle,
        detail: typeof body["detail"] === "string" ? body["detail"] : "",
        errors: asStringArray(body["errors"]),
      };
    }
    if (typeof body["message"] === "string") {
      return { title: fallbackTitle, detail: body["message"], errors: [] };
    }
    if (typeof body["error"] === "string") {
      return { title: fallbackTitle, detail: body["error"], errors: [] };
    }
  }
  return { title: fallbackTitle, detail: bodyText.slice(0, MAX_DETAIL_CHARS).trim(), errors: [] };
}

/** Builds the RUNLET_MANAGEMENT_HTTP error for a non-2xx answer. */
export function managementHttpError(input: {
  method: string;
  path: string;
  status: number;
  bodyText: string;
  retryAfterMs?: number | undefined;
}): RunletError {
  const { title, detail, errors } = parseErrorBody(input.status, input.bodyText);
  const details: ManagementErrorDetails = {
    status: input.status,
    title,
    detail,
    errors,
    method: input.method,
    path: input.path,
    ...(input.retryAfterMs === undefined ? {} : { retryAfterMs: input.retryAfterMs }),
  };
  const parts = [`${input.method} ${input.path} answered ${input.status} ${title}`];
  if (detail.length > 0) parts.push(`: ${detail}`);
  if (errors.length > 0) parts.push(` (${errors.join("; ")})`);
  const remedy =
    REMEDY[input.status] ?? (input.status >= 500 ? "the platform failed; retry later" : undefined);
  if (remedy !== undefined) parts.push(` — ${remedy}`);
  return new RunletError("RUNLET_MANAGEMENT_HTTP", parts.join(""), {
    details: details as unknown as Record<string, unknown>,
  });
}

/** Parses a `Retry-After` header (delta seconds or an HTTP date) into ms from `nowMs`, else undefined. */
export function parseRetryAfterMs(value: string | undefined, nowMs: number): number | undefined {
  return retryAfterMs(value, { nowMs });
}
