import type { BenchResults, CompareResults } from "./results.js";
import type { Figure } from "./stats.js";

function fmt(value: number): string {
  return Number.isFinite(value) ? value.toLocaleString("en-US", { maximumFractionDigits: 2 }) : "n/a";
}

/** A number at `path` in an unknown result, if there is one. */
function numberAt(value: unknown, ...path: string[]): number | undefined {
  let at = value;
  for (const key of path)
    at = typeof at === "object" && at !== null ? (at as Record<string, unknown>)[key] : undefined;
  return typeof at === "number" ? at : undefined;
}

/** One run's runlet phase: its wall median, the CPU used by then, and when and under what load it ran. */
function runletPhaseLine(results: BenchResults): string | undefined {
  if (!results.coldStart.available) return undefined;
  const result = results.coldStart.result;
  const wall = numberAt(result, "phasesMsMedian", "runlet");
  if (wall === undefined) return undefined;
  const cpu = numberAt(result, "phasesCpuMsMedian", "runlet");
  const load = results.machine.loadAverage;
  return `${fmt(wall)} ms wall median${cpu === undefined ? "" : `, ${fmt(cpu)} ms CPU used by then`} (${results.machine.date}${
    load === undefined ? "" : `, load average ${load.map(fmt).join(" / ")} on ${results.machine.cores} cores`
  })`;
}

/**
 * runlet's own start-up phase against its target, this run and the run before (`previous`, the
 * results file this run replaces), both as measured: nothing here is a figure written by hand.
 */
export function formatRunletPhase(results: BenchResults, previous?: BenchResults): string[] {
  const now = runletPhaseLine(results);
  if (now === undefined || !results.coldStart.available) return [];
  const target = numberAt(results.coldStart.result, "runletPhaseTargetMs");
  const wall = numberAt(results.coldStart.result, "phasesMsMedian", "runlet") ?? Number.NaN;
  const verdict = target === undefined ? "" : wall <= target ? " — target met" : " — target not met";
  const before = previous === undefined ? undefined : runletPhaseLine(previous);
  return [
    `runlet's own start-up phase (process start → ready to set up)${target === undefined ? "" : `, target ≤ ${fmt(target)} ms`}:`,
    `  this run:  ${now}${verdict}`,
    `  run before: ${before ?? "none recorded with start-up phases in the results file this run replaces"}`,
  ];
}

/** Rows as aligned columns (the first left-aligned, the rest right-aligned), a rule under the header row. */
function aligned(rows: readonly string[][]): string[] {
  const widths = rows[0]!.map((_, col) => Math.max(...rows.map((r) => r[col]!.length)));
  const lines: string[] = [];
  for (const [i, row] of rows.entries()) {
    lines.push(
      row
        .map((cell, col) => (col === 0 ? cell.padEnd(widths[col]!) : cell.padStart(widths[col]!)))
        .join("  "),
    );
    if (i === 0) lines.push(widths.map((w) => "-".repeat(w)).join("  "));
  }
  return lines;
}

/** The results as a plain-text table, figures in run order; `previous`: the results file this run replaces. */
export function formatTable(results: BenchResults, previous?: BenchResults): string {
  const m = results.machine;
  const lines = [
    `runlet bench (${results.mode}) — ${m.date}`,
    `${m.cpuModel}, ${m.cores} cores, ${(m.totalMemoryBytes / 1_073_741_824).toFixed(1)} GiB, Node ${m.node} on ${m.platform}/${m.arch}`,
    "",
  ];
  // `--only compare`: the comparison alone.
  if (results.figures.length === 0 && results.compare !== undefined)
    return [...lines, ...formatCompare(results.compare)].join("\n");
  const rows: string[][] = [["figure", "median", "min", "max", "unit", "runs"]];
  const add = (f: Figure) =>
    rows.push([f.label, fmt(f.median), fmt(f.min), fmt(f.max), f.unit, String(f.runs.length)]);
  results.figures.forEach(add);
  lines.push(...aligned(rows));
  const notes = results.figures.filter((f) => f.note !== undefined).map((f) => `${f.label}: ${f.note}`);
  if (notes.length > 0) lines.push("", ...notes);
  const cold = results.coldStart;
  lines.push("");
  if (cold.available) {
    lines.push(`cold start (bench/cold-start.ts, ${cold.export}):`);
    // Arrays of runs print as one line (count, min–max) rather than one line per run.
    const groups = new Map<string, number[]>();
    for (const leaf of cold.leaves) {
      const key = leaf.path.replace(/\.\d+$/, "[]");
      groups.set(key, [...(groups.get(key) ?? []), leaf.value]);
    }
    for (const [path, values] of groups) {
      lines.push(
        path.endsWith("[]")
          ? `  ${path.slice(0, -2)} = ${values.length} runs, ${fmt(Math.min(...values))} – ${fmt(Math.max(...values))}`
          : `  ${path} = ${fmt(values[0]!)}`,
      );
    }
    lines.push("", ...formatRunletPhase(results, previous));
  } else lines.push(`cold start (bench/cold-start.ts): not run — ${cold.reason}`);
  if (results.compare !== undefined) lines.push("", ...formatCompare(results.compare));
  return lines.join("\n");
}

/** A side's figure as `median [min–max] unit`. */
function cell(f: Figure): string {
  return `${fmt(f.median)} [${fmt(f.min)}–${fmt(f.max)}] ${f.unit}`;
}

/** The change of `after`'s median from `before`'s, in per cent. */
function change(before: number, after: number): string {
  if (!Number.isFinite(before) || !Number.isFinite(after) || before === 0) return "n/a";
  const pct = ((after - before) / Math.abs(before)) * 100;
  return `${pct > 0 ? "+" : ""}${pct.toFixed(0)} %`;
}

/** `--before`'s comparison: figure | before | this checkout | change, medians with [min–max]. */
export function formatCompare(compare: CompareResults): string[] {
  const o = compare.options;
  const lines = [
    `before and after in one run (--before ${compare.before.name}): ${o.rounds} round${o.rounds === 1 ? "" : "s"}, the two workers alternating A B, B A on one harness per section`,
    `  before:        ${compare.before.commit ?? `${compare.before.name} (not a git tree)`}`,
    `  this checkout: ${compare.after.commit ?? compare.after.name}`,
    "",
  ];
  const rows: string[][] = [
    ["figure", `before (${compare.before.name})`, `this checkout (${compare.after.name})`, "change", "runs"],
  ];
  for (const f of compare.figures) {
    rows.push([
      f.label,
      cell(f.before),
      cell(f.after),
      change(f.before.median, f.after.median),
      `${f.before.runs.length}+${f.after.runs.length}`,
    ]);
  }
  return [...lines, ...aligned(rows)];
}
