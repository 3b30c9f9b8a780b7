import type { z } from "zod";
import { runRequestSchema } from "../../protocol/api.js";
import type { NewJob } from "./job-entry.js";
import { webhookUrlProblem } from "./webhooks.js";

/** A `/run` or `/runsync` body, checked: the job to create, or what is wrong with it. */
export type RunBodyResult =
  | { readonly ok: true; readonly job: NewJob }
  | { readonly ok: false; readonly message: string; readonly issues?: string[] };

/** One line per zod issue, naming the field (the policy bounds messages already do). */
function describe(issue: z.core.$ZodIssue): string {
  const path = issue.path.map(String).join(".");
  if (path === "" || issue.message.startsWith(path)) return issue.message;
  return `${path}: ${issue.message}`;
}

/**
 * Validates a parsed job request body (`undefined` for an empty one; `bytes` its size, which the
 * store counts) (docs/protocol.md, "Job bodies"): a JSON object with an `input` object and
 * optional `webhook` and `policy` (bounds: docs/protocol.md, "Limits"). Everything else is passed through to
 * the worker as sent, because the platform does so: unknown keys at the top level (e.g.
 * `webhookV2`) and in `policy`, and `s3Config` whole — unknown keys (`objectPath`) and a partial
 * object (no `endpointUrl`) included; the worker's S3 module reports what is missing when a handler
 * uses it.
 */
/** Could `text` hold a number JSON.parse turns into ±Infinity (an exponent of 3+ digits, or 309+ digits)? */
const MAYBE_HUGE_NUMBER = /[eE][+]?\d{3}|\d{309}/;

/** The path of the first number in `value` that is not finite (`1e400` parses as Infinity), if any. */
function nonFiniteAt(value: unknown, path: string): string | undefined {
  if (typeof value === "number") return Number.isFinite(value) ? undefined : path;
  if (typeof value !== "object" || value === null) return undefined;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = nonFiniteAt(value[i], `${path}[${i}]`);
      if (found !== undefined) return found;
    }
    return undefined;
  }
  for (const key of Object.keys(value)) {
    const found = nonFiniteAt((value as Record<string, unknown>)[key], path === "" ? key : `${path}.${key}`);
    if (found !== undefined) return found;
  }
  return undefined;
}

/**
 * The job's own keys taken from the body as parsed, not from the schema's copy: zod rebuilds
 * objects by assignment, which turns an own `__proto__` key into the copy's prototype (lost on
 * the way to the worker). `Object.fromEntries` defines each key as an own property.
 */
function ownEntries(body: object, skip: ReadonlySet<string>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(body).filter(([key]) => !skip.has(key)));
}
const BODY_KEYS: ReadonlySet<string> = new Set(["input", "policy", "s3Config", "webhook"]);

export function parseRunBody(body: unknown, bytes = 0, text?: string): RunBodyResult {
  if (body === undefined) {
    return { ok: false, message: "request body is empty: send a JSON object with an input field" };
  }
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    return { ok: false, message: "request body must be a JSON object with an input field" };
  }
  if (!Object.hasOwn(body, "input")) {
    const issues = ["input is required: a JSON object of the handler's parameters"];
    return { ok: false, message: `invalid request body: ${issues[0]}`, issues };
  }
  const checked = runRequestSchema.safeParse(body);
  if (!checked.success) {
    const issues = checked.error.issues.map(describe);
    return { ok: false, message: `invalid request body: ${issues.join("; ")}`, issues };
  }
  // docs/harness.md, "Limits and rate limits" (Inputs as sent): a number beyond a double's range is refused, not turned into null.
  if (text === undefined || MAYBE_HUGE_NUMBER.test(text)) {
    const at = nonFiniteAt(body, "");
    if (at !== undefined) {
      const issue = `${at}: a number beyond the range of a 64-bit float (±1.7976931348623157e308), which JSON readers turn into Infinity or null; send it as a string`;
      return { ok: false, message: `invalid request body: ${issue}`, issues: [issue] };
    }
  }
  const { policy, s3Config, webhook } = checked.data;
  // The input and the other keys exactly as sent (an own `__proto__` key included).
  const input = (body as { input: Record<string, unknown> }).input;
  const extra = ownEntries(body, BODY_KEYS);
  const tooLong = webhook === undefined ? undefined : webhookUrlProblem(webhook);
  if (tooLong !== undefined) {
    return { ok: false, message: `invalid request body: ${tooLong}`, issues: [tooLong] };
  }
  return {
    ok: true,
    job: {
      input,
      ...(policy === undefined ? {} : { policy }),
      ...(s3Config === undefined ? {} : { s3Config }),
      ...(webhook === undefined ? {} : { webhook }),
      ...(Object.keys(extra).length === 0 ? {} : { extra }),
      bytes,
    },
  };
}
