import { describe, expect, it } from "vitest";
import type { BenchResults } from "../../bench/results.js";
import { formatRunletPhase, formatTable } from "../../bench/table.js";

/** A results file holding only a cold start with runlet's phase at `runletMs` (and its CPU). */
function resultsWith(runletMs: number, cpuMs: number | undefined, date: string): BenchResults {
  const result = {
    phasesMsMedian: { runlet: runletMs, total: runletMs + 5 },
    ...(cpuMs === undefined ? {} : { phasesCpuMsMedian: { runlet: cpuMs, total: cpuMs + 5 } }),
    runletPhaseTargetMs: 100,
  };
  return {
    schema: 1,
    mode: "full",
    machine: {
      cpuModel: "test",
      cores: 2,
      totalMemoryBytes: 1,
      node: "v20",
      platform: "linux",
      arch: "x64",
      date,
      loadAverage: [3.5, 2, 1],
    },
    options: {} as BenchResults["options"],
    figures: [],
    memoryWithinBound: true,
    coldStart: { available: true, export: "measureColdStart", result, leaves: [] },
    durationMs: 1,
  };
}

describe("the bench's line on runlet's own start-up phase", () => {
  it("prints this run and the run before as measured, each against the target", () => {
    const now = resultsWith(123.4, 150.2, "2026-11-25T22:00:00.000Z");
    const before = resultsWith(98.7, undefined, "2026-11-24T10:00:00.000Z");
    const lines = formatRunletPhase(now, before);
    expect(lines[0]).toContain("target ≤ 100 ms");
    expect(lines[1]).toBe(
      "  this run:  123.4 ms wall median, 150.2 ms CPU used by then (2026-11-25T22:00:00.000Z, load average 3.5 / 2 / 1 on 2 cores) — target not met",
    );
    expect(lines[2]).toBe(
      "  run before: 98.7 ms wall median (2026-11-24T10:00:00.000Z, load average 3.5 / 2 / 1 on 2 cores)",
    );
    // The table carries the same lines.
    expect(formatTable(now, before)).toContain(lines[1]);
  });

  it("says when there is no run before, and meets the target at or under it", () => {
    const lines = formatRunletPhase(resultsWith(99.9, undefined, "2026-11-25T22:00:00.000Z"));
    expect(lines[1]).toMatch(/99\.9 ms wall median .* — target met$/);
    expect(lines[2]).toContain("none recorded");
  });
});
