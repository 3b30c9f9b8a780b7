/**
 * The streaming baseline: a minimal worker that posts one stream item at a time and waits for
 * each post before producing the next, as the reference SDK does (docs/protocol.md, "Streaming"). It speaks
 * the protocol with plain `fetch` and imports nothing from runlet, so the comparison measures
 * runlet's streaming against the simplest correct loop. It serves the bench's stream jobs
 * (`{ items: N }` → N short strings) until SIGTERM.
 *
 * Run: `node bin/run-ts.mjs bench/baseline-worker.ts` with the platform environment (docs/protocol.md, "Environment").
 */

function required(name: string): string {
  const value = process.env[name];
  if (value === undefined || value === "") throw new Error(`${name} is not set`);
  return value;
}

const podId = required("RUNPOD_POD_ID");
const apiKey = required("RUNPOD_AI_API_KEY");
const gpu = process.env["RUNPOD_GPU_TYPE_ID"] ?? "unknown";

function expand(template: string, id: string): string {
  return template
    .replaceAll("$RUNPOD_POD_ID", podId)
    .replaceAll("$RUNPOD_GPU_TYPE_ID", gpu)
    .replaceAll("$ID", id);
}

function withQuery(template: string, query: Record<string, string>): string {
  const url = new URL(template);
  for (const [k, v] of Object.entries(query)) url.searchParams.set(k, v);
  return url.href;
}

const takeUrl = expand(required("RUNPOD_WEBHOOK_GET_JOB"), podId);
const doneTemplate = required("RUNPOD_WEBHOOK_POST_OUTPUT");
const streamTemplate = required("RUNPOD_WEBHOOK_POST_STREAM");
const headers = { authorization: apiKey, "content-type": "application/json" };

const stopping = new AbortController();
process.once("SIGTERM", () => stopping.abort());

// The heartbeat every worker owes the platform (docs/protocol.md, "Heartbeat"), as the reference SDK sends it
// from its own thread: without it the harness counts the worker lost once a long stream outlasts
// heartbeatTimeoutMs. A timer here is enough, because the loop below awaits every post.
let currentJob: string | undefined;
const pingTemplate = process.env["RUNPOD_WEBHOOK_PING"];
if (pingTemplate !== undefined) {
  const pingEveryMs = Number(process.env["RUNPOD_PING_INTERVAL"] ?? 10_000);
  const ping = (): void => {
    const query: Record<string, string> = { runpod_version: "baseline" };
    if (currentJob !== undefined) query["job_id"] = currentJob;
    fetch(withQuery(expand(pingTemplate, podId), query), { headers: { authorization: apiKey } })
      .then((res) => res.arrayBuffer())
      .catch(() => {
        // A missed ping is retried by the next tick; the harness tolerates gaps up to its timeout.
      });
  };
  ping();
  const timer = setInterval(ping, pingEveryMs);
  stopping.signal.addEventListener("abort", () => clearInterval(timer), { once: true });
}

/** Posts until the platform answers 2xx (the reference SDK also retries its posts). */
async function post(url: string, body: string, jobId: string): Promise<void> {
  for (let attempt = 0; attempt < 5; attempt++) {
    const res = await fetch(url, { method: "POST", headers: { ...headers, "x-request-id": jobId }, body });
    await res.arrayBuffer();
    if (res.ok) return;
  }
  throw new Error(`posting to ${url} kept failing`);
}

function* tokens(count: number): Generator<string> {
  for (let i = 0; i < count; i++) yield `tok${i} `;
}

async function serve(job: { id: string; input: { items?: number } }): Promise<void> {
  currentJob = job.id;
  const streamUrl = withQuery(expand(streamTemplate, job.id), { isStream: "false" });
  for (const item of tokens(job.input.items ?? 0)) {
    await post(streamUrl, JSON.stringify({ output: item }), job.id);
  }
  await post(withQuery(expand(doneTemplate, job.id), { isStream: "true" }), '{"output":[]}', job.id);
  currentJob = undefined;
}

while (!stopping.signal.aborted) {
  let res: Response;
  try {
    res = await fetch(withQuery(takeUrl, { job_in_progress: "0" }), {
      headers: { authorization: apiKey },
      signal: stopping.signal,
    });
  } catch {
    // Shutdown aborted the long poll, or the harness is gone: stop or poll again.
    continue;
  }
  const text = await res.text();
  if (res.status !== 200 || text.trim() === "") continue;
  await serve(JSON.parse(text) as { id: string; input: { items?: number } });
}
