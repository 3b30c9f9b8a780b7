import { readFile } from "node:fs/promises";
import { dirname, join, relative } from "node:path";
import { Writable } from "node:stream";
import { RunletError } from "../../errors.js";
import { startupUpdateOfRecord } from "../../harness/fleet/worker-startup.js";
import type { HandlerInfo } from "../../harness/index.js";
import { FITNESS_ENV } from "../../protocol/index.js";
import { settle } from "../../task-sink.js";
import {
  allowedHostsFlag,
  type Command,
  corsFlag,
  EXIT,
  integerFlag,
  interrupted,
  parseCommandArgs,
  reportCliError,
  usageError,
} from "../command.js";
import { tryLines } from "../dev-banner.js";
import { API_KEY_RULE, isApiKey, projectApiKey, STATE_DIR } from "../dev-key.js";
import { DevSidecars } from "../dev-sidecars.js";
import { DevSpawner } from "../dev-spawner.js";
import { DEFAULT_HANDLER_PATHS, resolveHandlerPath } from "../handler-path.js";
import { DESCRIBE_ENV, handlerReportOf } from "../handler-report.js";
import { followJobs } from "../job-log.js";
import { parseLogLine } from "../log-line.js";
import { watchFolder } from "../watch.js";
import { type StartFailure, WorkerPool } from "../worker-pool.js";

const ENDPOINT_ID = "local";
const DEFAULT_PORT = 8787;

const HELP = `Usage: runlet dev [handler] [--mode queue|lb] [--port N] [--dashboard-port N] [--api-key KEY] [--workers N] [--allowed-hosts NAMES] [--cors ORIGINS]

Starts runlet's local copy of the platform with one endpoint ("${ENDPOINT_ID}") and worker
processes for the handler, and prints the URL, the API key, the live dashboard's link (it
carries the key) and how to call the handler (a curl fitted to it, once a worker has loaded it).
Workers are replaced when a file in the handler's folder changes; queued jobs, and those sent
from then on, wait for the new ones. The key is kept in ${STATE_DIR}/ (git-ignored) and the
ports are fixed, so the printed curl and an open dashboard tab keep working across restarts;
the tab reconnects by itself.
Each job is logged as it runs. Endpoints created through the harness's management API
(runlet deploy --base-url <url>) get worker processes for the same handler: a load-balancing
one (--type lb) is served at /lb/<its id>, by \`runlet start\` workers in lb mode. Stop with Ctrl-C.

Arguments:
  handler               the handler module
                        default: the first of ${DEFAULT_HANDLER_PATHS.join(", ")}

Options:
  --mode MODE           queue: a queue-based endpoint (/v2/${ENDPOINT_ID}/...);
                        lb: a load-balancing endpoint (/lb/${ENDPOINT_ID}/<any path>),
                        its workers \`runlet start --mode lb\` (docs/load-balancing.md)  default: queue
  -p, --port N          the port to serve on (0 picks a free one)          default: ${DEFAULT_PORT}
  --dashboard-port N    the dashboard's port (0 picks a free one)          default: --port + 1
                                                                           (a free one with --port 0)
  --api-key KEY         the API key to use                                 default: kept in ${STATE_DIR}/dev-api-key
  --workers N           worker processes                                   default: 1
  --allowed-hosts NAMES Host names answered besides IP addresses and localhost
                        (comma-separated, .example.com for a domain, "all" for any);
                        others get 403 (DNS rebinding)           default: $RUNLET_ALLOWED_HOSTS
  --cors ORIGINS        web pages allowed to call the /v2/ routes from a browser
                        (comma-separated origins such as http://localhost:5173, "*" for any);
                        the platform documents no CORS, so this is for development  default: none
  -h, --help            show this help

Exit codes: 0 stopped with Ctrl-C, 1 could not start (e.g. a port is taken), 2 bad usage.`;

/** test_input.json when the folder has a valid one: the printed curl's body and the dashboard form's start. */
async function sampleBody(cwd: string): Promise<unknown> {
  try {
    return JSON.parse(await readFile(join(cwd, SAMPLE_FILE), "utf8")) as unknown;
  } catch {
    // No (or no valid) test_input.json: the handler's input schema gives the example instead.
    return undefined;
  }
}

/** A stream that hands each whole line written to it to `onLine` (the sidecars' log lines). */
function lineWriter(onLine: (line: string) => void): NodeJS.WritableStream {
  let pending = "";
  return new Writable({
    write(chunk: Buffer | string, _encoding, done) {
      pending += chunk.toString();
      const lines = pending.split("\n");
      pending = lines.pop() ?? "";
      for (const line of lines) if (line !== "") onLine(line);
      done();
    },
  });
}

/** The file the printed curl reads its body from, when the body is too long to print (docs/cli.md). */
const SAMPLE_FILE = "test_input.json";

/** `ready in 412 ms (runlet 80 ms, fitness 2 ms, setup 300 ms)`: a worker's start-up phases. */
export function readyText(phases: Readonly<Record<string, number>>): string {
  const { total, ...each } = phases;
  const parts = Object.entries(each).map(([name, ms]) => `${name} ${Math.round(ms)} ms`);
  return `ready${total === undefined ? "" : ` in ${Math.round(total)} ms`}${parts.length === 0 ? "" : ` (${parts.join(", ")})`}`;
}

/** What `runlet dev` says of a worker that exited before it was ready; no other starts until an edit. */
export function startFailedText({ label, code, signal, loaded, unfit }: StartFailure): string {
  const how = signal ?? `code ${code}`;
  if (!loaded) {
    return (
      `runlet dev: worker ${label} did not start (${how}); its error is above. ` +
      "Save a fix in the handler's folder to try again; a missing environment variable needs " +
      "runlet dev restarted with it set (workers get runlet dev's environment)"
    );
  }
  const why = unfit === undefined ? "its error is above" : `it is unfit (${unfit.check}: ${unfit.reason})`;
  return (
    `runlet dev: worker ${label} stopped before it was ready (${how}): ${why}. ` +
    "Not starting another with the same code: save a change in the handler's folder to try again"
  );
}

/** A taken port, named: the API's or the dashboard's, and the flag that changes it. */
function portError(err: unknown, port: number, dashboardPort: number): unknown {
  const e = err as NodeJS.ErrnoException & { port?: number };
  if (e.code !== "EADDRINUSE") return err;
  const [what, flag, taken] =
    e.port === dashboardPort && dashboardPort !== 0
      ? ["the dashboard's port", "--dashboard-port", dashboardPort]
      : ["port", "--port", port];
  return new RunletError(
    "RUNLET_HARNESS_CONFIG",
    `${what} ${taken} is in use; pass ${flag} N (0 picks a free one)`,
    {
      cause: err,
    },
  );
}

/** `runlet dev`: the harness plus reloading worker processes for one handler. */
/**
 * `runlet dev`'s workers skip the network fitness check unless the shell sets
 * RUNPOD_NETWORK_CHECK_TARGET (docs/fitness.md): a local loop has no use for the platform's
 * check of the way out (8.8.8.8:53 by default), and offline or locked-down machines and CI fail
 * it or wait on it. The other checks run as on the platform; `runlet start` and a bundle keep
 * the platform's default.
 */
export function devNetworkCheck(env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  return env[FITNESS_ENV.networkCheckTarget] === undefined ? { [FITNESS_ENV.networkCheckTarget]: "off" } : {};
}

export const command: Command = {
  name: "dev",
  summary: "run the handler on a local copy of the platform, reloading on change",
  help: HELP,
  async run(argv) {
    const parsed = parseCommandArgs(command, argv, {
      port: { type: "string", short: "p" },
      "dashboard-port": { type: "string" },
      "api-key": { type: "string" },
      workers: { type: "string" },
      "allowed-hosts": { type: "string" },
      cors: { type: "string" },
      mode: { type: "string" },
    });
    if ("exitCode" in parsed) return parsed.exitCode;
    try {
      if (parsed.positionals.length > 1) throw usageError("expected at most one handler");
      const { port: portArg, workers: workersArg } = parsed.values;
      const port = integerFlag("port", portArg, DEFAULT_PORT, 0, 65_535);
      const dashboardPort = integerFlag(
        "dashboard-port",
        parsed.values["dashboard-port"],
        port === 0 || port === 65_535 ? 0 : port + 1,
        0,
        65_535,
      );
      const rawKey = parsed.values["api-key"];
      const keyArg = typeof rawKey === "string" ? rawKey : undefined;
      if (keyArg !== undefined && !isApiKey(keyArg)) throw usageError(`--api-key must be ${API_KEY_RULE}`);
      const workers = integerFlag("workers", workersArg, 1, 1, 64);
      const modeArg = parsed.values["mode"] ?? "queue";
      if (modeArg !== "queue" && modeArg !== "lb")
        throw usageError(`--mode must be queue or lb, got ${String(modeArg)}`);
      const lbMode = modeArg === "lb";
      const allowedHosts = allowedHostsFlag(parsed.values["allowed-hosts"]);
      const corsOrigins = corsFlag(parsed.values["cors"]);
      const cwd = process.cwd();
      const handlerPath = await resolveHandlerPath(parsed.positionals[0], cwd);
      const apiKey = keyArg ?? (await projectApiKey(cwd));
      const out = (line: string) => process.stdout.write(`${line}\n`);
      // Loaded only now, so --help and usage errors answer without loading the harness.
      const { startHarness } = await import("../../harness/index.js");

      const sample = await sampleBody(cwd);
      await using harness = await startHarness({
        port,
        apiKey,
        endpoints: [{ id: ENDPOINT_ID }],
        ...(lbMode ? { loadBalancers: [{ id: ENDPOINT_ID }] } : {}),
        ...(allowedHosts === undefined ? {} : { allowedHosts }),
        ...(corsOrigins === undefined ? {} : { corsOrigins }),
        // Endpoints deployed to this harness (POST /v2/serverless) run the same handler.
        managementSpawn: (env, report) => deployed.spawn(env, report),
        // The live page; its request form starts from test_input.json, else the handler's schema.
        dashboard: { port: dashboardPort, ...(sample === undefined ? {} : { sampleRequest: sample }) },
      }).catch((err: unknown) => {
        throw portError(err, port, dashboardPort);
      });
      const endpoint = lbMode ? `${harness.url}/lb/${ENDPOINT_ID}` : `${harness.url}/v2/${ENDPOINT_ID}`;
      const balancer = lbMode ? harness.loadBalancer(ENDPOINT_ID) : undefined;
      /** A load-balancing worker's port, by label, until its routes line says it serves (then it is added). */
      const lbUrls = new Map<string, string>();
      out(`runlet dev: serving ${relative(cwd, handlerPath) || handlerPath}`);
      out(`  endpoint  ${endpoint}`);
      out(`  api key   ${harness.apiKey}${keyArg === undefined ? `  (kept in ${STATE_DIR}/)` : ""}`);
      out(`  dashboard ${harness.dashboardUrl}#token=${encodeURIComponent(harness.apiKey)}`);

      const jobs = followJobs(harness, out);
      // How to call the handler, printed once a worker has described it (again if a reload changes its kind).
      let shown = "";
      const described = (endpointId: string, info: HandlerInfo) => {
        harness.describeEndpoint(endpointId, info);
        const kind = info.openai ? "openai" : info.streaming ? "streaming" : "plain";
        if (endpointId !== ENDPOINT_ID || kind === shown) return;
        shown = kind;
        const facts = {
          endpoint,
          apiKey: harness.apiKey,
          sample,
          info,
          mode: lbMode ? ("lb" as const) : ("queue" as const),
        };
        for (const line of tryLines(sample === undefined ? facts : { ...facts, sampleFile: SAMPLE_FILE }))
          out(line);
      };
      const onWorkerLine = (endpointId: string, label: string, line: string) => {
        const record = parseLogLine(line);
        // Workers of endpoints deployed to this harness join their own endpoints (the harness's fleet).
        if (balancer !== undefined && record !== undefined && endpointId === ENDPOINT_ID) {
          // A load-balancing worker: its port once bound, then it joins the endpoint once it serves.
          const port = (record as { port?: unknown }).port;
          const routes = (record as { routes?: unknown }).routes;
          if (typeof port === "number") lbUrls.set(label, `http://127.0.0.1:${port}`);
          const url = lbUrls.get(label);
          if (Array.isArray(routes) && url !== undefined) {
            const concurrency = (record as { concurrency?: unknown }).concurrency;
            balancer.addWorker({
              id: label,
              url,
              concurrency: typeof concurrency === "number" ? concurrency : 1,
            });
          }
        }
        const info = handlerReportOf(record);
        if (info !== undefined) return described(endpointId, info);
        // Start-up: one line when the worker is ready, setup's progress as it comes; the phases'
        // lines only feed the dashboard (a failure's reason has a line of its own).
        const update = startupUpdateOfRecord(record);
        if (update?.type === "ready") return out(`runlet dev: worker ${label} ${readyText(update.phases)}`);
        if (update?.type === "progress") return out(`[${label}] setup: ${update.text}`);
        if (update?.type === "phase") return;
        jobs.workerLine(`[${label}] `, line, record);
      };
      // The handler's sidecars live here, not in the workers: kept across edits (docs/models.md).
      const { createLogger } = await import("../../log/index.js");
      const { DEV_SIDECARS_ENV } = await import("../../sidecar/start-sidecars.js");
      await using sidecars = new DevSidecars({
        env: process.env,
        log: createLogger({
          platform: true,
          secrets: [harness.apiKey],
          destination: lineWriter((line) => onWorkerLine(ENDPOINT_ID, "sidecar", line)),
        }),
      });
      const deployed = new DevSpawner({
        handlerPath,
        env: { ...devNetworkCheck(), [DESCRIBE_ENV]: "1", [DEV_SIDECARS_ENV]: "ipc" },
        ipc: (child) => sidecars.attach(child),
        onLine: (label, line) => onWorkerLine(label.slice(0, label.lastIndexOf("/")), label, line),
        onRetire: (endpointId, podId) => harness.retireWorker(endpointId, podId),
      });
      await using pool = new WorkerPool({
        handlerPath,
        size: workers,
        // Platform mode (JSON lines) so each worker line can be rendered as one readable line.
        envFor: () => ({
          ...(lbMode
            ? { RUNLET_MODE: "lb", PORT: "0", RUNLET_LB_HOST: "127.0.0.1" }
            : harness.workerEnv(ENDPOINT_ID)),
          ...devNetworkCheck(),
          RUNPOD_ENDPOINT_ID: ENDPOINT_ID,
          [DESCRIBE_ENV]: "1",
          [DEV_SIDECARS_ENV]: "ipc",
        }),
        ipc: (child) => sidecars.attach(child),
        onLine: (label, line) => onWorkerLine(ENDPOINT_ID, label, line),
        // The harness shows each worker starting until it is ready, and never counts an exited one.
        onStartup: (_label, podId, update) => {
          if (!lbMode) harness.reportWorkerStartup(ENDPOINT_ID, podId, update);
        },
        // A worker being stopped gets no new job: one sent after a reload's line runs on the new code.
        onRetire: (label, podId) => {
          balancer?.removeWorker(label);
          harness.retireWorker(ENDPOINT_ID, podId);
        },
        onExit: (label, code, signal, delayMs) => {
          balancer?.removeWorker(label);
          lbUrls.delete(label);
          harness.workerRestarted(ENDPOINT_ID);
          const when = delayMs > 1_000 ? ` in ${Math.round(delayMs / 1_000)} s` : "";
          out(`runlet dev: worker ${label} exited (${signal ?? `code ${code}`}); starting another${when}`);
        },
        onStartFailed: (failure) => out(startFailedText(failure)),
      });
      pool.start();
      const watcher = watchFolder(dirname(handlerPath), (files) => {
        out(
          `runlet dev: ${files.slice(0, 3).join(", ")}${files.length > 3 ? ", …" : ""} changed; reloading workers`,
        );
        settle(Promise.all([pool.reload(), deployed.reload()]), (err) =>
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
