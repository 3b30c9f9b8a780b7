import { cpus, totalmem } from "node:os";

/** The machine a bench ran on, as `bench/results.json` records it. */
export interface Machine {
  readonly cpuModel: string;
  readonly cores: number;
  readonly totalMemoryBytes: number;
  readonly node: string;
  readonly platform: string;
  readonly arch: string;
  /** ISO 8601, when the run started. */
  readonly date: string;
}

/** Describes this machine. */
export function describeMachine(startedAt: Date = new Date()): Machine {
  const list = cpus();
  return {
    cpuModel: (list[0]?.model ?? "unknown").replace(/\s+/g, " ").trim(),
    cores: list.length,
    totalMemoryBytes: totalmem(),
    node: process.version,
    platform: process.platform,
    arch: process.arch,
    date: startedAt.toISOString(),
  };
}
