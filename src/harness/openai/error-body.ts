import type { ServerResponse } from "node:http";
import { type OpenAIErrorBody, openAIError, statusOf } from "../../protocol/openai.js";
import { sendJson } from "../http/http-util.js";
import { parsePythonLiteral } from "./python-literal.js";

export { type OpenAIErrorBody, openAIError, statusOf };

/** Answers with an OpenAI error body. */
export function sendOpenAIError(
  res: ServerResponse,
  status: number,
  body: OpenAIErrorBody,
  headers: Record<string, string> = {},
): void {
  sendJson(res, status, body, headers);
}

/**
 * The OpenAI error a value holds, when it is one: `{error: {message: string, type?: string, ...}}`.
 * OpenAI-compatible servers return it as their output, and a string holding its JSON is read too;
 * either becomes a proper error answer.
 */
export function asOpenAIError(value: unknown): OpenAIErrorBody | undefined {
  if (typeof value === "string") return asOpenAIError(parseJsonObject(value));
  const record = asRecord(value);
  return record === undefined ? undefined : innerError(asRecord(record["error"]));
}

/**
 * The OpenAI error in a failed job's error text, when it holds one: OpenAI's body
 * `{"error": {...}}` or its inner `{"message", "type", "param", "code"}` alone, as JSON or as
 * Python's `str()` of a dict (single quotes, `None`, `True`), which the platform's Python SDK posts
 * when a handler yields `{"error": {...}}` (docs/openai.md, "Errors").
 */
export function openAIErrorOfText(text: string | undefined): OpenAIErrorBody | undefined {
  if (text === undefined) return undefined;
  const value = parseJsonObject(text) ?? parsePythonObject(text);
  const record = asRecord(value);
  if (record === undefined) return undefined;
  const own =
    asOpenAIError(record) ??
    (typeof record["type"] === "string" || "code" in record ? innerError(record) : undefined);
  if (own === undefined || statusOf(own) !== 500) return own;
  return quotedError(own.error.message) ?? own;
}

/**
 * An OpenAI-compatible server's error answer quoted at the end of a message (a proxy's
 * `vLLM returned HTTP 404: {"error": {...}}`), when its status is a client error.
 */
function quotedError(message: string): OpenAIErrorBody | undefined {
  const start = message.indexOf("{");
  if (start < 0) return undefined;
  const record = asRecord(parseJsonObject(message.slice(start)));
  if (record === undefined) return undefined;
  const quoted = asOpenAIError(record) ?? innerError(record);
  return quoted !== undefined && statusOf(quoted) !== 500 ? quoted : undefined;
}

/** The error body built from an inner `{message, type, param, code}`, when `message` is a string. */
function innerError(e: Record<string, unknown> | undefined): OpenAIErrorBody | undefined {
  if (e === undefined || typeof e["message"] !== "string") return undefined;
  const code = e["code"];
  return openAIError(
    e["message"],
    typeof e["type"] === "string" ? e["type"] : "server_error",
    typeof code === "string" || typeof code === "number" ? code : null,
    typeof e["param"] === "string" ? e["param"] : null,
  );
}

function asRecord(value: unknown): Record<string, unknown> | undefined {
  return typeof value === "object" && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : undefined;
}

/** The value of JSON text that starts with `{`, or undefined for any other text. */
function parseJsonObject(text: string): unknown {
  const trimmed = text.trim();
  if (!trimmed.startsWith("{")) return undefined;
  try {
    return JSON.parse(trimmed) as unknown;
  } catch {
    // Not JSON: a plain error text (or Python's), which the caller reads another way.
    return undefined;
  }
}

function parsePythonObject(text: string): unknown {
  const trimmed = text.trim();
  return trimmed.startsWith("{") ? parsePythonLiteral(trimmed) : undefined;
}

/** The header that tells the official OpenAI clients not to send a request again. */
export const NO_RETRY: Readonly<Record<string, string>> = Object.freeze({ "x-should-retry": "false" });

/**
 * Statuses the clients retry by default that a job's end may still rightly answer with: a
 * worker's own 408, 409 or 429 (it was busy; a later try is a new job that may well succeed).
 */
const RETRY_WORTHY: ReadonlySet<number> = new Set([408, 409, 429]);

/** The retry headers of an error answered after the job ran: `x-should-retry: false` unless `status` is a 408, 409 or 429. */
export function endHeaders(status: number): Readonly<Record<string, string>> {
  return RETRY_WORTHY.has(status) ? {} : NO_RETRY;
}

/** What a job's end answers with: the status, the OpenAI error and the headers that go with it. */
export interface JobEndAnswer {
  readonly status: number;
  readonly body: OpenAIErrorBody;
  /** `x-should-retry: false` unless the status is one a later try may cure (408, 409, 429). */
  readonly headers: Readonly<Record<string, string>>;
}

/**
 * The OpenAI error for a job that ended without an answer: FAILED (its error text, an OpenAI error
 * when it holds one, else the worker's error report's message), TIMED_OUT or CANCELLED.
 *
 * The job has ended, so a client that sends the request again starts a new job: the official
 * `openai` clients do so on a 5xx (twice by default), the AI SDK on a 5xx, 408, 409 and 429. A
 * cancelled job answers 499 (the status gRPC's CANCELLED maps to, and nginx's for a request
 * given up on), which no client retries; every end answers `x-should-retry: false` (which the
 * `openai` clients obey, the AI SDK does not read) unless its status is a 408, 409 or 429 a
 * worker chose (docs/openai.md, "Retries").
 */
export function jobEndError(status: string, error: string | undefined): JobEndAnswer {
  const answer = (code: number, body: OpenAIErrorBody): JobEndAnswer => ({
    status: code,
    body,
    headers: endHeaders(code),
  });
  if (status === "TIMED_OUT") {
    return answer(504, openAIError(error ?? "the job timed out", "server_error", "timeout"));
  }
  if (status === "CANCELLED") {
    return answer(499, openAIError("the job was cancelled", "server_error", "job_cancelled"));
  }
  const own = openAIErrorOfText(error);
  if (own !== undefined) return answer(statusOf(own), own);
  return answer(500, openAIError(reportMessage(error), "server_error", "job_failed"));
}

/** The message of a worker's JSON error report (docs/protocol.md, "Results"), or the error text itself. */
function reportMessage(error: string | undefined): string {
  if (error === undefined) return "the job failed";
  try {
    const report = JSON.parse(error) as { error_type?: unknown; error_message?: unknown };
    if (typeof report.error_message === "string") {
      return typeof report.error_type === "string"
        ? `${report.error_type}: ${report.error_message}`
        : report.error_message;
    }
  } catch {
    // A plain text error: used as it is.
  }
  return error;
}
