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

/** One zod issue, as much of it as the message needs. */
type Issue = z.core.$ZodIssue;

/**
 * The issue to report: for a value no branch of a union took (`stop` is a string or a list of
 * strings), the issue of the branch whose type the value had — "Too big: expected array to have
 * <=4 items" for a fifth `stop` entry, rather than zod's bare "Invalid input".
 */
function telling(issue: Issue): Issue {
  if (issue.code !== "invalid_union" || issue.errors.length === 0) return issue;
  // A branch whose only complaint is the value's type at its root is one the value was not.
  const typed = issue.errors.find(
    (branch) => branch.length > 0 && !branch.every((i) => i.code === "invalid_type" && i.path.length === 0),
  );
  const inner = typed?.[0];
  if (inner === undefined) return issue;
  return telling({ ...inner, path: [...issue.path, ...inner.path] } as Issue);
}

/** The issue's message, with a list's limit said plainly. */
function messageOf(issue: Issue): string {
  const items = (n: number | bigint) => `${String(n)} item${Number(n) === 1 ? "" : "s"}`;
  if (issue.code === "too_big" && issue.origin === "array") return `expected at most ${items(issue.maximum)}`;
  if (issue.code === "too_small" && issue.origin === "array")
    return `expected at least ${items(issue.minimum)}`;
  return issue.message;
}

/** The `invalid_request_error` for a request body that failed its schema, naming the first bad field. */
export function invalidBodyError(error: z.ZodError): JobError {
  const first = error.issues[0];
  if (first === undefined) return openAIJobError("the request body is invalid", "invalid_request_error");
  const issue = telling(first);
  const param = fieldOf(issue.path);
  if (param === "") {
    return openAIJobError(`the request body is invalid: ${messageOf(issue)}`, "invalid_request_error");
  }
  const missing = issue.code === "invalid_type" && issue.message.endsWith("received undefined");
  return missing
    ? openAIJobError(`Missing required parameter: '${param}'.`, "invalid_request_error", {
        code: "missing_required_parameter",
        param,
      })
    : openAIJobError(`Invalid value for '${param}': ${messageOf(issue)}.`, "invalid_request_error", {
        code: "invalid_value",
        param,
      });
}
