import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { SRC } from "../support/import-walker.js";

/**
 * The worker's layers (docs/architecture.md, "Layers of src/worker"): every import inside
 * src/worker runs from a higher layer to a lower one (or stays in its own folder), and nothing in
 * src/telemetry imports src/worker at all (it listens to the event contract, src/worker-events.ts).
 * Every import counts here — type-only and dynamic ones too: a type import upward is still a
 * dependency that runs the wrong way.
 */

/** The layer of each place in src/worker, lowest first; a folder's files share its layer. */
const LAYERS: ReadonlyArray<readonly [string, number]> = [
  // Leaves: the contracts every layer reads.
  ["worker/facts.ts", 0],
  ["worker/events.ts", 0],
  ["worker/serve-options.ts", 0],
  ["worker/runner/", 1],
  ["worker/platform/", 2],
  ["worker/fitness/", 2],
  // The start-up budget's value and the load-balancing settings: read into the config.
  ["worker/startup-budget.ts", 2],
  ["worker/lb/lb-config.ts", 2],
  ["worker/config.ts", 3],
  ["worker/job/", 4],
  // The load-balancing arrival: requests become jobs on the job path (its parts are in lifecycle/).
  ["worker/lb/", 4.5],
  ["worker/lifecycle/", 5],
  ["worker/load-handler.ts", 6],
  ["worker/worker.ts", 6],
  ["worker/serve.ts", 7],
  ["worker/index.ts", 8],
];

/** The layer of a path under src/ (undefined outside src/worker, or a place not listed). */
function layerOf(path: string): { readonly place: string; readonly layer: number } | undefined {
  const found = LAYERS.find(([place]) => (place.endsWith("/") ? path.startsWith(place) : path === place));
  return found === undefined ? undefined : { place: found[0], layer: found[1] };
}

/** Every relative import of a source text: static, type-only, re-exports and dynamic `import()`. */
function specifiers(text: string): string[] {
  const found: string[] = [];
  for (const m of text.matchAll(/^\s*(?:import|export)\b[^;]*?\bfrom\s+["']([^"']+)["']/gm))
    found.push(m[1]!);
  for (const m of text.matchAll(/\bimport\(\s*["']([^"']+)["']\s*\)/g)) found.push(m[1]!);
  return found.filter((spec) => spec.startsWith("."));
}

/** One import edge, both ends relative to src/. */
interface Edge {
  readonly from: string;
  readonly to: string;
}

function edgesOf(from: string, text: string): Edge[] {
  return specifiers(text).map((spec) => ({
    from,
    to: relative(SRC, resolve(SRC, dirname(from), spec.replace(/\.js$/, ".ts"))),
  }));
}

/** The edges that break the rules, as `from → to (why)`. */
function violations(edges: readonly Edge[]): string[] {
  const found: string[] = [];
  for (const { from, to } of edges) {
    if (from.startsWith("telemetry/") && to.startsWith("worker/")) {
      found.push(`${from} → ${to} (telemetry imports the worker)`);
      continue;
    }
    if (!from.startsWith("worker/") || !to.startsWith("worker/")) continue;
    const a = layerOf(from);
    const b = layerOf(to);
    if (a === undefined || b === undefined) {
      found.push(`${from} → ${to} (a place with no layer: list it)`);
      continue;
    }
    if (a.place === b.place) continue;
    if (b.layer >= a.layer) found.push(`${from} → ${to} (layer ${a.layer} imports layer ${b.layer})`);
  }
  return found;
}

function sourceEdges(folder: string): Edge[] {
  return readdirSync(join(SRC, folder), { recursive: true, encoding: "utf8" })
    .filter((name) => name.endsWith(".ts"))
    .flatMap((name) => {
      const path = join(folder, name);
      return edgesOf(path, readFileSync(join(SRC, path), "utf8"));
    });
}

describe("the worker's layers", () => {
  it("has no import in src/worker that runs upward, and none from src/telemetry into src/worker", () => {
    const edges = [...sourceEdges("worker"), ...sourceEdges("telemetry")];
    expect(violations(edges)).toEqual([]);
    // The walk does read the imports (one that found none could not fail): the lifecycle imports the jobs.
    expect(edges.some((e) => e.from.startsWith("worker/lifecycle/") && e.to.startsWith("worker/job/"))).toBe(
      true,
    );
    expect(edges.some((e) => e.from.startsWith("telemetry/"))).toBe(true);
  });

  it("finds an upward import, a type-only and a dynamic one, and telemetry's import of the worker (so the check above can fail)", () => {
    const sample = (from: string, text: string) => edgesOf(from, text);
    expect(
      violations([
        ...sample("worker/job/job-deps.ts", 'import type { WorkerFacts } from "../lifecycle/lifecycle.js";'),
        ...sample("worker/runner/runner.ts", 'const m = await import("../job/job-board.js");'),
        ...sample("worker/fitness/health.ts", 'import {\n  x,\n} from "../platform/heartbeat.js";'),
        ...sample("telemetry/otel.ts", 'import type { WorkerEvents } from "../worker/events.js";'),
        // Downward and within a folder: allowed.
        ...sample("worker/lifecycle/parts.ts", 'import { JobBoard } from "../job/job-board.js";'),
        ...sample("worker/job/active-job.ts", 'import { JobClock } from "./job-clock.js";'),
      ]),
    ).toEqual([
      "worker/job/job-deps.ts → worker/lifecycle/lifecycle.ts (layer 4 imports layer 5)",
      "worker/runner/runner.ts → worker/job/job-board.ts (layer 1 imports layer 4)",
      "worker/fitness/health.ts → worker/platform/heartbeat.ts (layer 2 imports layer 2)",
      "telemetry/otel.ts → worker/events.ts (telemetry imports the worker)",
    ]);
  });
});
