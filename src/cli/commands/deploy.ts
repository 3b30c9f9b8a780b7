import { readFile } from "node:fs/promises";
import { RunletError } from "../../errors.js";
import {
  createManagementClient,
  DEFAULT_MANAGEMENT_BASE_URL,
  type DeploySpec,
  deploy,
  type ManagementClient,
  planDeploy,
  stepRequest,
  waitForRollout,
} from "../../management/index.js";
import { type Command, EXIT, integerFlag, parseCommandArgs, reportCliError, usageError } from "../command.js";
import { DEFAULT_LB_PORT, type GpuRequest, imageWarning, resolveGpuTypes, specOf } from "./deploy-spec.js";

export { nameFromImage } from "./deploy-spec.js";

const HELP = `Usage: runlet deploy [handler] --image IMAGE (--gpu POOL|TYPE | --cpu FLAVOUR:VCPUS) [options]

Creates or updates a serverless template (v2 /templates) for IMAGE, then creates or PATCHes the
serverless endpoint that uses it, as the platform's published v2 API document describes, and
prints the endpoint id and its request URLs. An existing template or endpoint is found by
--template-id / --endpoint-id, else by --name. Given a handler module, its executionTimeoutMs is
sent as the endpoint's timeout (the API's own default is 300000 ms), and a fixed concurrency above
1 becomes request-count scaling at that many requests per worker.

Options:
  --image IMAGE            container image to run (required); an untagged or :latest one is warned about
  --name NAME              template and endpoint name (default: the image's name, e.g. "echo")
  --type queue|lb          queue: jobs through /run and /runsync; lb: requests straight to the worker's
                           HTTP server (scales on request-count) (default queue)
  --port N                 with --type lb: the port the worker serves on, set as env PORT and in
                           ports as N/http (default ${DEFAULT_LB_PORT})
  --gpu ID[,ID]            serverless GPU pool ids (ADA_24, AMPERE_80), or GPU type ids ("NVIDIA L4"),
                           which are resolved through GET /v2/catalog/gpus into their pool plus
                           gpu.excludedTypes for the pool's other types (the output says which)
  --gpu-count N            GPUs per worker (the API's default is 1)
  --cuda V[,V]             exact CUDA versions a worker's host may have, e.g. 12.8,12.6
  --min-cuda V             lowest CUDA version instead, e.g. 12.1
  --cpu ID:VCPUS[,...]     CPU configurations instead of a GPU, e.g. cpu5c:4,cpu5g:8
  --workers-min N          workers always running (new endpoints default to 0)
  --workers-max N          most workers at once (new endpoints default to 3)
  --idle-timeout S         seconds an idle worker stays before it scales down (1-3600)
  --scaler TYPE            queue-delay or request-count (lb endpoints: request-count only)
  --scaler-value N         seconds of queue delay (≥ 0.5, default 4), or requests per worker
                           (default: the handler's concurrency, else 1)
  --execution-timeout-ms N the endpoint's timeout per request (default: the handler's)
  --flashboot              turn FlashBoot on (the API's default is off)
  --network-volume ID      attach a network volume (repeatable); the warm cache and cached models
                           need one
  --data-center ID         place workers in this data center (repeatable; default: any)
  --disk GB                container disk size
  --env KEY=VALUE          environment variable of the workers; repeatable
  --registry ID            container registry credential id (GET /v2/registries), for a private image
  --template-id ID         update this template instead of finding one by name
  --endpoint-id ID         PATCH this endpoint instead of finding one by name
  --wait                   after deploying, poll GET /v2/serverless/{id}/releases until every worker
                           runs the new release
  --wait-timeout-ms N      longest --wait (default 600000)
  --api-key KEY            the API key (default: $RUNPOD_API_KEY)
  --base-url URL           management API origin (default ${DEFAULT_MANAGEMENT_BASE_URL}); point it at
                           a local harness to try a deploy
  --dry-run                print the requests (API key redacted) without sending any; with no
                           --template-id / --endpoint-id both are planned as creates. A GPU type
                           id still reads the catalog (GET only).
  --json                   print the result as one JSON object
  -h, --help               show this help

Templates go out with serverless: true and startSsh / startJupyter false (the API turns both on
when they are left out).

Exit codes: 0 deployed (or planned), 1 the API refused or failed, 2 bad usage.`;

/** The body of the printed curl: ./test_input.json when there is one, else an empty input. */
async function sampleInput(): Promise<string> {
  try {
    return JSON.stringify(JSON.parse(await readFile("test_input.json", "utf8")));
  } catch {
    // No (readable, valid) test_input.json: an empty input still shows the request's shape.
    return '{"input":{}}';
  }
}

/** Fills the spec's GPU pools from the catalog when `--gpu` named GPU types; says what it resolved on stderr. */
async function withGpuResolved(
  client: ManagementClient,
  spec: DeploySpec,
  gpu: GpuRequest | undefined,
  canCall: boolean,
): Promise<{ spec: DeploySpec; note: string | undefined }> {
  if (gpu === undefined || spec.gpu === undefined || gpu.types.length === 0) return { spec, note: undefined };
  if (!canCall)
    throw usageError(
      `--gpu ${gpu.types.join(",")} is a GPU type, resolved through the catalog: set RUNPOD_API_KEY (or --api-key), or give a pool id such as ADA_24`,
    );
  const resolved = resolveGpuTypes(gpu, await client.catalog.gpus({ query: { product: "SERVERLESS" } }));
  return {
    spec: {
      ...spec,
      gpu: {
        ...spec.gpu,
        pools: resolved.pools,
        ...(resolved.excludedTypes.length > 0 ? { excludedTypes: resolved.excludedTypes } : {}),
      },
    },
    note: resolved.note,
  };
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
      type: { type: "string" },
      port: { type: "string" },
      gpu: { type: "string", multiple: true },
      "gpu-count": { type: "string" },
      cuda: { type: "string", multiple: true },
      "min-cuda": { type: "string" },
      cpu: { type: "string", multiple: true },
      "workers-min": { type: "string" },
      "workers-max": { type: "string" },
      "idle-timeout": { type: "string" },
      scaler: { type: "string" },
      "scaler-value": { type: "string" },
      "execution-timeout-ms": { type: "string" },
      flashboot: { type: "boolean" },
      "network-volume": { type: "string", multiple: true },
      "data-center": { type: "string", multiple: true },
      disk: { type: "string" },
      env: { type: "string", multiple: true },
      registry: { type: "string" },
      "template-id": { type: "string" },
      "endpoint-id": { type: "string" },
      wait: { type: "boolean" },
      "wait-timeout-ms": { type: "string" },
      "api-key": { type: "string" },
      "base-url": { type: "string" },
      "dry-run": { type: "boolean" },
      json: { type: "boolean" },
    });
    if ("exitCode" in parsed) return parsed.exitCode;
    const { values, positionals } = parsed;
    const json = values["json"] === true;
    try {
      if (positionals.length > 1) throw usageError("expected at most one handler");
      const planned = await specOf(values, positionals[0]);
      const dryRun = values["dry-run"] === true;
      const waitTimeoutMs = integerFlag("wait-timeout-ms", values["wait-timeout-ms"], 600_000, 1);
      const rawKey =
        typeof values["api-key"] === "string" ? values["api-key"] : process.env["RUNPOD_API_KEY"];
      const apiKey = rawKey === undefined || rawKey === "" ? undefined : rawKey;
      if (!dryRun && apiKey === undefined)
        throw usageError("no API key: set RUNPOD_API_KEY or pass --api-key");
      const baseUrl = typeof values["base-url"] === "string" ? values["base-url"] : undefined;
      const client = createManagementClient({
        // A dry run sends nothing but catalog reads, and describe() redacts the key anyway.
        apiKey: apiKey ?? "dry-run",
        ...(baseUrl === undefined ? {} : { baseUrl }),
      });
      const { spec, note } = await withGpuResolved(client, planned.spec, planned.gpu, apiKey !== undefined);
      const warning = imageWarning(spec.image);
      if (warning !== undefined) process.stderr.write(`runlet deploy: warning: ${warning}\n`);
      if (note !== undefined) process.stderr.write(`runlet deploy: ${note}\n`);
      if (dryRun) return printDryRun(client, spec, json);
      const result = await deploy(client, spec);
      const urls = (result.endpoint.record.requestUrls ?? {}) as Record<string, string>;
      // The queue's /runsync, or a load-balancing endpoint's: a runlet worker in that mode serves
      // POST /runsync with the same body (docs/load-balancing.md, "Requests").
      const runSync = urls["runSync"] ?? (urls["base"] === undefined ? undefined : `${urls["base"]}/runsync`);
      const curl =
        runSync === undefined
          ? undefined
          : `curl -X POST '${runSync}' -H "Authorization: Bearer $RUNPOD_API_KEY" -H 'Content-Type: application/json' -d '${await sampleInput()}'`;
      let rollout: { workersOnLatest: number; workersTotal: number } | undefined;
      if (values["wait"] === true) {
        const done = await waitForRollout(client, result.endpoint.id, {
          timeoutMs: waitTimeoutMs,
          intervalMs: 2_000,
          onProgress: (r) => {
            if (!json)
              process.stderr.write(
                `runlet deploy: release ${r.endpointVersion ?? "?"}: ${r.rollout.workersOnLatest} of ${r.rollout.workersTotal} workers run it\n`,
              );
          },
        });
        rollout = { workersOnLatest: done.rollout.workersOnLatest, workersTotal: done.rollout.workersTotal };
      }
      if (json) {
        process.stdout.write(
          `${JSON.stringify({
            templateId: result.template.id,
            templateAction: result.template.action,
            endpointId: result.endpoint.id,
            endpointAction: result.endpoint.action,
            type: result.endpoint.record.type,
            requestUrls: urls,
            ...(curl === undefined ? {} : { curl }),
            ...(rollout === undefined ? {} : { rollout }),
            ...(warning === undefined ? {} : { warnings: [warning] }),
          })}\n`,
        );
      } else {
        const urlLines = Object.entries(urls).map(([k, v]) => `  ${k.padEnd(10)} ${v}`);
        process.stdout.write(
          `template ${result.template.id} ${result.template.action}d (${spec.image})\n` +
            `endpoint ${result.endpoint.id} ${result.endpoint.action}d (${spec.name})\n\n` +
            `endpoint id: ${result.endpoint.id}\n` +
            (urlLines.length > 0 ? `\nRequest URLs:\n${urlLines.join("\n")}\n` : "") +
            (rollout === undefined
              ? ""
              : `\nrollout done: ${rollout.workersOnLatest} of ${rollout.workersTotal} workers run the new release\n`) +
            (curl === undefined ? "" : `\nTry it:\n  ${curl}\n`),
        );
      }
      return EXIT.ok;
    } catch (err) {
      // Client-side validation failures come from the flags: report them as bad usage (exit 2).
      if (err instanceof RunletError && err.code === "RUNLET_MANAGEMENT_INVALID") {
        const hint = err.details?.["field"] === "gpu" ? " (pass --gpu POOL or --cpu FLAVOUR:VCPUS)" : "";
        return reportCliError(
          command.name,
          new RunletError("RUNLET_CLI_USAGE", `${err.message}${hint}`, { cause: err }),
        );
      }
      return reportCliError(command.name, err);
    }
  },
};

function printDryRun(client: ManagementClient, spec: DeploySpec, json: boolean): number {
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
