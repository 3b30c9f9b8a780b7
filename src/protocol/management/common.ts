import { z } from "zod";

/**
 * Field schemas shared by the v2 bodies, kept by hand from the platform's published v2 OpenAPI
 * document (openapi/runpod-v2.json; docs/management.md, "The published document"). Request objects
 * are strict: the document's request schemas set `unevaluatedProperties: false`, so an unknown
 * field is refused here before it is sent. test/management/contract.unit.test.ts checks every schema
 * here against the document.
 */

const PORT_PATTERN = /^(\d{1,5})\/(http|tcp)$/;

/** One `ports` entry: `<port_number>/<protocol>`, protocol `http` or `tcp`, port 1–65535. */
export const portSchema = z.string().refine(
  (value) => {
    const match = PORT_PATTERN.exec(value);
    if (match === null) return false;
    const port = Number(match[1]);
    return port >= 1 && port <= 65_535;
  },
  {
    error: (iss) =>
      `must be "<port>/http" or "<port>/tcp" with a port 1-65535, got ${JSON.stringify(iss.input)}`,
  },
);

/** `ports`: an array of {@link portSchema} entries. */
export const portsSchema = z.array(portSchema, { error: 'must be an array of strings like "8000/http"' });

/** `env`: an object whose values are strings (numbers and booleans must be quoted). */
export const envSchema = z.record(
  z.string(),
  z.string({
    error: (iss) => `env values must be strings, got ${iss.input === null ? "null" : typeof iss.input}`,
  }),
  { error: "must be an object of string values" },
);

/** A CUDA version as `major.minor` (`12.8`). */
export const cudaVersionSchema = z.string().regex(/^\d+\.\d+$/, {
  error: (iss) => `must be a CUDA version like "12.8", got ${JSON.stringify(iss.input)}`,
});

/**
 * The container settings every v2 container resource takes (the document's `ContainerConfig`):
 * `registry` is the id of a registry credential (`GET /v2/registries`), or null for none.
 */
export const containerFields = {
  args: z.string().optional(),
  disk: z.number().int().min(1, "disk must be an integer ≥ 1 (GB)").optional(),
  env: envSchema.optional(),
  image: z.string().optional(),
  ports: portsSchema.optional(),
  registry: z
    .string({ error: "registry must be a registry credential id string, or null" })
    .nullable()
    .optional(),
};

/** `gpu: {id, count}` of a pod — a GPU type id and how many. */
export const gpuSchema = z.looseObject({
  id: z.string({ error: "gpu.id must be a GPU type id string" }).min(1, "gpu.id must not be empty"),
  count: z.number().int().min(1, "gpu.count must be an integer ≥ 1").optional(),
});
export type GpuSpec = z.infer<typeof gpuSchema>;

/** `cpu` of a pod: a CPU flavour. Its fields beyond `id` and `count` are passed through. */
export const cpuSchema = z.looseObject({
  id: z.string().min(1).optional(),
  count: z.number().int().min(1).optional(),
});
export type CpuSpec = z.infer<typeof cpuSchema>;

/** One `mounts` entry of a pod (passed through). */
export const mountSchema = z.looseObject({});

/** `cloud` of a pod. @default "SECURE" */
export const cloudSchema = z.enum(["SECURE", "COMMUNITY"]);

/** Docker entrypoint or start command override (v1 templates). */
export const commandSchema = z.array(z.string());

/**
 * Adds the "exactly one of gpu or cpu" rule (`required: true`) or "not both" (`required: false`,
 * for updates) as an issue on `gpu`.
 */
export function checkGpuCpu(
  value: { gpu?: unknown; cpu?: unknown },
  ctx: {
    addIssue: (issue: { code: "custom"; message: string; path: PropertyKey[]; input?: unknown }) => void;
  },
  required: boolean,
): void {
  const hasGpu = value.gpu !== undefined;
  const hasCpu = value.cpu !== undefined;
  if (hasGpu && hasCpu) {
    ctx.addIssue({ code: "custom", message: "set exactly one of gpu or cpu, not both", path: ["gpu"] });
  } else if (required && !hasGpu && !hasCpu) {
    ctx.addIssue({
      code: "custom",
      message: "set exactly one of gpu or cpu; neither was given",
      path: ["gpu"],
    });
  }
}

/** Anything the platform answers that runlet does not type further. */
export type Json = unknown;

/** A resource answer: an object with an `id`, other fields passed through. */
export const resourceSchema = z.looseObject({ id: z.string() });
export type Resource = z.infer<typeof resourceSchema>;
