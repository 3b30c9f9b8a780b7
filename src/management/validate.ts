import type { z } from "zod";
import { RunletError } from "../errors.js";

/** One field that failed validation: its dotted path (`ports[1]`, `env.PORT`) and why. */
export interface FieldIssue {
  readonly field: string;
  readonly message: string;
}

/** Renders a zod path as `a.b[2].c`; the whole body is `(body)`. */
export function fieldPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const key of path) {
    if (typeof key === "number") out += `[${key}]`;
    else out += out.length === 0 ? String(key) : `.${String(key)}`;
  }
  return out.length === 0 ? "(body)" : out;
}

/** Every issue of a zod error as `{field, message}`, in zod's order. */
export function fieldIssues(error: z.ZodError): FieldIssue[] {
  return error.issues.map((issue) => ({ field: fieldPath(issue.path), message: issue.message }));
}

/** `field: message` lines, as a v2 problem's `errors` array carries them. */
export function issueMessages(error: z.ZodError): string[] {
  return fieldIssues(error).map((i) => `${i.field}: ${i.message}`);
}

/**
 * Parses `body` with `schema` before it is sent. A failure is RUNLET_MANAGEMENT_INVALID naming
 * every bad field, so nothing the platform would refuse leaves the process.
 */
export function validateBody<S extends z.ZodType>(schema: S, body: unknown, what: string): z.output<S> {
  const result = schema.safeParse(body);
  if (result.success) return result.data;
  const issues = fieldIssues(result.error);
  const first = issues[0];
  throw new RunletError(
    "RUNLET_MANAGEMENT_INVALID",
    `${what} is invalid: ${issues.map((i) => `${i.field}: ${i.message}`).join("; ")}`,
    { details: { field: first?.field, issues } },
  );
}

/** Parses a 2xx answer; a mismatch is RUNLET_MANAGEMENT_BAD_RESPONSE naming the fields. */
export function validateResponse<S extends z.ZodType>(schema: S, body: unknown, what: string): z.output<S> {
  const result = schema.safeParse(body);
  if (result.success) return result.data;
  const issues = fieldIssues(result.error);
  throw new RunletError(
    "RUNLET_MANAGEMENT_BAD_RESPONSE",
    `${what} answer has an unexpected shape: ${issues.map((i) => `${i.field}: ${i.message}`).join("; ")}`,
    { details: { issues } },
  );
}
