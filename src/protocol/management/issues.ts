import type { z } from "zod";

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
