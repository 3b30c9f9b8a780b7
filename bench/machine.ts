import { cpus, loadavg, totalmem } from "node:os";

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
  /**
   * The load average (1, 5 and 15 minutes) when the run started: on a machine shared with other
   * work the wall-clock figures grow with it. Absent in results written before it was recorded.
   */
  readonly loadAverage?: readonly number[];
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
    loadAverage: loadavg().map((l) => Math.round(l * 100) / 100),
  };
}
