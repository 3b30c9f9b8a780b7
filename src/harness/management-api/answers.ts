/**
 * Answers of the harness's management emulation, in each version's error format
 * (docs/protocol.md, "Errors"): v1 `{message}`, v2 RFC 9457 problems as `application/problem+json`.
 */

/** What a management route answers; `body` is the exact text to send. */
export interface ManagementAnswer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
}

const TITLES: Readonly<Record<number, string>> = {
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  405: "Method Not Allowed",
  409: "Conflict",
  413: "Content Too Large",
  422: "Unprocessable Entity",
  501: "Not Implemented",
};

/** A 2xx (or other) JSON answer. */
export function json(status: number, body: unknown): ManagementAnswer {
  return { status, headers: { "content-type": "application/json" }, body: JSON.stringify(body) };
}

/** A 204 with no body. */
export function noContent(): ManagementAnswer {
  return { status: 204, headers: {}, body: "" };
}

/** A v1 error: `{message}`. */
export function v1Error(status: number, message: string): ManagementAnswer {
  return json(status, { message });
}

/** A v2 RFC 9457 problem; `errors` only when there are validation messages. */
export function problem(status: number, detail: string, errors?: readonly string[]): ManagementAnswer {
  const body: Record<string, unknown> = { title: TITLES[status] ?? `HTTP ${status}`, status, detail };
  if (errors !== undefined && errors.length > 0) body["errors"] = errors;
  return { status, headers: { "content-type": "application/problem+json" }, body: JSON.stringify(body) };
}

/**
 * A body the document's request schema refuses: 422 "Request validation failed." with every
 * failure as `$.field: message`, as the document's `UnprocessableEntityError` answers.
 */
export function invalidBody(errors: readonly string[]): ManagementAnswer {
  return problem(422, "Request validation failed.", errors);
}
