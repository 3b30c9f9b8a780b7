import { type DeliveredJob, deliveredJobSchema } from "../protocol/job.js";
import { retryAfterMs } from "../wait.js";
import { MAX_RETRY_AFTER_MS } from "./backoff.js";
import type { PlatformHttp } from "./platform-http.js";

/** One job-take or job-take-batch request and the reading of its answer (docs/protocol.md, "Taking jobs"). */

/** A delivered item that is not a valid job. */
export interface BadJob {
  /** Its id, when it had a usable one (the worker then fails that job with `reason`). */
  readonly id: string | undefined;
  readonly reason: string;
}

/** What a take answered. */
export type TakeAnswer =
  | { readonly kind: "jobs"; readonly jobs: DeliveredJob[]; readonly bad: BadJob[] }
  | { readonly kind: "none"; readonly status: number }
  | { readonly kind: "slow-down"; readonly waitMs: number | undefined }
  | { readonly kind: "fault"; readonly reason: string };

function readJob(item: unknown): { job: DeliveredJob } | { bad: BadJob } {
  const parsed = deliveredJobSchema.safeParse(item);
  if (parsed.success) return { job: parsed.data as DeliveredJob };
  const rawId = typeof item === "object" && item !== null ? (item as { id?: unknown }).id : undefined;
  const id = typeof rawId === "string" && rawId !== "" ? rawId : undefined;
  const reason = parsed.error.issues.map((i) =>
    i.path.length > 0 ? `${i.path.join(".")}: ${i.message}` : i.message,
  );
  return { bad: { id, reason: `the platform delivered a malformed job (${reason.join("; ")})` } };
}

/**
 * The largest take answer read for `asked` jobs, bytes: the platform's largest job payload
 * (20 MB, a `/runsync` body: docs/protocol.md, "Taking jobs") per job asked for. A longer answer
 * is a fault, not read to its end.
 */
export function takeAnswerLimit(asked: number): number {
  return Math.max(1, asked) * 20 * 1024 * 1024;
}

/**
 * When the take's signal aborts (the worker closing, or its own long-poll cap) before the answer
 * came, how long the answer still has to arrive, ms: a job the platform handed over in that
 * moment is on the wire, and cutting the connection then would leave it IN_PROGRESS there, held
 * by nobody, until the worker's pings lapse. An answer whose headers came is read to its end.
 */
export const TAKE_SETTLE_MS = 250;
/** Longest time a take answer's body may take once its headers came, ms. */
const TAKE_BODY_MS = 120_000;

/**
 * Sends one take for `asked` jobs and reads the answer; never throws except when `signal` aborts.
 */
export async function take(
  http: PlatformHttp,
  url: string,
  signal: AbortSignal,
  asked = 1,
): Promise<TakeAnswer> {
  let status: number;
  let text: string;
  let headers: Readonly<Record<string, string | string[] | undefined>>;
  let truncated: "bytes" | "time" | undefined;
  const limit = takeAnswerLimit(asked);
  try {
    ({ status, text, headers, truncated } = await http.get(url, {
      signal,
      maxAnswerBytes: limit,
      answerBodyMs: TAKE_BODY_MS,
      settleMs: TAKE_SETTLE_MS,
    }));
  } catch (err) {
    if (signal.aborted) throw err;
    return { kind: "fault", reason: err instanceof Error ? err.message : String(err) };
  }
  if (truncated === "bytes")
    return { kind: "fault", reason: `the take answer is over ${limit} bytes; not read further` };
  if (truncated === "time")
    return { kind: "fault", reason: `the take answer's body took over ${TAKE_BODY_MS} ms; not read further` };
  // Like the reference worker, any answer below 400 with a body is read as jobs (not only 200).
  if (status === 204 || status === 400 || (status < 400 && text.trim() === ""))
    return { kind: "none", status };
  if (status === 429)
    return { kind: "slow-down", waitMs: retryAfterMs(headers["retry-after"], { capMs: MAX_RETRY_AFTER_MS }) };
  if (status > 400) return { kind: "fault", reason: `HTTP ${status}: ${text.slice(0, 200)}` };
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return { kind: "fault", reason: `the take answer is not JSON: ${text.slice(0, 200)}` };
  }
  // `null` is "no job", not a malformed one.
  if (body === null) return { kind: "none", status };
  const items = Array.isArray(body) ? body : [body];
  const jobs: DeliveredJob[] = [];
  const bad: BadJob[] = [];
  for (const item of items) {
    const read = readJob(item);
    if ("bad" in read) bad.push(read.bad);
    else jobs.push(read.job);
  }
  return { kind: "jobs", jobs, bad };
}
