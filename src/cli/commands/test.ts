import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { type Command, EXIT, parseCommandArgs, reportCliError, usageError } from "../command.js";
import { DEFAULT_HANDLER_PATHS, resolveHandlerPath } from "../handler-path.js";
import { allowTypeScript } from "../typescript.js";

const ENDPOINT_ID = "test";
/** How often the job's progress and stream are read while it runs, in ms. */
const POLL_MS = 25;

const HELP = `Usage: runlet test [handler] [--input JSON]

Runs one job through an in-process copy of the platform and a worker, as the platform would run
it (input validation, deadline, streaming, progress), prints each progress update and stream
item as it arrives, then the final output as JSON on stdout. Logs go to stderr.

The job comes from --input, else from test_input.json in the current folder; both take the
reference SDK's shape: {"input": {...}} (a "policy" or "s3Config" beside "input" is passed on).

Arguments:
  handler            the handler module
                     default: the first of ${DEFAULT_HANDLER_PATHS.join(", ")}

Options:
  -i, --input JSON   the job, e.g. '{"input": {"name": "Ada"}}'
  -h, --help         show this help

Exit codes: 0 the job completed, 1 it failed (or the handler could not be loaded),
2 bad usage (unknown flag, missing handler file, no or malformed job JSON).`;

/** The job request: `input` plus whatever else the SDK convention allows beside it. */
type JobRequest = { readonly input: unknown } & Readonly<Record<string, unknown>>;

async function readJob(given: string | undefined, cwd: string): Promise<JobRequest> {
  let text: string;
  let source: string;
  if (given === undefined) {
    source = "test_input.json";
    try {
      text = await readFile(join(cwd, source), "utf8");
    } catch {
      throw usageError(`no --input given and no test_input.json in ${cwd}; pass --input '{"input": {...}}'`);
    }
  } else {
    source = "--input";
    text = given;
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw usageError(`${source} is not valid JSON: ${(err as Error).message}`);
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed) || !("input" in parsed)) {
    throw usageError(`${source} must be a JSON object with an "input" key, like {"input": {"name": "Ada"}}`);
  }
  return parsed as JobRequest;
}

/** A failed job's error for a human: the platform's error report is JSON text; show its parts. */
function describeError(error: string | undefined): string {
  if (error === undefined) return "(no error message)";
  try {
    const report = JSON.parse(error) as Record<string, unknown>;
    if (typeof report["error_message"] === "string") {
      const type = typeof report["error_type"] === "string" ? `${report["error_type"]}: ` : "";
      const trace = typeof report["error_traceback"] === "string" ? `\n${report["error_traceback"]}` : "";
      return `${type}${report["error_message"]}${trace}`;
    }
  } catch {
    // A plain string error (JobError, invalid input): shown as it is.
  }
  return error;
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
      const job = await readJob(typeof inputArg === "string" ? inputArg : undefined, cwd);
      // Loaded only now, so --help and usage errors answer without loading the worker and harness.
      const [{ loadHandler }, { startWorker }, { startHarness }] = await Promise.all([
        import("../../worker/load-handler.js"),
        import("../../worker/worker.js"),
        import("../../harness/index.js"),
      ]);
      await allowTypeScript(handlerPath);
      const { definition } = await loadHandler(handlerPath);

      await using harness = await startHarness({ takeTimeoutMs: 1_000, endpoints: [{ id: ENDPOINT_ID }] });
      const worker = await startWorker(definition, {
        env: harness.workerEnv(ENDPOINT_ID),
        logDestination: process.stderr,
        handlerModule: handlerPath,
        shutdownGraceMs: 2_000,
        flushTimeoutMs: 2_000,
      });
      try {
        // Through the client API, so the job is checked as the platform checks a /run body.
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
        const id = answer.id;
        let progressSeen = 0;
        let streamSeen = 0;
        const print = (line: string) => process.stdout.write(`${line}\n`);
        for (;;) {
          const snap = harness.job(id);
          if (snap === undefined) throw new Error(`job ${id} disappeared from the harness`);
          for (; progressSeen < snap.progress.length; progressSeen++) {
            print(`progress ${JSON.stringify(snap.progress[progressSeen])}`);
          }
          for (; streamSeen < snap.stream.length; streamSeen++) {
            print(`stream ${JSON.stringify(snap.stream[streamSeen]?.output)}`);
          }
          if (snap.status !== "IN_QUEUE" && snap.status !== "IN_PROGRESS") {
            const timing = `in ${snap.executionTime ?? "?"} ms`;
            if (snap.status === "COMPLETED") {
              print(JSON.stringify(snap.output, null, 2) ?? "null");
              process.stderr.write(`runlet test: COMPLETED ${timing}\n`);
              return EXIT.ok;
            }
            process.stderr.write(`runlet test: ${snap.status} ${timing}: ${describeError(snap.error)}\n`);
            return EXIT.failure;
          }
          await sleep(POLL_MS);
        }
      } finally {
        await worker.close();
      }
    } catch (err) {
      return reportCliError("test", err);
    }
  },
};
