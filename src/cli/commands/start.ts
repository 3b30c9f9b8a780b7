import { isRunletError } from "../../errors.js";
import { chooseServeMode } from "../../worker/lb/lb-config.js";
import { loadHandler } from "../../worker/load-handler.js";
import { LOCAL_MODE_MESSAGE, serveHandler } from "../../worker/serve.js";
import { type Command, EXIT, integerFlag, parseCommandArgs, reportCliError, usageError } from "../command.js";
import { DEFAULT_HANDLER_PATHS, resolveHandlerPath } from "../handler-path.js";
import { reportHandler } from "../handler-report.js";
import { allowTypeScript } from "../typescript.js";

const HELP = `Usage: runlet start [handler] [--mode queue|lb|pod] [--shutdown-grace-ms N]

Runs the worker for a handler module (.ts, .mts, .mjs) whose default export is
defineHandler(...). This is what a worker container runs. Modes (docs/load-balancing.md):
  queue  the worker loop against the platform's queue (RUNPOD_WEBHOOK_GET_JOB,
         RUNPOD_WEBHOOK_POST_OUTPUT, RUNPOD_AI_API_KEY, ...)
  lb     an HTTP server on PORT for a load-balancing endpoint, health on
         HEALTH_CHECK_PATH (default /ping) on PORT_HEALTH (default PORT)
  pod    a harness on PORT (job API, dashboard) and the handler's workers, for a Pod
The first that is set decides: --mode, RUNLET_MODE, MODE_TO_RUN=pod, then the environment
(RUNPOD_WEBHOOK_GET_JOB: queue; else PORT: lb).
SIGTERM or SIGINT stops taking jobs, lets running ones finish, reports the rest, and exits 0;
a second signal exits at once with 1.

Arguments:
  handler                  the handler module
                           default: the first of ${DEFAULT_HANDLER_PATHS.join(", ")}

Options:
  --mode MODE              queue, lb or pod                                  default: from the environment
  --shutdown-grace-ms N    how long running jobs may finish after SIGTERM   default: 20000
  -h, --help               show this help

Without any of these there is no platform: use \`runlet dev\` or \`runlet test\`.

Exit codes: 0 stopped by a signal, 1 failure (a handler that ignored its deadline, or an
unfit worker: a failed health check or a WorkerUnfitError, after its unhealthy ping),
2 bad usage or no platform environment.`;

/** `runlet start`: the worker loop, as the platform's container runs it. */
export const command: Command = {
  name: "start",
  summary: "run the worker loop against the platform (inside a worker container)",
  help: HELP,
  async run(argv) {
    const parsed = parseCommandArgs(this, argv, {
      "shutdown-grace-ms": { type: "string" },
      mode: { type: "string" },
    });
    if ("exitCode" in parsed) return parsed.exitCode;
    try {
      if (parsed.positionals.length > 1) throw usageError("expected at most one handler file");
      const grace = parsed.values["shutdown-grace-ms"];
      const shutdownGraceMs = grace === undefined ? undefined : integerFlag("shutdown-grace-ms", grace, 0, 0);
      const path = await resolveHandlerPath(parsed.positionals[0]);
      // The CLI is the process entry: the one place that reads process.env.
      const env = process.env;
      const rawMode = parsed.values["mode"];
      const cliMode = typeof rawMode === "string" ? rawMode : undefined;
      let mode: ReturnType<typeof chooseServeMode>;
      try {
        mode = chooseServeMode(env, cliMode);
      } catch (err) {
        if (isRunletError(err)) throw usageError(err.message);
        throw err;
      }
      if (mode === undefined) {
        process.stderr.write(LOCAL_MODE_MESSAGE);
        return EXIT.usage;
      }
      await allowTypeScript(path);
      const { definition } = await loadHandler(path);
      reportHandler(definition, env);
      const code = await serveHandler(definition, {
        env,
        handlerModule: path,
        mode,
        ...(shutdownGraceMs === undefined ? {} : { shutdownGraceMs }),
      });
      return code;
    } catch (err) {
      return reportCliError("start", err);
    }
  },
};
