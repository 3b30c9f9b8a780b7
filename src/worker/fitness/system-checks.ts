import { readFile, statfs } from "node:fs/promises";
import { connect } from "node:net";
import { freemem, totalmem } from "node:os";
import { join } from "node:path";
import { type CheckOutcome, type FitnessCheck, FitnessFailure, gb } from "./check.js";
import type { FitnessConfig, NetworkTarget } from "./fitness-config.js";

/**
 * The system checks every worker runs (docs/fitness.md): memory, disk, network. Their figures and
 * thresholds follow the platform's Python SDK; memory also honours the container's cgroup limit,
 * which the SDK's reading of the host's /proc/meminfo misses.
 */

/** Where the memory check reads; tests point it at files of their own. */
export interface MemorySources {
  /** @default "/proc/meminfo" */
  readonly meminfo: string;
  /** The cgroup filesystem's mount. @default "/sys/fs/cgroup" */
  readonly cgroupRoot: string;
}

/** What the memory check found. */
export interface MemoryReading {
  /** What the worker can still use: the smaller of the machine's and the cgroup's. */
  readonly availableBytes: number;
  /** The machine's memory, or the cgroup limit when smaller. */
  readonly totalBytes: number;
  /** The container's memory limit, when it has one. */
  readonly limitBytes: number | undefined;
}

const DEFAULT_SOURCES: MemorySources = { meminfo: "/proc/meminfo", cgroupRoot: "/sys/fs/cgroup" };
/** cgroup v1 writes a huge page-aligned number for "no limit". */
const NO_LIMIT = 2 ** 60;

async function readText(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, "utf8");
  } catch {
    // Absent on this kernel or cgroup version: the caller tries the next source.
    return undefined;
  }
}

/** A `key value` table (memory.stat) or `Key: value kB` table (/proc/meminfo). */
function table(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    const m = /^(\w+):?\s+(\d+)(\s*kB)?/.exec(line.trim());
    if (m !== null) out.set(m[1] ?? "", Number(m[2]) * (m[3] === undefined ? 1 : 1024));
  }
  return out;
}

/** The cgroup's limit and what it can still hand out (usage less reclaimable page cache), v2 then v1. */
async function cgroupMemory(root: string): Promise<{ limit: number; available: number } | undefined> {
  const layouts = [
    { max: "memory.max", current: "memory.current", stat: "memory.stat", inactive: "inactive_file" },
    {
      max: "memory/memory.limit_in_bytes",
      current: "memory/memory.usage_in_bytes",
      stat: "memory/memory.stat",
      inactive: "total_inactive_file",
    },
  ];
  for (const layout of layouts) {
    const max = (await readText(join(root, layout.max)))?.trim();
    if (max === undefined) continue;
    const limit = Number(max);
    if (max === "max" || !Number.isFinite(limit) || limit >= NO_LIMIT) return undefined;
    const current = Number((await readText(join(root, layout.current)))?.trim() ?? Number.NaN);
    const inactive = table((await readText(join(root, layout.stat))) ?? "").get(layout.inactive) ?? 0;
    const used = Number.isFinite(current) ? Math.max(0, current - inactive) : 0;
    return { limit, available: Math.max(0, limit - used) };
  }
  return undefined;
}

/** Reads the memory the worker can use: MemAvailable (else os.freemem), capped by the cgroup limit. */
export async function readMemory(sources: MemorySources = DEFAULT_SOURCES): Promise<MemoryReading> {
  const info = table((await readText(sources.meminfo)) ?? "");
  const hostAvailable = info.get("MemAvailable") ?? freemem();
  const hostTotal = info.get("MemTotal") ?? totalmem();
  const cgroup = await cgroupMemory(sources.cgroupRoot);
  if (cgroup === undefined)
    return { availableBytes: hostAvailable, totalBytes: hostTotal, limitBytes: undefined };
  return {
    availableBytes: Math.min(hostAvailable, cgroup.available),
    totalBytes: Math.min(hostTotal, cgroup.limit),
    limitBytes: cgroup.limit,
  };
}

/** Memory: at least RUNPOD_MIN_MEMORY_GB available. */
export function memoryCheck(config: FitnessConfig, sources: MemorySources = DEFAULT_SOURCES): FitnessCheck {
  return {
    name: "memory",
    async run(): Promise<CheckOutcome> {
      const m = await readMemory(sources);
      const limit = m.limitBytes === undefined ? "" : ", container limit";
      const fields = {
        availableBytes: m.availableBytes,
        totalBytes: m.totalBytes,
        minBytes: config.minMemoryBytes,
      };
      if (m.availableBytes < config.minMemoryBytes) {
        throw new FitnessFailure(
          `${gb(m.availableBytes)} available (of ${gb(m.totalBytes)}${limit}), ${config.minMemoryGb} GB required (RUNPOD_MIN_MEMORY_GB)`,
        );
      }
      return {
        status: "passed",
        figure: `${gb(m.availableBytes)} available (of ${gb(m.totalBytes)}${limit}; needs ${config.minMemoryGb} GB)`,
        fields,
      };
    },
  };
}

/** Disk: at least RUNPOD_MIN_DISK_PERCENT of `path`'s filesystem free (to an unprivileged writer). */
export function diskCheck(config: FitnessConfig, path = "/"): FitnessCheck {
  return {
    name: "disk",
    async run(): Promise<CheckOutcome> {
      let s: Awaited<ReturnType<typeof statfs>>;
      try {
        s = await statfs(path);
      } catch (err) {
        throw new FitnessFailure(`could not read the free space of ${path}: ${(err as Error).message}`, {
          cause: err,
        });
      }
      const total = s.blocks * s.bsize;
      const free = s.bavail * s.bsize;
      const percent = total > 0 ? (100 * free) / total : 0;
      const fields = { freeBytes: free, totalBytes: total, freePercent: Number(percent.toFixed(1)) };
      if (percent < config.minDiskPercent) {
        throw new FitnessFailure(
          `${gb(free)} free on ${path} (${percent.toFixed(1)} %), ${config.minDiskPercent} % required (RUNPOD_MIN_DISK_PERCENT)`,
        );
      }
      return {
        status: "passed",
        figure: `${gb(free)} free on ${path} (${percent.toFixed(1)} % of ${gb(total)}; needs ${config.minDiskPercent} %)`,
        fields,
      };
    },
  };
}

/** Opens a TCP connection to `target` and closes it; resolves with the connect time in ms. */
function connectOnce(target: NetworkTarget, timeoutMs: number, signal: AbortSignal): Promise<number> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const socket = connect({ host: target.host, port: target.port, signal });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no connection to ${target.host}:${target.port} within ${timeoutMs} ms`));
    }, timeoutMs);
    socket.once("connect", () => {
      clearTimeout(timer);
      socket.destroy();
      resolve(Math.round(performance.now() - started));
    });
    socket.once("error", (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      socket.destroy();
      const why = err.code === "ECONNREFUSED" ? "connection refused" : (err.code ?? err.message);
      reject(new Error(`${target.host}:${target.port}: ${why}`));
    });
  });
}

/** Network: one of RUNPOD_NETWORK_CHECK_TARGET accepts a TCP connection within RUNPOD_NETWORK_CHECK_TIMEOUT. */
export function networkCheck(config: FitnessConfig): FitnessCheck {
  return {
    name: "network",
    async run(signal): Promise<CheckOutcome> {
      const targets = config.networkTargets;
      if (targets.length === 0) return { status: "skipped", figure: "RUNPOD_NETWORK_CHECK_TARGET=off" };
      const tries = targets.map((t) =>
        connectOnce(t, config.networkTimeoutMs, signal).then((ms) => ({ t, ms })),
      );
      try {
        const { t, ms } = await Promise.any(tries);
        return { status: "passed", figure: `connected to ${t.host}:${t.port} in ${ms} ms`, fields: { ms } };
      } catch (err) {
        const reasons = (err as AggregateError).errors.map((e: Error) => e.message).join("; ");
        throw new FitnessFailure(
          `no target answered (RUNPOD_NETWORK_CHECK_TARGET, RUNPOD_NETWORK_CHECK_TIMEOUT=${config.networkTimeoutMs / 1000} s): ${reasons}`,
        );
      }
    },
  };
}
