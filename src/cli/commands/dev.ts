import { readFile } from "node:fs/promises";
import { dirname, join, relative } from "node:path";
import { RunletError } from "../../errors.js";
import {
  type Command,
  EXIT,
  integerFlag,
  interrupted,
  parseCommandArgs,
  reportCliError,
  usageError,
} from "../command.js";
import { DevSpawner } from "../dev-spawner.js";
import { DEFAULT_HANDLER_PATHS, resolveHandlerPath } from "../handler-path.js";
import { followJobs } from "../job-log.js";
import { formatLogLine } from "../log-line.js";
import { watchFolder } from "../watch.js";
import { WorkerPool } from "../worker-pool.js";

const ENDPOINT_ID = "local";
const DEFAULT_PORT = 8787;

const HELP = `Usage: runlet dev [handler] [--port N] [--workers N]

Starts runlet's local copy of the platform with one endpoint ("${ENDPOINT_ID}") and worker
processes for the handler, and prints the URL, the API key, the live dashboard's link (it
carries the key) and a curl to try. Workers are replaced when a file in the handler's folder
changes; queued jobs wait for the new ones.
Each job is logged as it runs. Endpoints created through the harness's management API
(runlet deploy --base-url <url>) get worker processes for the same handler. Stop with Ctrl-C.

Arguments:
  handler          the handler module
                   default: the first of ${DEFAULT_HANDLER_PATHS.join(", ")}

Options:
  -p, --port N     the port to serve on (0 picks a free one)       default: ${DEFAULT_PORT}
  --workers N      worker processes                                 default: 1
  -h, --help       show this help

Exit codes: 0 stopped with Ctrl-C, 1 could not start (e.g. the port is taken), 2 bad usage.`;

/** Quotes `text` for a POSIX shell. */
function shellQuote(text: string): string {
  return `'${text.replaceAll("'", `'\\''`)}'`;
}

/** The body of the printed curl and the dashboard's editor: test_input.json when the folder has one, else an empty input. */
async function sampleBody(cwd: string): Promise<unknown> {
  try {
    return JSON.parse(await readFile(join(cwd, "test_input.json"), "utf8")) as unknown;
  } catch {
    // No (or no valid) test_input.json: the curl still shows the request's shape.
    return { input: {} };
  }
}

/** `runlet dev`: the harness plus reloading worker processes for one handler. */
export const command: Command = {
  name: "dev",
  summary: "run the handler on a local copy of the platform, reloading on change",
  help: HELP,
  async run(argv) {
    const parsed = parseCommandArgs(command, argv, {
      port: { type: "string", short: "p" },
      workers: { type: "string" },
    });
    if ("exitCode" in parsed) return parsed.exitCode;
    try {
      if (parsed.positionals.length > 1) throw usageError("expected at most one handler");
      const { port: portArg, workers: workersArg } = parsed.values;
      const port = integerFlag("port", portArg, DEFAULT_PORT, 0, 65_535);
      const workers = integerFlag("workers", workersArg, 1, 1, 64);
      const cwd = process.cwd();
      const handlerPath = await resolveHandlerPath(parsed.positionals[0], cwd);
      const out = (line: string) => process.stdout.write(`${line}\n`);
      // Loaded only now, so --help and usage errors answer without loading the harness.
      const { startHarness } = await import("../../harness/index.js");

      const sample = await sampleBody(cwd);
      const deployed = new DevSpawner({
        handlerPath,
        onLine: (label, line) => out(`[${label}] ${formatLogLine(line)}`),
      });
      await using harness = await startHarness({
        port,
        endpoints: [{ id: ENDPOINT_ID }],
        // Endpoints deployed to this harness (POST /v2/serverless) run the same handler.
        managementSpawn: deployed.spawn,
        // The live page, its request editor filled from test_input.json.
        dashboard: { sampleRequest: sample },
      }).catch((err: unknown) => {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === "EADDRINUSE") {
          throw new RunletError(
            "RUNLET_HARNESS_CONFIG",
            `port ${port} is in use; pass --port N (0 picks a free one)`,
            {
              cause: err,
            },
          );
        }
        throw err;
      });
      const endpoint = `${harness.url}/v2/${ENDPOINT_ID}`;
      const body = JSON.stringify(sample);
      out(`runlet dev: serving ${relative(cwd, handlerPath) || handlerPath}`);
      out(`  endpoint  ${endpoint}`);
      out(`  api key   ${harness.apiKey}`);
      out(`  dashboard ${harness.dashboardUrl}#token=${encodeURIComponent(harness.apiKey)}`);
      out(
        `  try       curl -s -X POST ${endpoint}/runsync -H ${shellQuote(`Authorization: Bearer ${harness.apiKey}`)}` +
          ` -H 'Content-Type: application/json' -d ${shellQuote(body)}`,
      );

      await using pool = new WorkerPool({
        handlerPath,
        size: workers,
        // Platform mode (JSON lines) so each worker line can be rendered as one readable line.
        envFor: () => ({ ...harness.workerEnv(ENDPOINT_ID), RUNPOD_ENDPOINT_ID: ENDPOINT_ID }),
        onLine: (label, line) => out(`[${label}] ${formatLogLine(line)}`),
        onExit: (label, code, signal) => {
          harness.workerRestarted(ENDPOINT_ID);
          out(`runlet dev: worker ${label} exited (${signal ?? `code ${code}`}); starting another`);
        },
        onStartFailed: (label, code, signal) =>
          out(
            `runlet dev: worker ${label} did not start (${signal ?? `code ${code}`}); waiting for a change to the handler's folder`,
          ),
      });
      pool.start();
      const jobs = followJobs(harness, out);
      const watcher = watchFolder(dirname(handlerPath), (files) => {
        out(
          `runlet dev: ${files.slice(0, 3).join(", ")}${files.length > 3 ? ", …" : ""} changed; reloading workers`,
        );
        Promise.all([pool.reload(), deployed.reload()]).catch((err: unknown) =>
          out(`runlet dev: reload failed: ${String(err)}`),
        );
      });
      try {
        const signal = await interrupted();
        out(`runlet dev: ${signal}, stopping`);
      } finally {
        watcher.close();
        jobs.stop();
      }
      return EXIT.ok;
    } catch (err) {
      return reportCliError("dev", err);
    }
  },
};
