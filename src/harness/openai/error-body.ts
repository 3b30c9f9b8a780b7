import type { ServerResponse } from "node:http";
import { type OpenAIErrorBody, openAIError } from "../../protocol/openai.js";
import { sendJson } from "../http-util.js";

export { type OpenAIErrorBody, openAIError };

/** HTTP status for an error `type` when its `code` is not itself a status. */
const STATUS_OF_TYPE: Readonly<Record<string, number>> = {
  invalid_request_error: 400,
  authentication_error: 401,
  permission_error: 403,
  not_found_error: 404,
  rate_limit_error: 429,
};

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
 * Handlers fail OpenAI jobs with this JSON text as their error (runlet/openai does), and
 * OpenAI-compatible servers return it as their output; both become a proper error answer.
 */
export function asOpenAIError(value: unknown): OpenAIErrorBody | undefined {
  if (typeof value === "string") {
    if (!value.startsWith("{")) return undefined;
    try {
      return asOpenAIError(JSON.parse(value) as unknown);
    } catch {
      // Not JSON: a plain error text, which the caller wraps itself.
      return undefined;
    }
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return undefined;
  const inner = (value as { error?: unknown }).error;
  if (typeof inner !== "object" || inner === null) return undefined;
  const e = inner as Record<string, unknown>;
  if (typeof e["message"] !== "string") return undefined;
  const code = e["code"];
  return openAIError(
    e["message"],
    typeof e["type"] === "string" ? e["type"] : "server_error",
    typeof code === "string" || typeof code === "number" ? code : null,
    typeof e["param"] === "string" ? e["param"] : null,
  );
}

/**
 * The status for an OpenAI error: its `code` when that is an HTTP error status (OpenAI-compatible
 * servers such as vLLM put the status there), else by its `type`, else 500.
 */
export function statusOf(body: OpenAIErrorBody): number {
  const { code, type } = body.error;
  if (typeof code === "number" && Number.isInteger(code) && code >= 400 && code <= 599) return code;
  return STATUS_OF_TYPE[type] ?? 500;
}

/**
 * The OpenAI error for a job that ended without an answer: FAILED (its error text, an OpenAI error
 * when it is one, else the worker's error report's message), TIMED_OUT or CANCELLED.
 */
export function jobEndError(
  status: string,
  error: string | undefined,
): { readonly status: number; readonly body: OpenAIErrorBody } {
  if (status === "TIMED_OUT") {
    return { status: 504, body: openAIError(error ?? "the job timed out", "server_error", "timeout") };
  }
  if (status === "CANCELLED") {
    return { status: 500, body: openAIError("the job was cancelled", "server_error", "job_cancelled") };
  }
  const own = asOpenAIError(error);
  if (own !== undefined) return { status: statusOf(own), body: own };
  return { status: 500, body: openAIError(reportMessage(error), "server_error", "job_failed") };
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
