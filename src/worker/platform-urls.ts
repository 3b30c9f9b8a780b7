import { expandTemplate, swapTakeRoute, withQuery } from "../protocol/index.js";

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

/** Builds the worker's URLs once. */
export function platformUrls(templates: UrlTemplates): PlatformUrls {
  const { podId, gpuTypeId } = templates;
  // The take, stop and ping URLs name the worker by `$ID`; job-done and job-stream name the job.
  const ownId = (template: string) => expandTemplate(template, { podId, gpuTypeId, id: podId });
  // `$ID` is kept for the job id: expandTemplate substitutes it last, so a value never holds it.
  const perJob = (template: string) => {
    const fixed = template.replaceAll("$RUNPOD_POD_ID", encodeURIComponent(podId));
    const withGpu = fixed.replaceAll("$RUNPOD_GPU_TYPE_ID", encodeURIComponent(gpuTypeId));
    return (jobId: string) => withGpu.replaceAll("$ID", encodeURIComponent(jobId));
  };
  const take = ownId(templates.jobTakeUrl);
  const batch = hasTakeRoute(take) ? swapTakeRoute(take, "job-take-batch") : take;
  const done = perJob(templates.jobDoneUrl);
  const stream = templates.jobStreamUrl === undefined ? undefined : perJob(templates.jobStreamUrl);
  return Object.freeze({
    take: (free: number, jobInProgress: boolean) =>
      withQuery(free > 1 ? batch : take, {
        ...(free > 1 ? { batch_size: free } : {}),
        job_in_progress: jobInProgress ? 1 : 0,
      }),
    stop: hasTakeRoute(take) ? swapTakeRoute(take, "job-stop") : undefined,
    ping: templates.pingUrl === undefined ? undefined : ownId(templates.pingUrl),
    done: (jobId: string, isStream: boolean) => withQuery(done(jobId), { isStream: String(isStream) }),
    stream: (jobId: string) =>
      stream === undefined ? undefined : withQuery(stream(jobId), { isStream: "false" }),
  });
}
