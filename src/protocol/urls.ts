/**
 * The platform's URL templates (docs/protocol.md, "Environment"): placeholder substitution, and query
 * parameters added with a URL builder (templates may or may not end in `?`).
 */

/** Values substituted into a URL template. */
export interface TemplateValues {
  /** This worker's id (`$RUNPOD_POD_ID`). */
  readonly podId: string;
  /** The GPU type (`$RUNPOD_GPU_TYPE_ID`). */
  readonly gpuTypeId: string;
  /** `$ID`: the worker id in job-take and ping templates, the job id in job-done and job-stream. */
  readonly id: string;
}

/** Substitutes `$RUNPOD_POD_ID`, `$RUNPOD_GPU_TYPE_ID` and `$ID` into a template, URL-encoding the values. */
export function expandTemplate(template: string, values: TemplateValues): string {
  // Longest names first so `$ID` never eats the start of another placeholder.
  return template
    .replaceAll("$RUNPOD_POD_ID", encodeURIComponent(values.podId))
    .replaceAll("$RUNPOD_GPU_TYPE_ID", encodeURIComponent(values.gpuTypeId))
    .replaceAll("$ID", encodeURIComponent(values.id));
}

/** Returns `url` with `params` set as query parameters (existing ones kept; `undefined` values skipped). */
export function withQuery(
  url: string,
  params: Readonly<Record<string, string | number | undefined>>,
): string {
  const built = new URL(url);
  for (const [name, value] of Object.entries(params)) {
    if (value !== undefined) built.searchParams.set(name, String(value));
  }
  return built.toString();
}

/** Replaces the `/job-take/` path segment of a job-take URL with another route (`job-take-batch`, `job-stop`). */
export function swapTakeRoute(url: string, route: "job-take-batch" | "job-stop"): string {
  const built = new URL(url);
  if (!built.pathname.includes("/job-take/")) {
    throw new Error(`job-take URL has no /job-take/ segment: ${built.pathname}`);
  }
  built.pathname = built.pathname.replace("/job-take/", `/${route}/`);
  return built.toString();
}
