import type { BenchResults } from "./results.js";
import type { Figure } from "./stats.js";

function fmt(value: number): string {
  return Number.isFinite(value) ? value.toLocaleString("en-US", { maximumFractionDigits: 2 }) : "n/a";
}

/** The results as a plain-text table, figures in run order. */
export function formatTable(results: BenchResults): string {
  const m = results.machine;
  const lines = [
    `runlet bench (${results.mode}) — ${m.date}`,
    `${m.cpuModel}, ${m.cores} cores, ${(m.totalMemoryBytes / 1_073_741_824).toFixed(1)} GiB, Node ${m.node} on ${m.platform}/${m.arch}`,
    "",
  ];
  const rows: string[][] = [["figure", "median", "min", "max", "unit", "runs"]];
  const add = (f: Figure) =>
    rows.push([f.label, fmt(f.median), fmt(f.min), fmt(f.max), f.unit, String(f.runs.length)]);
  results.figures.forEach(add);
  const widths = rows[0]!.map((_, col) => Math.max(...rows.map((r) => r[col]!.length)));
  for (const [i, row] of rows.entries()) {
    lines.push(
      row
        .map((cell, col) => (col === 0 ? cell.padEnd(widths[col]!) : cell.padStart(widths[col]!)))
        .join("  "),
    );
    if (i === 0) lines.push(widths.map((w) => "-".repeat(w)).join("  "));
  }
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
  } else lines.push(`cold start (bench/cold-start.ts): not run — ${cold.reason}`);
  return lines.join("\n");
}
