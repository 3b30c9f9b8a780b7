import { RunletError } from "../errors.js";
import type {
  Endpoint,
  EndpointCpu,
  EndpointGpuCreate,
  EndpointType,
  Flashboot,
  Scaling,
  ServerlessCreateInput,
  ServerlessUpdateInput,
} from "../protocol/management/serverless.js";
import { serverlessCreateSchema, serverlessUpdateSchema } from "../protocol/management/serverless.js";
import type {
  TemplateCreateInput,
  TemplateUpdateInput,
  TemplateV2,
} from "../protocol/management/template.js";
import { templateCreateSchema, templateUpdateSchema } from "../protocol/management/template.js";
import type { CallOptions } from "./api/call.js";
import type { ManagementClient, RawRequest } from "./client.js";
import { validateBody } from "./validate.js";

/**
 * Deploying an image as a serverless endpoint through the v2 API (the published v2 document,
 * openapi/runpod-v2.json): create or update a serverless template, then create or PATCH the
 * endpoint that uses it. Existing ones are found by id when given, else by name; `runlet deploy`
 * is a thin CLI over this.
 */

/** What to deploy. Fields left out are not sent (on update, the platform keeps its values). */
export interface DeploySpec {
  /** Name of the template and of the endpoint; also how existing ones are found. */
  readonly name: string;
  /** The container image. */
  readonly image: string;
  /** Update this template instead of looking one up by name. */
  readonly templateId?: string;
  /** PATCH this endpoint instead of looking one up by name. */
  readonly endpointId?: string;
  /** How requests reach the workers. Cannot change once the endpoint exists. @default "QUEUE" */
  readonly type?: EndpointType;
  /** Container disk, in GB. */
  readonly diskGb?: number;
  readonly env?: Readonly<Record<string, string>>;
  /** Exposed ports (`"8080/http"`), on the template. */
  readonly ports?: readonly string[];
  /** Container registry credential id (`GET /v2/registries`), for a private image. */
  readonly registryId?: string;
  /** GPU pools and constraints; exactly one of `gpu` or `cpu` on create. */
  readonly gpu?: EndpointGpuCreate;
  /** CPU configurations (`[{id: "cpu5c", vcpuCount: 4}]`). */
  readonly cpu?: readonly EndpointCpu[];
  /** Worker counts and idle timeout (s); on create, missing counts default to {@link DEPLOY_DEFAULT_WORKERS}. */
  readonly workers?: { readonly min?: number; readonly max?: number; readonly idleTimeout?: number };
  /** The scaler; on create without one: {@link DEPLOY_DEFAULT_QUEUE_SCALING}, or REQUEST_COUNT 1 for LOAD_BALANCER. */
  readonly scaling?: Scaling;
  /** The endpoint's per-request execution timeout, ms, sent as `timeout` (the API's default is 300000). */
  readonly executionTimeoutMs?: number;
  /** Cold-start acceleration (the API's default is OFF). */
  readonly flashboot?: Flashboot;
  /** Network volume ids attached to every worker. */
  readonly networkVolumes?: readonly string[];
  /** Data centers to place workers in (none: the scheduler chooses). */
  readonly dataCenterIds?: readonly string[];
  /** Provision SSH in the workers (the API's default is true; a deploy's is false). @default false */
  readonly startSsh?: boolean;
  /** Start JupyterLab in the workers (the API's default is true; a deploy's is false). @default false */
  readonly startJupyter?: boolean;
}

/** Worker counts of a new endpoint when the spec gives none (the document's defaults). */
export const DEPLOY_DEFAULT_WORKERS = Object.freeze({ min: 0, max: 3 });

/** Scaling of a new queue endpoint when the spec gives none: add workers once jobs wait 4 s. */
export const DEPLOY_DEFAULT_QUEUE_SCALING = Object.freeze({ type: "QUEUE_DELAY", queueDelay: 4 } as const);

/** Stands for the template's id in a planned endpoint body before the template exists. */
export const TEMPLATE_ID_PLACEHOLDER = "<id of the template above>";

/** The template step of a deployment. */
export type TemplateStep =
  | { readonly kind: "template"; readonly action: "create"; readonly body: TemplateCreateInput }
  | {
      readonly kind: "template";
      readonly action: "update";
      readonly id: string;
      readonly body: TemplateUpdateInput;
    };

/** The endpoint step of a deployment. */
export type EndpointStep =
  | { readonly kind: "endpoint"; readonly action: "create"; readonly body: ServerlessCreateInput }
  | {
      readonly kind: "endpoint";
      readonly action: "update";
      readonly id: string;
      readonly body: ServerlessUpdateInput;
    };

/** One step of a deployment. */
export type DeployStep = TemplateStep | EndpointStep;

/** What a deployment did. */
export interface DeployResult {
  readonly template: {
    readonly id: string;
    readonly action: "create" | "update";
    readonly record: TemplateV2;
  };
  readonly endpoint: { readonly id: string; readonly action: "create" | "update"; readonly record: Endpoint };
}

function defined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}

function invalid(message: string, field: string): RunletError {
  return new RunletError("RUNLET_MANAGEMENT_INVALID", message, { details: { field } });
}

/** The scaling a spec asks for, checked against its type; on create, the default when none is given. */
function scalingOf(spec: DeploySpec, creating: boolean): Scaling | undefined {
  const type = spec.type ?? "QUEUE";
  if (spec.scaling !== undefined) {
    if (type === "LOAD_BALANCER" && spec.scaling.type !== "REQUEST_COUNT")
      throw invalid("a LOAD_BALANCER endpoint must scale on REQUEST_COUNT (requests per worker)", "scaling");
    return spec.scaling;
  }
  if (!creating) return undefined;
  return type === "LOAD_BALANCER" ? { type: "REQUEST_COUNT", requestCount: 1 } : DEPLOY_DEFAULT_QUEUE_SCALING;
}

/**
 * Plans the two steps for `spec`, given the ids of the template and endpoint that already exist
 * (from the spec or a lookup). Bodies are validated here, so a dry run refuses what a real run
 * would. The template is a serverless one with SSH and Jupyter off (the API turns both on by
 * default), `category` from the compute; the endpoint carries the execution timeout as `timeout`.
 */
export function planDeploy(
  spec: DeploySpec,
  existing: { readonly templateId?: string | undefined; readonly endpointId?: string | undefined },
): [TemplateStep, EndpointStep] {
  const creating = existing.endpointId === undefined;
  if (spec.gpu !== undefined && spec.cpu !== undefined) throw invalid("give a gpu or a cpu, not both", "gpu");
  if (creating && spec.gpu === undefined && spec.cpu === undefined)
    throw invalid("creating an endpoint needs a gpu (pools) or a cpu ([{id, vcpuCount}])", "gpu");
  const templateFields = defined({
    image: spec.image,
    disk: spec.diskGb,
    env: spec.env === undefined ? undefined : { ...spec.env },
    ports: spec.ports === undefined ? undefined : [...spec.ports],
    registry: spec.registryId,
    serverless: true,
    startSsh: spec.startSsh ?? false,
    startJupyter: spec.startJupyter ?? false,
    category: spec.cpu !== undefined ? "CPU" : spec.gpu !== undefined ? "NVIDIA" : undefined,
  } as const);
  const template: TemplateStep =
    existing.templateId === undefined
      ? {
          kind: "template",
          action: "create",
          body: validateBody(templateCreateSchema, { name: spec.name, ...templateFields }, "template"),
        }
      : {
          kind: "template",
          action: "update",
          id: existing.templateId,
          body: validateBody(templateUpdateSchema, templateFields, "template update"),
        };
  const endpointFields = defined({
    templateId: existing.templateId ?? TEMPLATE_ID_PLACEHOLDER,
    gpu: spec.gpu === undefined ? undefined : { ...spec.gpu },
    cpu: spec.cpu === undefined ? undefined : spec.cpu.map((c) => ({ ...c })),
    scaling: scalingOf(spec, creating),
    timeout: spec.executionTimeoutMs,
    flashboot: spec.flashboot,
    networkVolumes: spec.networkVolumes === undefined ? undefined : [...spec.networkVolumes],
    dataCenterIds: spec.dataCenterIds === undefined ? undefined : [...spec.dataCenterIds],
  });
  if (!creating) {
    const body = defined({ ...endpointFields, workers: spec.workers });
    return [
      template,
      {
        kind: "endpoint",
        action: "update",
        id: existing.endpointId,
        body: validateBody(serverlessUpdateSchema, body, "serverless endpoint update"),
      },
    ];
  }
  const body = {
    name: spec.name,
    type: spec.type ?? "QUEUE",
    ...endpointFields,
    workers: { ...DEPLOY_DEFAULT_WORKERS, ...defined(spec.workers ?? {}) },
  };
  return [
    template,
    {
      kind: "endpoint",
      action: "create",
      body: validateBody(serverlessCreateSchema, body, "serverless endpoint"),
    },
  ];
}

/** The raw request a step sends (for `client.describe` in dry runs). */
export function stepRequest(step: DeployStep): RawRequest {
  const base = step.kind === "template" ? "/templates" : "/serverless";
  return step.action === "create"
    ? { method: "POST", path: base, body: step.body }
    : { method: "PATCH", path: `${base}/${encodeURIComponent(step.id)}`, body: step.body };
}

/** Finds the ids of an existing template and endpoint: the spec's, else the caller's ones named `spec.name`. */
export async function findExisting(
  client: ManagementClient,
  spec: DeploySpec,
  options: CallOptions = {},
): Promise<{
  templateId: string | undefined;
  endpointId: string | undefined;
  endpointType: string | undefined;
}> {
  const templateId =
    spec.templateId ?? (await client.templates.list(options)).find((t) => t.name === spec.name)?.id;
  const endpoint =
    spec.endpointId !== undefined
      ? await client.serverless.get(spec.endpointId, options)
      : (await client.serverless.list(options)).find((e) => e.name === spec.name);
  return { templateId, endpointId: endpoint?.id, endpointType: endpoint?.type };
}

/**
 * Creates or updates the template, then creates or PATCHes the endpoint that uses it.
 *
 * @example
 * const result = await deploy(createManagementClient({ apiKey }), {
 *   name: "echo", image: "me/echo:1", gpu: { pools: ["ADA_24"] }, workers: { max: 2 },
 * });
 * const endpointId = result.endpoint.id;
 */
export async function deploy(
  client: ManagementClient,
  spec: DeploySpec,
  options: CallOptions = {},
): Promise<DeployResult> {
  const existing = await findExisting(client, spec, options);
  if (existing.endpointType !== undefined && existing.endpointType !== (spec.type ?? "QUEUE")) {
    throw invalid(
      `endpoint ${existing.endpointId} is a ${existing.endpointType} endpoint and its type cannot change; deploy under another name or delete it first`,
      "type",
    );
  }
  const [templateStep, endpointStep] = planDeploy(spec, existing);
  const templateRecord =
    templateStep.action === "create"
      ? await client.templates.create(templateStep.body, options)
      : await client.templates.update(templateStep.id, templateStep.body, options);
  const endpointRecord =
    endpointStep.action === "create"
      ? await client.serverless.create({ ...endpointStep.body, templateId: templateRecord.id }, options)
      : await client.serverless.update(
          endpointStep.id,
          { ...endpointStep.body, templateId: templateRecord.id },
          options,
        );
  return {
    template: { id: templateRecord.id, action: templateStep.action, record: templateRecord },
    endpoint: { id: endpointRecord.id, action: endpointStep.action, record: endpointRecord },
  };
}
