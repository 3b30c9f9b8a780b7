import { expandTemplate, swapTakeRoute, withQuery } from "../../protocol/urls.js";

/**
 * Every URL a worker calls on the platform, built once from the frozen config: the templates'
 * `$RUNPOD_POD_ID` and `$RUNPOD_GPU_TYPE_ID` are substituted at start; only `$ID` (a job id)
 * varies per call.
 */
export interface PlatformUrls {
  /** job-take for one free slot; job-take-batch with `batch_size` for more; `job_in_progress` either way. */
  take(free: number, jobInProgress: boolean): string;
  /** The job-stop poll; undefined when the take URL has no `/job-take/` segment to swap (no stop channel). */
  readonly stop: string | undefined;
  /** The heartbeat's ping URL; undefined without a ping template. */
  readonly ping: string | undefined;
  /** job-done for `jobId`, with `isStream`. */
  done(jobId: string, isStream: boolean): string;
  /** job-stream for `jobId`; undefined without a stream template. */
  stream(jobId: string): string | undefined;
}

/** True when `url`'s path has the `/job-take/` segment that job-take-batch and job-stop swap. */
export function hasTakeRoute(url: string): boolean {
  return new URL(url).pathname.includes("/job-take/");
}

/** What {@link platformUrls} reads: the templates and the worker's ids. */
export interface UrlTemplates {
  readonly jobTakeUrl: string;
  readonly jobDoneUrl: string;
  readonly jobStreamUrl: string | undefined;
  readonly pingUrl: string | undefined;
  readonly podId: string;
  readonly gpuTypeId: string;
}

/**
 * Stands for the job id while a per-job URL is built at start. Letters only: neither the URL
 * parser nor query serialisation changes it, so it can be found again in the built URL.
 */
const JOB_ID_MARK = "RUNLETJOBIDMARK";

/**
 * A per-job URL maker for `template` (worker and GPU already substituted, `$ID` left) with `query`
 * set. The URL is parsed and its query set once, with a mark where the id goes; each job then
 * only swaps its encoded id in, which gives the same text as building the URL anew when the id
 * sits in the path (an encoded id is left as it is there). An id in the query would be
 * re-serialised by setting another parameter, so such a template is built anew per job.
 */
function perJobUrl(template: string, query: Readonly<Record<string, string>>): (jobId: string) => string {
  const built = withQuery(template.replaceAll("$ID", JOB_ID_MARK), query);
  const { pathname, search, hash } = new URL(built);
  const idInPathOnly =
    !template.includes(JOB_ID_MARK) &&
    pathname.includes(JOB_ID_MARK) &&
    !search.includes(JOB_ID_MARK) &&
    !hash.includes(JOB_ID_MARK);
  if (idInPathOnly) {
    return (jobId) => built.replaceAll(JOB_ID_MARK, encodeURIComponent(jobId));
  }
  return (jobId) => withQuery(template.replaceAll("$ID", encodeURIComponent(jobId)), query);
}

/** Builds the worker's URLs once. */
export function platformUrls(templates: UrlTemplates): PlatformUrls {
  const { podId, gpuTypeId } = templates;
  // The take, stop and ping URLs name the worker by `$ID`; job-done and job-stream name the job.
  const ownId = (template: string) => expandTemplate(template, { podId, gpuTypeId, id: podId });
  // `$ID` is kept for the job id: expandTemplate substitutes it last, so a value never holds it.
  const perJob = (template: string) =>
    template
      .replaceAll("$RUNPOD_POD_ID", encodeURIComponent(podId))
      .replaceAll("$RUNPOD_GPU_TYPE_ID", encodeURIComponent(gpuTypeId));
  const take = ownId(templates.jobTakeUrl);
  const batch = hasTakeRoute(take) ? swapTakeRoute(take, "job-take-batch") : take;
  const doneTemplate = perJob(templates.jobDoneUrl);
  const done = perJobUrl(doneTemplate, { isStream: "false" });
  const streamDone = perJobUrl(doneTemplate, { isStream: "true" });
  const stream =
    templates.jobStreamUrl === undefined
      ? undefined
      : perJobUrl(perJob(templates.jobStreamUrl), { isStream: "false" });
  return Object.freeze({
    take: (free: number, jobInProgress: boolean) =>
      withQuery(free > 1 ? batch : take, {
        ...(free > 1 ? { batch_size: free } : {}),
        job_in_progress: jobInProgress ? 1 : 0,
      }),
    stop: hasTakeRoute(take) ? swapTakeRoute(take, "job-stop") : undefined,
    ping: templates.pingUrl === undefined ? undefined : ownId(templates.pingUrl),
    done: (jobId: string, isStream: boolean) => (isStream ? streamDone(jobId) : done(jobId)),
    stream: (jobId: string) => stream?.(jobId),
  });
}
