import { z } from "zod";
import { containerFields, cudaVersionSchema } from "./common.js";

/**
 * v2 serverless endpoint bodies, kept by hand from the published v2 document
 * (openapi/runpod-v2.json: `CreateEndpointRequest`, `UpdateEndpointRequest`, `Endpoint`) and
 * checked against it by test/management/contract.unit.test.ts. Request objects are strict, as the
 * document's `unevaluatedProperties: false` makes them.
 */

/** `type`: how requests reach the workers — through the managed queue, or straight to their HTTP server. */
export const endpointTypeSchema = z.enum(["QUEUE", "LOAD_BALANCER"], {
  error: (iss) => `type must be QUEUE or LOAD_BALANCER, got ${JSON.stringify(iss.input)}`,
});
export type EndpointType = z.infer<typeof endpointTypeSchema>;

/** `flashboot`: cold-start acceleration. @default "OFF" (the document's) */
export const flashbootSchema = z.enum(["OFF", "FLASHBOOT", "PRIORITY_FLASHBOOT"], {
  error: (iss) => `flashboot must be OFF, FLASHBOOT or PRIORITY_FLASHBOOT, got ${JSON.stringify(iss.input)}`,
});
export type Flashboot = z.infer<typeof flashbootSchema>;

/** `workers: {min, max, idleTimeout}` — counts, and seconds before an idle worker scales down (1–3600). */
export const workersSchema = z
  .strictObject({
    min: z.number().int().min(0, "workers.min must be an integer ≥ 0").optional(),
    max: z.number().int().min(0, "workers.max must be an integer ≥ 0").optional(),
    idleTimeout: z
      .number()
      .int()
      .min(1, "workers.idleTimeout must be 1-3600 seconds")
      .max(3600, "workers.idleTimeout must be 1-3600 seconds")
      .optional(),
  })
  .refine((w) => w.min === undefined || w.max === undefined || w.min <= w.max, {
    error: "workers.min must be ≤ workers.max",
    path: ["max"],
  });

/** `scaling` on queue wait: add workers when jobs wait longer than `queueDelay` seconds (≥ 0.5). Queue endpoints only. */
export const queueDelayScalingSchema = z.strictObject({
  type: z.literal("QUEUE_DELAY"),
  queueDelay: z.number().min(0.5, "scaling.queueDelay must be ≥ 0.5 (seconds)"),
});

/** `scaling` on in-flight requests: `requestCount` per worker (integer ≥ 1). Required for load-balancing endpoints. */
export const requestCountScalingSchema = z.strictObject({
  type: z.literal("REQUEST_COUNT"),
  requestCount: z.number().int().min(1, "scaling.requestCount must be an integer ≥ 1"),
});

/** `scaling`: `{type: "QUEUE_DELAY", queueDelay}` or `{type: "REQUEST_COUNT", requestCount}`. */
export const scalingSchema = z.discriminatedUnion(
  "type",
  [queueDelayScalingSchema, requestCountScalingSchema],
  {
    error: 'scaling must be {type: "QUEUE_DELAY", queueDelay} or {type: "REQUEST_COUNT", requestCount}',
  },
);
export type Scaling = z.infer<typeof scalingSchema>;

/** GPU type ids to leave out of the pools: each must start with something other than `-` or a space. */
const excludedTypesSchema = z
  .array(z.string().regex(/^\s*[^-\s]/, { error: "gpu.excludedTypes entries must be GPU type ids" }))
  .refine((list) => new Set(list).size === list.length, { error: "gpu.excludedTypes has a duplicate" });

const gpuFields = {
  excludedTypes: excludedTypesSchema.optional(),
  count: z.number().int().min(1, "gpu.count must be an integer ≥ 1").optional(),
  allowedCudaVersions: z.array(cudaVersionSchema).optional(),
};

/** A non-empty `allowedCudaVersions` beside a `minCudaVersion` is refused (the document: 400). */
function checkCuda(
  gpu: { allowedCudaVersions?: readonly string[] | undefined; minCudaVersion?: string | undefined },
  ctx: z.core.$RefinementCtx,
): void {
  if (
    (gpu.allowedCudaVersions?.length ?? 0) > 0 &&
    gpu.minCudaVersion !== undefined &&
    gpu.minCudaVersion !== ""
  )
    ctx.addIssue({
      code: "custom",
      message: "give allowedCudaVersions or minCudaVersion, not both",
      path: ["minCudaVersion"],
    });
}

/**
 * `gpu` of a new endpoint: serverless pool ids (`pool` of `GET /v2/catalog/gpus`, e.g. `ADA_24`),
 * GPU type ids to subtract from them, GPUs per worker, and a CUDA constraint (an exact set or a floor).
 */
export const endpointGpuCreateSchema = z
  .strictObject({
    pools: z
      .array(z.string(), { error: "gpu.pools is required: serverless GPU pool ids such as ADA_24" })
      .min(1, "gpu.pools must list at least one pool"),
    ...gpuFields,
    minCudaVersion: cudaVersionSchema.optional(),
  })
  .superRefine(checkCuda);
export type EndpointGpuCreate = z.input<typeof endpointGpuCreateSchema>;

/** `gpu` of an update: every field optional; `excludedTypes` needs `pools`; `minCudaVersion: ""` clears the floor. */
export const endpointGpuUpdateSchema = z
  .strictObject({
    pools: z.array(z.string()).min(1, "gpu.pools must list at least one pool").optional(),
    ...gpuFields,
    minCudaVersion: z
      .string()
      .regex(/^$|^\d+\.\d+$/, { error: 'gpu.minCudaVersion must be like "12.1", or "" to clear it' })
      .optional(),
  })
  .superRefine((gpu, ctx) => {
    checkCuda(gpu, ctx);
    if (gpu.excludedTypes !== undefined && gpu.pools === undefined)
      ctx.addIssue({ code: "custom", message: "gpu.excludedTypes needs gpu.pools", path: ["excludedTypes"] });
  });

/** One CPU configuration of a worker: a flavour id (`GET /v2/catalog/cpus`) and its vCPU count (≥ 2). */
export const endpointCpuSchema = z.strictObject({
  id: z.string({ error: "cpu[].id is required (a CPU flavour such as cpu5c)" }).min(1),
  vcpuCount: z
    .number({ error: "cpu[].vcpuCount is required (vCPUs per worker, ≥ 2)" })
    .int()
    .min(2, "cpu[].vcpuCount must be an integer ≥ 2"),
});
export type EndpointCpu = z.infer<typeof endpointCpuSchema>;

/** `cpu`: the eligible configurations, no two the same. */
export const endpointCpuListSchema = z
  .array(endpointCpuSchema, { error: "cpu must be an array of {id, vcpuCount}" })
  .min(1, "cpu must list at least one configuration")
  .refine((list) => new Set(list.map((c) => `${c.id}:${c.vcpuCount}`)).size === list.length, {
    error: "cpu lists the same configuration twice",
  });

const endpointFields = {
  ...containerFields,
  cpu: endpointCpuListSchema.optional(),
  dataCenterIds: z.array(z.string()).optional(),
  flashboot: flashbootSchema.optional(),
  networkVolumes: z.array(z.string()).optional(),
  scaling: scalingSchema.optional(),
  /** Per-request execution timeout, ms. @default 300000 (the document's) */
  timeout: z.number().int().optional(),
  workers: workersSchema.optional(),
};

/** `idleTimeout` does not apply to a queue endpoint scaling on request count (the document refuses it). */
function checkIdleTimeout(
  value: {
    type?: string | undefined;
    scaling?: { type: string } | undefined;
    workers?: { idleTimeout?: number | undefined } | undefined;
  },
  ctx: z.core.$RefinementCtx,
): void {
  if (
    value.type === "QUEUE" &&
    value.scaling?.type === "REQUEST_COUNT" &&
    value.workers?.idleTimeout !== undefined
  )
    ctx.addIssue({
      code: "custom",
      message: "workers.idleTimeout does not apply to a queue endpoint scaling on REQUEST_COUNT",
      path: ["workers", "idleTimeout"],
    });
}

/**
 * `POST /v2/serverless` (`CreateEndpointRequest`): `name`, `type` and `scaling` required; `image`
 * unless `templateId`; exactly one of `gpu` or `cpu`; a LOAD_BALANCER endpoint scales on REQUEST_COUNT.
 */
export const serverlessCreateSchema = z
  .strictObject({
    ...endpointFields,
    name: z.string({ error: "name is required" }).min(1, "name must not be empty"),
    type: endpointTypeSchema,
    scaling: scalingSchema,
    gpu: endpointGpuCreateSchema.optional(),
    templateId: z.string().min(1, "templateId must not be empty").optional(),
  })
  .superRefine((value, ctx) => {
    if (value.templateId === undefined && value.image === undefined)
      ctx.addIssue({
        code: "custom",
        message: "image is required when no templateId is given",
        path: ["image"],
      });
    if (value.gpu !== undefined && value.cpu !== undefined)
      ctx.addIssue({ code: "custom", message: "set exactly one of gpu or cpu, not both", path: ["gpu"] });
    else if (value.gpu === undefined && value.cpu === undefined)
      ctx.addIssue({
        code: "custom",
        message: "set exactly one of gpu or cpu; neither was given",
        path: ["gpu"],
      });
    if (value.type === "LOAD_BALANCER" && value.scaling.type !== "REQUEST_COUNT")
      ctx.addIssue({
        code: "custom",
        message: "a LOAD_BALANCER endpoint must scale on REQUEST_COUNT",
        path: ["scaling", "type"],
      });
    checkIdleTimeout(value, ctx);
  });
export type ServerlessCreateInput = z.input<typeof serverlessCreateSchema>;

/** `PATCH /v2/serverless/{id}` (`UpdateEndpointRequest`): any subset; never both `gpu` and `cpu`; `type` cannot change. */
export const serverlessUpdateSchema = z
  .strictObject({
    ...endpointFields,
    name: z.string().min(1, "name must not be empty").optional(),
    gpu: endpointGpuUpdateSchema.optional(),
    templateId: z.string().optional(),
  })
  .superRefine((value, ctx) => {
    if (value.gpu !== undefined && value.cpu !== undefined)
      ctx.addIssue({ code: "custom", message: "set exactly one of gpu or cpu, not both", path: ["gpu"] });
  });
export type ServerlessUpdateInput = z.input<typeof serverlessUpdateSchema>;

/** `requestUrls` of a queue endpoint: the job API's URLs for it. */
export const queueRequestUrlsSchema = z.looseObject({
  run: z.string(),
  runSync: z.string(),
  status: z.string(),
  stream: z.string(),
  cancel: z.string(),
  retry: z.string(),
  purgeQueue: z.string(),
  health: z.string(),
});

/** `requestUrls` of a load-balancing endpoint: the base of its worker-defined paths, and its health path. */
export const loadBalancerRequestUrlsSchema = z.looseObject({ base: z.string(), health: z.string() });

/** A serverless endpoint as v2 answers it (`Endpoint`); fields past `id` and `name` are typed when present. */
export const endpointSchema = z.looseObject({
  id: z.string(),
  name: z.string(),
  type: z.string().optional(),
  requestUrls: z.union([queueRequestUrlsSchema, loadBalancerRequestUrlsSchema]).optional(),
  image: z.string().optional(),
  gpu: z.looseObject({ pools: z.array(z.string()).optional() }).nullish(),
  cpu: z.array(z.looseObject({ id: z.string(), vcpuCount: z.number().optional() })).optional(),
  workers: z.looseObject({ min: z.number().optional(), max: z.number().optional() }).optional(),
  scaling: z.looseObject({ type: z.string() }).optional(),
  timeout: z.number().optional(),
  flashboot: z.string().optional(),
  createdAt: z.string().optional(),
});
export type Endpoint = z.infer<typeof endpointSchema>;

/** One worker of `GET /v2/serverless/{id}/workers` (`Worker`). */
export const endpointWorkerSchema = z.looseObject({
  id: z.string(),
  status: z.string(),
  version: z.number().nullish(),
});

/** `GET /v2/serverless/{id}/workers` (`ListEndpointWorkersResponse`). */
export const endpointWorkersSchema = z.looseObject({
  workers: z.array(endpointWorkerSchema),
  summary: z.looseObject({ total: z.number() }),
  endpointVersion: z.number().nullish(),
});
export type EndpointWorkers = z.infer<typeof endpointWorkersSchema>;

/** `GET /v2/serverless/{id}/releases` (`ListEndpointReleasesResponse`): the history, newest first, and the rollout. */
export const endpointReleasesSchema = z.looseObject({
  endpointVersion: z.number().nullish(),
  rollout: z.looseObject({
    inProgress: z.boolean(),
    workersOnLatest: z.number(),
    workersTotal: z.number(),
    percentOnLatest: z.number(),
  }),
  releases: z.array(
    z.looseObject({ id: z.string(), version: z.number().nullish(), workerCount: z.number() }),
  ),
});
export type EndpointReleases = z.infer<typeof endpointReleasesSchema>;
