import { z } from "zod";

/**
 * Field schemas shared by the v2 bodies (docs/protocol.md, "Management API" and "Templates"). Objects are `looseObject`:
 * the spec names only some fields, and the rest must reach the platform untouched.
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

/** `gpu: {id, count}` — a GPU type id and how many per pod or worker. */
export const gpuSchema = z.looseObject({
  id: z.string({ error: "gpu.id must be a GPU type id string" }).min(1, "gpu.id must not be empty"),
  count: z.number().int().min(1, "gpu.count must be an integer ≥ 1").optional(),
});
export type GpuSpec = z.infer<typeof gpuSchema>;

/** `cpu`: a CPU flavour. The spec names no fields inside it; `id` and `count` are typed when present. */
export const cpuSchema = z.looseObject({
  id: z.string().min(1).optional(),
  count: z.number().int().min(1).optional(),
});
export type CpuSpec = z.infer<typeof cpuSchema>;

/** One `mounts` entry (fields not shown in the spec: passed through). */
export const mountSchema = z.looseObject({});

/** `cloud` of a pod. @default "SECURE" */
export const cloudSchema = z.enum(["SECURE", "COMMUNITY"]);

/** Docker entrypoint or start command override. */
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
