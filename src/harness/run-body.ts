import type { z } from "zod";
import { runRequestSchema } from "../protocol/api.js";
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
export function parseRunBody(body: unknown, bytes = 0): RunBodyResult {
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
  const { input, policy, s3Config, webhook, ...extra } = checked.data;
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
