import type { z } from "zod";
import { JobError } from "../errors.js";
import { openAIError } from "../protocol/openai.js";

/**
 * A JobError whose message is OpenAI's error body as JSON text: the job fails with it, and the
 * harness (as the platform) answers the OpenAI request with that body and a fitting status
 * (`invalid_request_error` 400, `not_found_error` 404, else 500).
 *
 * @example
 * throw openAIJobError("prompt is too long", "invalid_request_error", { param: "prompt" });
 */
export function openAIJobError(
  message: string,
  type: string,
  options: { readonly code?: string | null; readonly param?: string | null } = {},
): JobError {
  return new JobError(
    JSON.stringify(openAIError(message, type, options.code ?? null, options.param ?? null)),
  );
}

/** `messages[0].content` from a zod issue path. */
function fieldOf(path: readonly PropertyKey[]): string {
  let out = "";
  for (const key of path) {
    out += typeof key === "number" ? `[${key}]` : `${out === "" ? "" : "."}${String(key)}`;
  }
  return out;
}

/** The `invalid_request_error` for a request body that failed its schema, naming the first bad field. */
export function invalidBodyError(error: z.ZodError): JobError {
  const issue = error.issues[0];
  if (issue === undefined) return openAIJobError("the request body is invalid", "invalid_request_error");
  const param = fieldOf(issue.path);
  if (param === "") {
    return openAIJobError(`the request body is invalid: ${issue.message}`, "invalid_request_error");
  }
  const missing = issue.code === "invalid_type" && issue.message.endsWith("received undefined");
  return missing
    ? openAIJobError(`Missing required parameter: '${param}'.`, "invalid_request_error", {
        code: "missing_required_parameter",
        param,
      })
    : openAIJobError(`Invalid value for '${param}': ${issue.message}.`, "invalid_request_error", {
        code: "invalid_value",
        param,
      });
}
