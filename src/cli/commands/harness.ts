import { startHarness } from "../../harness/index.js";
import {
  allowedHostsFlag,
  type Command,
  EXIT,
  integerFlag,
  interrupted,
  parseCommandArgs,
  reportCliError,
  usageError,
} from "../command.js";

const HELP = `Usage: runlet harness [--endpoint ID]... [--port N] [--host H] [--api-key KEY] [--allowed-hosts NAMES]

Starts runlet's local copy of the platform alone, with no worker of its own, and prints what
any worker needs to connect to it: the API key and, per endpoint, the RUNPOD_WEBHOOK_*,
RUNPOD_AI_API_KEY and RUNPOD_POD_ID variables (as shell exports), and the link to a live
dashboard of the queues, workers and jobs (the link carries the API key). A runlet worker
(\`runlet start handler.ts\`) or a worker written with the platform's Python SDK started with
them takes jobs from it; connected workers show in /v2/<endpoint>/health. Stop with Ctrl-C.

Options:
  -e, --endpoint ID   an endpoint to serve (repeat for several)          default: local
  -p, --port N        the port (0 picks a free one)                     default: 0
  --host H            the address to bind                               default: 127.0.0.1
  --api-key KEY       the API key clients and workers use               default: a random key
  --allowed-hosts NAMES  Host names answered besides IP addresses, localhost and --host
                      (comma-separated, .example.com for a domain, "all" for any);
                      others get 403 (DNS rebinding)            default: $RUNLET_ALLOWED_HOSTS
  -h, --help          show this help

Exit codes: 0 stopped with Ctrl-C, 1 could not start (e.g. the port is taken), 2 bad usage.`;

/** Quotes `text` for a POSIX shell (the templates hold `$` placeholders the shell must not expand). */
function shellQuote(text: string): string {
  return `'${text.replaceAll("'", `'\\''`)}'`;
}

/** `runlet harness`: the local platform alone, for workers started elsewhere. */
export const command: Command = {
  name: "harness",
  summary: "run the local copy of the platform alone and print how workers connect to it",
  help: HELP,
  async run(argv) {
    const parsed = parseCommandArgs(command, argv, {
      endpoint: { type: "string", short: "e", multiple: true },
      port: { type: "string", short: "p" },
      host: { type: "string" },
      "api-key": { type: "string" },
      "allowed-hosts": { type: "string" },
    });
    if ("exitCode" in parsed) return parsed.exitCode;
    try {
      if (parsed.positionals.length > 0) throw usageError(`unexpected argument "${parsed.positionals[0]}"`);
      const { endpoint, port: portArg, host, "api-key": apiKey } = parsed.values;
      const ids = (Array.isArray(endpoint) ? endpoint : []).map(String);
      const port = integerFlag("port", portArg, 0, 0, 65_535);
      const allowedHosts = allowedHostsFlag(parsed.values["allowed-hosts"]);
      if (new Set(ids).size !== ids.length) throw usageError("an --endpoint is given twice");
      const harness = await startHarness({
        port,
        endpoints: (ids.length === 0 ? ["local"] : ids).map((id) => ({ id })),
        dashboard: true,
        ...(typeof host === "string" ? { host } : {}),
        ...(typeof apiKey === "string" ? { apiKey } : {}),
        ...(allowedHosts === undefined ? {} : { allowedHosts }),
      }).catch((err: unknown) => {
        if ((err as NodeJS.ErrnoException).code === "EADDRINUSE") {
          throw new Error(`port ${port} is in use; pass --port N (0 picks a free one)`);
        }
        throw err;
      });
      try {
        const out: string[] = [
          `runlet harness: listening on ${harness.url}`,
          `  api key  ${harness.apiKey}`,
          `  dashboard ${harness.dashboardUrl}#token=${encodeURIComponent(harness.apiKey)}`,
          "",
        ];
        for (const id of harness.endpointIds()) {
          out.push(`endpoint ${id}: ${harness.url}/v2/${id}`);
          out.push(
            `  try: curl -s -X POST ${harness.url}/v2/${id}/run -H ${shellQuote(`Authorization: Bearer ${harness.apiKey}`)}` +
              ` -H 'Content-Type: application/json' -d '{"input":{}}'`,
          );
          out.push("  a worker connects with:");
          // workerEnv() gives production's template shapes, which every worker reads as is.
          const env = harness.workerEnv(id, { podId: `${id}-worker-1` });
          for (const [name, value] of Object.entries(env))
            out.push(`    export ${name}=${shellQuote(value)}`);
          out.push("");
        }
        process.stdout.write(`${out.join("\n")}\n`);
        const signal = await interrupted();
        process.stdout.write(`runlet harness: ${signal}, stopping\n`);
        return EXIT.ok;
      } finally {
        await harness.close();
      }
    } catch (err) {
      return reportCliError("harness", err);
    }
  },
};
