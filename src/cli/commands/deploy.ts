import { readFile } from "node:fs/promises";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { RunletError } from "../../errors.js";
import { isHandlerDefinition } from "../../handler/index.js";
import {
  createManagementClient,
  DEFAULT_MANAGEMENT_BASE_URL,
  type DeploySpec,
  deploy,
  planDeploy,
  stepRequest,
} from "../../management/index.js";
import { type Command, EXIT, integerFlag, parseCommandArgs, reportCliError, usageError } from "../command.js";
import { allowTypeScript } from "../typescript.js";

/** The platform's job API origin, for the printed curl (paths start with `/v2/<endpoint_id>`). */
const DEFAULT_QUEUE_URL = "https://api.runpod.ai";

const HELP = `Usage: runlet deploy [handler] --image IMAGE [options]

Creates or updates the template (v2 /templates) for IMAGE, then creates or PATCHes the
serverless endpoint that uses it, and prints the endpoint id and a curl for /runsync. An
existing template or endpoint is found by --template-id / --endpoint-id, else by --name.
Given a handler module, its executionTimeoutMs is sent with the endpoint and a fixed
concurrency above 1 becomes REQUEST_COUNT scaling at that many requests per worker.

Options:
  --image IMAGE            container image to run (required)
  --name NAME              template and endpoint name (default: the image's name, e.g. "echo")
  --gpu ID                 GPU type id; the endpoint gets gpu: {id, count}
  --gpu-count N            GPUs per worker (default 1)
  --cpu ID                 CPU flavour id instead of a GPU
  --workers-min N          workers always running (new endpoints default to 0)
  --workers-max N          most workers at once (new endpoints default to 3)
  --scaler TYPE            QUEUE_DELAY or REQUEST_COUNT
  --scaler-value N         seconds of queue delay, or requests per worker
  --execution-timeout-ms N the endpoint's execution timeout (default: the handler's)
  --disk GB                container disk size
  --env KEY=VALUE          environment variable of the workers; repeatable
  --registry ID            container registry auth id, for a private image
  --template-id ID         update this template instead of finding one by name
  --endpoint-id ID         PATCH this endpoint instead of finding one by name
  --api-key KEY            the API key (default: $RUNPOD_API_KEY)
  --base-url URL           management API origin (default ${DEFAULT_MANAGEMENT_BASE_URL}); point it at
                           a local harness to try a deploy
  --queue-url URL          job API origin for the printed curl (default: --base-url when given,
                           else ${DEFAULT_QUEUE_URL})
  --dry-run                print the requests (API key redacted) without sending any; with no
                           --template-id / --endpoint-id both are planned as creates
  --json                   print the result as one JSON object
  -h, --help               show this help

Exit codes: 0 deployed (or planned), 1 the API refused or failed, 2 bad usage.`;

function int(name: string, raw: unknown, min: number): number | undefined {
  return raw === undefined ? undefined : integerFlag(name, raw, min, min);
}

function str(raw: unknown): string | undefined {
  return typeof raw === "string" ? raw : undefined;
}

/** "me/echo:1.2" → "echo"; "registry:5000/team/app@sha256:…" → "app". */
export function nameFromImage(image: string): string {
  const last = image.split("/").pop() ?? image;
  return last.split("@")[0]!.split(":")[0]!;
}

/** Reads `executionTimeoutMs` and a fixed `concurrency` from a handler module's defineHandler default export. */
async function handlerDefaults(
  path: string,
): Promise<{ executionTimeoutMs: number; concurrency: number | undefined }> {
  let module: { default?: unknown };
  try {
    await allowTypeScript(path);
    module = (await import(pathToFileURL(resolve(path)).href)) as { default?: unknown };
  } catch (err) {
    throw new RunletError(
      "RUNLET_HANDLER_LOAD",
      `could not load ${path}: ${err instanceof Error ? err.message : String(err)}`,
      {
        cause: err,
      },
    );
  }
  if (!isHandlerDefinition(module.default)) {
    throw new RunletError("RUNLET_HANDLER_LOAD", `${path} has no \`export default defineHandler({...})\``);
  }
  const { executionTimeoutMs, concurrency } = module.default;
  return { executionTimeoutMs, concurrency: typeof concurrency === "number" ? concurrency : undefined };
}

/** The body of the printed curl: ./test_input.json when there is one, else an empty input. */
async function sampleInput(): Promise<string> {
  try {
    return JSON.stringify(JSON.parse(await readFile("test_input.json", "utf8")));
  } catch {
    // No (readable, valid) test_input.json: an empty input still shows the request's shape.
    return '{"input":{}}';
  }
}

/** Turns parsed flags into a deploy spec, refusing contradictions with a usage error. */
async function specOf(values: Record<string, unknown>, handlerPath: string | undefined): Promise<DeploySpec> {
  const image = str(values["image"]);
  if (image === undefined || image === "")
    throw usageError("--image is required (the container image to deploy)");
  const gpuId = str(values["gpu"]);
  const cpuId = str(values["cpu"]);
  if (gpuId !== undefined && cpuId !== undefined) throw usageError("give --gpu or --cpu, not both");
  const gpuCount = int("gpu-count", values["gpu-count"], 1);
  if (gpuCount !== undefined && gpuId === undefined) throw usageError("--gpu-count needs --gpu");
  const env: Record<string, string> = {};
  for (const pair of (values["env"] as string[] | undefined) ?? []) {
    const eq = pair.indexOf("=");
    if (eq <= 0) throw usageError(`--env expects KEY=VALUE, got ${JSON.stringify(pair)}`);
    env[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  const scaler = str(values["scaler"]);
  if (scaler !== undefined && scaler !== "QUEUE_DELAY" && scaler !== "REQUEST_COUNT") {
    throw usageError(`--scaler must be QUEUE_DELAY or REQUEST_COUNT, got ${JSON.stringify(scaler)}`);
  }
  const defaults = handlerPath === undefined ? undefined : await handlerDefaults(handlerPath);
  const scalerValue = int("scaler-value", values["scaler-value"], 1);
  let scaling: DeploySpec["scaling"];
  if (scaler !== undefined || scalerValue !== undefined) {
    scaling = {
      ...(scaler === undefined ? {} : { type: scaler }),
      ...(scalerValue === undefined ? {} : { value: scalerValue }),
    };
  } else if (defaults?.concurrency !== undefined && defaults.concurrency > 1) {
    // A worker takes `concurrency` jobs at once: scale by requests per worker to match.
    scaling = { type: "REQUEST_COUNT", value: defaults.concurrency };
  }
  const min = int("workers-min", values["workers-min"], 0);
  const max = int("workers-max", values["workers-max"], 0);
  const executionTimeoutMs =
    int("execution-timeout-ms", values["execution-timeout-ms"], 1) ?? defaults?.executionTimeoutMs;
  const diskGb = int("disk", values["disk"], 1);
  const spec: Record<string, unknown> = {
    name: str(values["name"]) ?? nameFromImage(image),
    image,
    templateId: str(values["template-id"]),
    endpointId: str(values["endpoint-id"]),
    diskGb,
    env: Object.keys(env).length > 0 ? env : undefined,
    registryId: str(values["registry"]),
    gpu: gpuId === undefined ? undefined : { id: gpuId, count: gpuCount ?? 1 },
    cpu: cpuId === undefined ? undefined : { id: cpuId },
    workers:
      min === undefined && max === undefined
        ? undefined
        : Object.fromEntries(Object.entries({ min, max }).filter(([, v]) => v !== undefined)),
    scaling,
    executionTimeoutMs,
  };
  return Object.fromEntries(Object.entries(spec).filter(([, v]) => v !== undefined)) as unknown as DeploySpec;
}

/** `runlet deploy`: creates or updates a template and a serverless endpoint through the v2 management API. */
export const command: Command = {
  name: "deploy",
  summary: "create or update the template and serverless endpoint for an image",
  help: HELP,
  async run(argv) {
    const parsed = parseCommandArgs(command, argv, {
      image: { type: "string" },
      name: { type: "string" },
      gpu: { type: "string" },
      "gpu-count": { type: "string" },
      cpu: { type: "string" },
      "workers-min": { type: "string" },
      "workers-max": { type: "string" },
      scaler: { type: "string" },
      "scaler-value": { type: "string" },
      "execution-timeout-ms": { type: "string" },
      disk: { type: "string" },
      env: { type: "string", multiple: true },
      registry: { type: "string" },
      "template-id": { type: "string" },
      "endpoint-id": { type: "string" },
      "api-key": { type: "string" },
      "base-url": { type: "string" },
      "queue-url": { type: "string" },
      "dry-run": { type: "boolean" },
      json: { type: "boolean" },
    });
    if ("exitCode" in parsed) return parsed.exitCode;
    const { values, positionals } = parsed;
    try {
      if (positionals.length > 1) throw usageError("expected at most one handler");
      const spec = await specOf(values, positionals[0]);
      const dryRun = values["dry-run"] === true;
      const apiKey = str(values["api-key"]) ?? process.env["RUNPOD_API_KEY"];
      if (!dryRun && (apiKey === undefined || apiKey === "")) {
        throw usageError("no API key: set RUNPOD_API_KEY or pass --api-key");
      }
      const baseUrl = str(values["base-url"]);
      const client = createManagementClient({
        // A dry run sends nothing, and describe() redacts the key anyway.
        apiKey: apiKey === undefined || apiKey === "" ? "dry-run" : apiKey,
        ...(baseUrl === undefined ? {} : { baseUrl }),
      });
      if (dryRun) return printDryRun(client, spec, values["json"] === true);
      const result = await deploy(client, spec);
      const queueUrl = (
        str(values["queue-url"]) ?? (baseUrl === undefined ? DEFAULT_QUEUE_URL : new URL(baseUrl).origin)
      ).replace(/\/+$/, "");
      const runsyncUrl = `${queueUrl}/v2/${encodeURIComponent(result.endpoint.id)}/runsync`;
      const curl = `curl -X POST '${runsyncUrl}' -H "Authorization: Bearer $RUNPOD_API_KEY" -H 'Content-Type: application/json' -d '${await sampleInput()}'`;
      if (values["json"] === true) {
        process.stdout.write(
          `${JSON.stringify({
            templateId: result.template.id,
            templateAction: result.template.action,
            endpointId: result.endpoint.id,
            endpointAction: result.endpoint.action,
            runsyncUrl,
            curl,
          })}\n`,
        );
      } else {
        process.stdout.write(
          `template ${result.template.id} ${result.template.action}d (${spec.image})\n` +
            `endpoint ${result.endpoint.id} ${result.endpoint.action}d (${spec.name})\n\n` +
            `endpoint id: ${result.endpoint.id}\n\nTry it:\n  ${curl}\n`,
        );
      }
      return EXIT.ok;
    } catch (err) {
      // Client-side validation failures come from the flags: report them as bad usage (exit 2).
      if (err instanceof RunletError && err.code === "RUNLET_MANAGEMENT_INVALID") {
        const hint = err.details?.["field"] === "gpu" ? " (pass --gpu ID or --cpu ID)" : "";
        return reportCliError(
          command.name,
          new RunletError("RUNLET_CLI_USAGE", `${err.message}${hint}`, { cause: err }),
        );
      }
      return reportCliError(command.name, err);
    }
  },
};

function printDryRun(
  client: ReturnType<typeof createManagementClient>,
  spec: DeploySpec,
  json: boolean,
): number {
  const steps = planDeploy(spec, { templateId: spec.templateId, endpointId: spec.endpointId });
  const requests = steps.map((step) => client.describe(stepRequest(step)));
  if (json) {
    process.stdout.write(
      `${JSON.stringify({ dryRun: true, requests: requests.map((r) => ({ ...r, body: r.body === undefined ? undefined : JSON.parse(r.body) })) })}\n`,
    );
    return EXIT.ok;
  }
  const text = requests
    .map((r) => {
      const headers = Object.entries(r.headers).map(([k, v]) => `${k}: ${v}`);
      return [
        `${r.method} ${r.url}`,
        ...headers,
        "",
        r.body === undefined ? "" : JSON.stringify(JSON.parse(r.body), null, 2),
      ].join("\n");
    })
    .join("\n\n");
  process.stdout.write(`# dry run: nothing was sent\n\n${text}\n`);
  return EXIT.ok;
}
