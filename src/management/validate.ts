import type { z } from "zod";
import { RunletError } from "../errors.js";
import { fieldIssues } from "../protocol/management/issues.js";

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
