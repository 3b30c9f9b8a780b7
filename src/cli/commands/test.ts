import { Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { RunletError } from "../../errors.js";
import type { Harness } from "../../harness/index.js";
import { FITNESS_ENV } from "../../protocol/index.js";
import { settle } from "../../task-sink.js";
import { sleep } from "../../wait.js";
import { type Command, EXIT, parseCommandArgs, reportCliError, usageError } from "../command.js";
import { DEFAULT_HANDLER_PATHS, resolveHandlerPath } from "../handler-path.js";
import { describeFailure } from "../job-failure.js";
import { escapeControl, escapingStream } from "../terminal-text.js";
import { type JobRequest, MAX_JOBS, readJobs } from "../test-jobs.js";
import { allowTypeScript } from "../typescript.js";
import { inheritedEnv } from "../worker-pool.js";

const ENDPOINT_ID = "test";
/** How often the job's progress and stream are read while it runs, in ms. */
const POLL_MS = 25;
/** After SIGTERM, how long the worker process may take to exit before SIGKILL, in ms. */
const WORKER_KILL_AFTER_MS = 2_000;
/** After the worker process exited, how long a result it posted on its way out may take to show, in ms. */
const EXIT_SETTLE_MS = 1_000;
/** Printed after a timeout of an in-process handler: synchronous work can only be stopped in a thread. */
const SYNC_HINT =
  'runlet test: hint: a handler that does synchronous work holds its thread, and in-process nothing can stop it at its deadline; give it isolation: "thread" in defineHandler so the worker can end it';

const HELP = `Usage: runlet test [handler] [--input JSON]

Runs one job through an in-process copy of the platform and a worker process (\`runlet start\`),
as the platform would run it (input validation, deadline, streaming, progress), prints each
progress update and stream item as it arrives, then the final output as JSON on stdout. Logs go
to stderr. A handler that ignores its deadline is reported once the hard-stop grace has passed.

The job comes from --input, else from test_input.json in the current folder; both take the
reference SDK's shape: {"input": {...}} (a "policy" or "s3Config" beside "input" is passed on).
A list of jobs, [{"input": {...}}, ...] (up to ${MAX_JOBS}), is queued before the worker starts, so
a batch handler (defineBatchHandler) takes them as one batch (or several of maxSize): each job's
progress is prefixed with its place, [0], [1], ...; the outputs print as one JSON list, and each
job's end and batch go to stderr.

Arguments:
  handler            the handler module
                     default: the first of ${DEFAULT_HANDLER_PATHS.join(", ")}

Options:
  -i, --input JSON   the job, e.g. '{"input": {"name": "Ada"}}'
  -h, --help         show this help

Exit codes: 0 the job (every job) completed, 1 it (any) failed (or the handler could not be loaded),
2 bad usage (unknown flag, missing handler file, no or malformed job JSON).`;

/** Submits `job` through the client API, so it is checked as the platform checks a /run body. */
async function submit(harness: Harness, job: JobRequest): Promise<string> {
  const response = await fetch(`${harness.url}/v2/${ENDPOINT_ID}/run`, {
    method: "POST",
    headers: { authorization: `Bearer ${harness.apiKey}`, "content-type": "application/json" },
    body: JSON.stringify(job),
  });
  const answer = (await response.json()) as { id?: string; error?: string };
  if (!response.ok || answer.id === undefined) {
    throw usageError(
      `the platform refused the job (${response.status}): ${answer.error ?? "no reason given"}`,
    );
  }
  return answer.id;
}

/** ` (batch <id>, <size> jobs, waited <n> ms)` when the job's final job-done named its batch. */
function batchNote(harness: Harness, jobId: string): string {
  const post = harness
    .requests({ route: "job-done" })
    .find((r) => r.path.endsWith(`/${jobId}`) && r.query["batch_id"]);
  if (post === undefined) return "";
  const q = post.query;
  return ` (batch ${q["batch_id"]}, ${q["batch_size"]} jobs, waited ${q["batch_wait_ms"]} ms)`;
}

/**
 * What the worker logs when a handler is still running after its deadline and the hard-stop
 * grace (src/worker/job/active-job.ts, batch-scheduler.ts): then the synchronous-work hint applies.
 * A handler that stops at its deadline (it honoured the aborted signal) times out too, but
 * nothing held its thread.
 */
const RAN_PAST_DEADLINE = /ignored its aborted signal/;

/**
 * process.stderr behind a stream that escapes terminal control characters (the worker's output),
 * and whether that output has reported a handler running past its deadline.
 */
function workerOutput(): { readonly stream: NodeJS.WritableStream; ranPastDeadline(): boolean } {
  const escaping = escapingStream();
  let seen = false;
  let carry = "";
  const watching = new Transform({
    transform(chunk: Buffer, _enc, callback) {
      const text = carry + chunk.toString("latin1");
      if (RAN_PAST_DEADLINE.test(text)) seen = true;
      // A match split between two chunks: keep the end of this one.
      carry = text.slice(-64);
      callback(null, chunk);
    },
  });
  // stream.pipeline: a closed stderr (EPIPE) ends the pipe here instead of reaching the process;
  // ignored, since there is nowhere left to say it.
  settle(pipeline(watching, escaping, process.stderr, { end: false }), () => undefined);
  return { stream: watching, ranPastDeadline: () => seen };
}

/** `runlet test`: one job through an in-process harness and worker. */
export const command: Command = {
  name: "test",
  summary: "run one job (from --input or test_input.json) and print its output",
  help: HELP,
  async run(argv) {
    const parsed = parseCommandArgs(command, argv, { input: { type: "string", short: "i" } });
    if ("exitCode" in parsed) return parsed.exitCode;
    try {
      if (parsed.positionals.length > 1) throw usageError("expected at most one handler");
      const cwd = process.cwd();
      const handlerPath = await resolveHandlerPath(parsed.positionals[0], cwd);
      const { input: inputArg } = parsed.values;
      const read = await readJobs(typeof inputArg === "string" ? inputArg : undefined, cwd);
      const jobs: readonly JobRequest[] = Array.isArray(read) ? read : [read];
      // Loaded only now, so --help and usage errors answer without loading the worker and harness.
      const [{ loadHandler }, { processSpawner, startHarness }] = await Promise.all([
        import("../../worker/load-handler.js"),
        import("../../harness/index.js"),
      ]);
      // Loaded here first so that a handler that does not load is reported before anything starts.
      await allowTypeScript(handlerPath);
      const { definition } = await loadHandler(handlerPath);

      await using harness = await startHarness({ takeTimeoutMs: 1_000, endpoints: [{ id: ENDPOINT_ID }] });
      // The worker runs as `runlet start` in a child process, as in a container: a handler that
      // blocks its thread (a synchronous endless loop) then blocks the worker, not this process, and
      // the worker's watchdog can report the job and end it while this process keeps reading.
      const output = workerOutput();
      const spawn = processSpawner(handlerPath, {
        // The shell's environment without platform variables, as `runlet dev` gives its workers.
        baseEnv: inheritedEnv(),
        // The worker's lines carry what the handler logged of the job: control characters escaped.
        output: output.stream,
        killAfterMs: WORKER_KILL_AFTER_MS,
      });
      // Queued before the worker starts, so its first take finds them all (one batch for a batch handler).
      const ids: string[] = [];
      for (const job of jobs) ids.push(await submit(harness, job));
      // One job, as the Python SDK's test mode: no built-in fitness checks (docs/fitness.md).
      const env: Record<string, string> = {
        ...harness.workerEnv(ENDPOINT_ID),
        [FITNESS_ENV.skipAutoSystemChecks]: "true",
        [FITNESS_ENV.skipGpuCheck]: "true",
      };
      const podId = env["RUNPOD_POD_ID"] ?? "";
      const worker = await spawn(env, (update) => harness.reportWorkerStartup(ENDPOINT_ID, podId, update));
      let workerExited = false;
      // processSpawner's workers always have `exited`; a settled promise stands in for the type's sake.
      // Ignored when it rejects: only a clean exit counts as exited.
      settle(
        (worker.exited ?? Promise.resolve()).then(() => {
          workerExited = true;
        }),
        () => undefined,
      );
      // The last lines are printed after the worker has stopped, so its shutdown log comes before them.
      let ending: { readonly code: number; readonly text: (ranPastDeadline: boolean) => string };
      try {
        // Outputs and stream items are printed as JSON (control characters escaped by it); the rest
        // of a job's text is escaped here.
        const print = (line: string) => process.stdout.write(`${escapeControl(line)}\n`);
        const many = Array.isArray(read);
        const seen = ids.map(() => ({ progress: 0, stream: 0 }));
        let exitSeenAt: number | undefined;
        for (;;) {
          const snaps = ids.map((id) => {
            const snap = harness.job(id);
            if (snap === undefined) throw new Error(`job ${id} disappeared from the harness`);
            return snap;
          });
          for (const [at, snap] of snaps.entries()) {
            const mark = many ? `[${at}] ` : "";
            const counts = seen[at]!;
            for (; counts.progress < snap.progress.length; counts.progress++) {
              print(`progress ${mark}${JSON.stringify(snap.progress[counts.progress])}`);
            }
            for (; counts.stream < snap.stream.length; counts.stream++) {
              print(`stream ${mark}${JSON.stringify(snap.stream[counts.stream]?.output)}`);
            }
          }
          if (snaps.every((snap) => snap.status !== "IN_QUEUE" && snap.status !== "IN_PROGRESS")) {
            const outputs = snaps.map((snap) => (snap.status === "COMPLETED" ? (snap.output ?? null) : null));
            if (many || snaps[0]!.status === "COMPLETED") {
              print(JSON.stringify(many ? outputs : outputs[0], null, 2) ?? "null");
            }
            const lines = snaps.map((snap, at) => {
              const timing = `in ${snap.executionTime ?? "?"} ms`;
              const what = many ? `job ${at} ` : "";
              const batch = many ? batchNote(harness, snap.id) : "";
              if (snap.status === "COMPLETED") return `runlet test: ${what}COMPLETED ${timing}${batch}\n`;
              const failure = describeFailure(snap.status, snap.error);
              // The hint only for a handler that really ran past its deadline. One that holds the main
              // thread logs nothing (its thread is held): the watchdog posts its failure once the
              // hard-stop grace is over, and ends the process. One that ignores its aborted signal
              // is logged at the same time. One that stopped at its deadline failed about then.
              const timedOut = failure.code === "RUNLET_JOB_TIMEOUT" && definition.isolation === "in-process";
              const limitMs = Number(/timed out after (\d+) ms/.exec(failure.text)?.[1] ?? Number.NaN);
              const late = (snap.executionTime ?? 0) >= limitMs + definition.hardStopGraceMs / 2;
              // Decided once the worker has stopped and its last lines are read.
              return (ranPast: boolean) =>
                `runlet test: ${many ? `job ${at} ` : "the job "}${snap.status} ${timing}${batch}: ${failure.text} (${failure.code})\n${failure.trace}${timedOut && (ranPast || late) ? `${SYNC_HINT}\n` : ""}`;
            });
            const failed = snaps.some((snap) => snap.status !== "COMPLETED");
            ending = {
              code: failed ? EXIT.failure : EXIT.ok,
              text: (ranPast) =>
                lines.map((line) => (typeof line === "string" ? line : line(ranPast))).join(""),
            };
            break;
          }
          if (workerExited) {
            // A worker that ends itself (its watchdog) posts the job's failure first: give that post
            // a moment to be read before saying that the worker died without one.
            exitSeenAt ??= Date.now();
            if (Date.now() - exitSeenAt > EXIT_SETTLE_MS) {
              throw new RunletError(
                "RUNLET_CLI_WORKER_EXITED",
                `the worker process exited before ${many ? "every job" : `job ${ids[0]}`} ended; its log above says why`,
              );
            }
          }
          await sleep(POLL_MS);
        }
      } finally {
        await worker.close();
      }
      process.stderr.write(escapeControl(ending.text(output.ranPastDeadline())));
      return ending.code;
    } catch (err) {
      return reportCliError("test", err);
    }
  },
};
