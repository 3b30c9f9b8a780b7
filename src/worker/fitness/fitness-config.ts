import { z } from "zod";
import { RunletError } from "../../errors.js";
import { FITNESS_ENV } from "../../protocol/env.js";

/**
 * The fitness checks' settings (docs/fitness.md), read once from the worker's environment with the
 * platform's Python SDK's variable names and defaults, so one image behaves the same under either SDK.
 */

/** One `host:port` the network check connects to. */
export interface NetworkTarget {
  readonly host: string;
  readonly port: number;
}

/** What the built-in checks check, and how long they may take. */
export interface FitnessConfig {
  /** RUNPOD_SKIP_AUTO_SYSTEM_CHECKS=true: no memory, disk, network or CUDA version check. */
  readonly skipSystemChecks: boolean;
  /** RUNPOD_SKIP_GPU_CHECK=true: no GPU device check. */
  readonly skipGpuCheck: boolean;
  /** Least memory available to the worker, in bytes. @default 4 GB (4 × 1024³ bytes, as the Python SDK counts) */
  readonly minMemoryBytes: number;
  /** The same, as configured, in GB (for messages). @default 4 */
  readonly minMemoryGb: number;
  /** Least free share of `/`, in percent. @default 10 */
  readonly minDiskPercent: number;
  /** The network check's connect timeout, in ms. @default 5_000 */
  readonly networkTimeoutMs: number;
  /** Where the network check connects; any one answering passes; empty: no network check. @default 8.8.8.8:53 */
  readonly networkTargets: readonly NetworkTarget[];
  /** Oldest CUDA version the driver must support. @default [11, 8] */
  readonly minCudaVersion: readonly [number, number];
  /** Bound on each GPU probe, in ms. @default 30_000 */
  readonly gpuTestTimeoutMs: number;
  /** The Python SDK's benchmark bound, in ms (validated; runlet runs no benchmark: docs/fitness.md). @default 2_000 */
  readonly gpuBenchmarkTimeoutMs: number;
  /** A gpu_test-style binary for the allocation test. @default none (`gpu_test` on PATH when there is one) */
  readonly gpuTestBinary: string | undefined;
  /** The environment the GPU tools run with (the worker's own, so PATH and the NVIDIA_* variables hold). */
  readonly toolEnv: Readonly<Record<string, string | undefined>>;
}

/** The Python SDK's default network target: a public DNS server's TCP port. */
export const DEFAULT_NETWORK_TARGET = "8.8.8.8:53";

const E = FITNESS_ENV;
const GB = 1024 ** 3;

/** A number from the environment: blank is `fallback`, anything else must parse and lie in range. */
function numberVar(name: string, fallback: number, min: number, max = Number.MAX_SAFE_INTEGER) {
  return z
    .string()
    .optional()
    .transform((v, ctx) => {
      if (v === undefined || v.trim() === "") return fallback;
      const n = Number(v.trim());
      if (!Number.isFinite(n) || n < min || n > max) {
        ctx.addIssue({
          code: "custom",
          message: `${name} must be a number from ${min} to ${max === Number.MAX_SAFE_INTEGER ? "∞" : max}, got ${JSON.stringify(v)}`,
        });
        return z.NEVER;
      }
      return n;
    });
}

/** `true` (any case) is true, as the Python SDK reads its skip variables; anything else is false. */
const flagVar = z
  .string()
  .optional()
  .transform((v) => (v ?? "").trim().toLowerCase() === "true");

const versionVar = z
  .string()
  .optional()
  .transform((v, ctx): [number, number] => {
    const text = (v ?? "").trim() === "" ? "11.8" : (v ?? "").trim();
    const m = /^(\d+)\.(\d+)$/.exec(text);
    if (m === null) {
      ctx.addIssue({
        code: "custom",
        message: `${E.minCudaVersion} must be major.minor, like 12.1, got ${JSON.stringify(v)}`,
      });
      return z.NEVER;
    }
    return [Number(m[1]), Number(m[2])];
  });

const targetsVar = z
  .string()
  .optional()
  .transform((v, ctx): NetworkTarget[] => {
    const text = (v ?? "").trim() === "" ? DEFAULT_NETWORK_TARGET : (v ?? "").trim();
    if (text.toLowerCase() === "off") return [];
    const targets: NetworkTarget[] = [];
    for (const part of text.split(",")) {
      // host:port, with an IPv6 host in brackets ([::1]:53).
      const m = /^\s*(?:\[([0-9a-fA-F:.]+)\]|([^:\s[\]]+)):(\d{1,5})\s*$/.exec(part);
      const port = Number(m?.[3]);
      const host = m?.[1] ?? m?.[2];
      if (host === undefined || !(port >= 1 && port <= 65_535)) {
        ctx.addIssue({
          code: "custom",
          message: `${E.networkCheckTarget} must be host:port[,host:port…] (port 1–65535) or off, got ${JSON.stringify(part.trim())}`,
        });
        return z.NEVER;
      }
      targets.push({ host, port });
    }
    return targets;
  });

const schema = z.object({
  [E.minMemoryGb]: numberVar(E.minMemoryGb, 4, 0),
  [E.minDiskPercent]: numberVar(E.minDiskPercent, 10, 0, 100),
  [E.networkCheckTimeout]: numberVar(E.networkCheckTimeout, 5, 0.001, 3_600),
  [E.minCudaVersion]: versionVar,
  [E.gpuTestTimeout]: numberVar(E.gpuTestTimeout, 30, 0.001, 3_600),
  [E.gpuBenchmarkTimeout]: numberVar(E.gpuBenchmarkTimeout, 2, 0.001, 3_600),
  [E.skipAutoSystemChecks]: flagVar,
  [E.skipGpuCheck]: flagVar,
  [E.gpuTestBinary]: z
    .string()
    .optional()
    .transform((v) => (v === undefined || v.trim() === "" ? undefined : v.trim())),
  [E.networkCheckTarget]: targetsVar,
});

/** Reads the fitness variables from `env`; a bad value throws RUNLET_CONFIG_INVALID naming it, its range and what came. */
export function readFitnessConfig(env: Readonly<Record<string, string | undefined>>): FitnessConfig {
  const parsed = schema.safeParse(env, { jitless: true });
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => i.message);
    throw new RunletError("RUNLET_CONFIG_INVALID", `bad environment: ${problems.join("; ")}`, {
      details: { issues: problems },
    });
  }
  const e = parsed.data;
  const minMemoryGb = e[E.minMemoryGb];
  return Object.freeze({
    skipSystemChecks: e[E.skipAutoSystemChecks],
    skipGpuCheck: e[E.skipGpuCheck],
    minMemoryGb,
    minMemoryBytes: Math.round(minMemoryGb * GB),
    minDiskPercent: e[E.minDiskPercent],
    networkTimeoutMs: Math.round(e[E.networkCheckTimeout] * 1000),
    networkTargets: Object.freeze(e[E.networkCheckTarget]),
    minCudaVersion: Object.freeze(e[E.minCudaVersion]) as readonly [number, number],
    gpuTestTimeoutMs: Math.round(e[E.gpuTestTimeout] * 1000),
    gpuBenchmarkTimeoutMs: Math.round(e[E.gpuBenchmarkTimeout] * 1000),
    gpuTestBinary: e[E.gpuTestBinary],
    toolEnv: env,
  });
}
