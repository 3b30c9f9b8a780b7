import { RunletError } from "../errors.js";
import type { CpuSpec, GpuSpec } from "../protocol/management/common.js";
import type {
  Endpoint,
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
 * Deploying an image as a serverless endpoint through the v2 API: create or update the
 * template, then create or PATCH the endpoint that uses it. Existing ones are found by id when
 * given, else by name; `runlet deploy` is a thin CLI over this.
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
  /** Container disk, in GB. */
  readonly diskGb?: number;
  readonly env?: Readonly<Record<string, string>>;
  /** Container registry auth id, for a private image. */
  readonly registryId?: string;
  readonly gpu?: GpuSpec;
  readonly cpu?: CpuSpec;
  /** Worker counts; on create, missing ones default to {@link DEPLOY_DEFAULT_WORKERS}. */
  readonly workers?: { readonly min?: number; readonly max?: number };
  readonly scaling?: { readonly type?: "QUEUE_DELAY" | "REQUEST_COUNT"; readonly value?: number };
  /** The endpoint's execution timeout, in ms (sent as `executionTimeoutMs`, a field passed through). */
  readonly executionTimeoutMs?: number;
}

/** Worker counts of a new endpoint when the spec gives none. */
export const DEPLOY_DEFAULT_WORKERS = Object.freeze({ min: 0, max: 3 });

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

/**
 * Plans the two steps for `spec`, given the ids of the template and endpoint that already exist
 * (from the spec or a lookup). Bodies are validated here, so a dry run refuses what a real run would.
 */
export function planDeploy(
  spec: DeploySpec,
  existing: { readonly templateId?: string | undefined; readonly endpointId?: string | undefined },
): [TemplateStep, EndpointStep] {
  const templateFields = defined({
    image: spec.image,
    disk: spec.diskGb,
    env: spec.env,
    registry: spec.registryId === undefined ? undefined : { id: spec.registryId },
  });
  const template: TemplateStep =
    existing.templateId === undefined
      ? {
          kind: "template",
          action: "create",
          body: validateBody(
            templateCreateSchema,
            { name: spec.name, isServerless: true, ...templateFields },
            "template",
          ),
        }
      : {
          kind: "template",
          action: "update",
          id: existing.templateId,
          body: validateBody(templateUpdateSchema, templateFields, "template update"),
        };
  const templateId = existing.templateId ?? TEMPLATE_ID_PLACEHOLDER;
  const endpointFields = defined({
    templateId,
    gpu: spec.gpu,
    cpu: spec.cpu,
    scaling: spec.scaling,
    executionTimeoutMs: spec.executionTimeoutMs,
  });
  if (existing.endpointId !== undefined) {
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
  if (spec.gpu === undefined && spec.cpu === undefined) {
    throw new RunletError(
      "RUNLET_MANAGEMENT_INVALID",
      "creating an endpoint needs a gpu ({id, count}) or a cpu",
      {
        details: { field: "gpu" },
      },
    );
  }
  const body = {
    name: spec.name,
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
): Promise<{ templateId: string | undefined; endpointId: string | undefined }> {
  const templateId =
    spec.templateId ?? (await client.templates.list(options)).find((t) => t.name === spec.name)?.id;
  const endpointId =
    spec.endpointId ?? (await client.serverless.list(options)).find((e) => e.name === spec.name)?.id;
  return { templateId, endpointId };
}

/**
 * Creates or updates the template, then creates or PATCHes the endpoint that uses it.
 *
 * @example
 * const result = await deploy(createManagementClient({ apiKey }), {
 *   name: "echo", image: "me/echo:1", gpu: { id: "NVIDIA RTX A4000", count: 1 }, workers: { max: 2 },
 * });
 * const endpointId = result.endpoint.id;
 */
export async function deploy(
  client: ManagementClient,
  spec: DeploySpec,
  options: CallOptions = {},
): Promise<DeployResult> {
  const existing = await findExisting(client, spec, options);
  const [templateStep, endpointStep] = planDeploy(spec, existing);
  const templateRecord =
    templateStep.action === "create"
      ? await client.templates.create(templateStep.body, options)
      : await client.templates.update(templateStep.id, templateStep.body, options);
  const endpointBody = { ...endpointStep.body, templateId: templateRecord.id };
  const endpointRecord =
    endpointStep.action === "create"
      ? await client.serverless.create(endpointBody, options)
      : await client.serverless.update(endpointStep.id, endpointBody, options);
  return {
    template: { id: templateRecord.id, action: templateStep.action, record: templateRecord },
    endpoint: { id: endpointRecord.id, action: endpointStep.action, record: endpointRecord },
  };
}
