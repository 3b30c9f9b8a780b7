import type { Machine } from "./machine.js";
import type { BenchOptions } from "./options.js";
import type { Figure } from "./stats.js";

/** What `bench/results.json` holds. */
export interface BenchResults {
  /** Bumped when the shape changes. */
  readonly schema: 1;
  readonly mode: "full" | "quick";
  readonly machine: Machine;
  readonly options: BenchOptions;
  /** Every figure, in the order measured: median over runs, with min, max and each run. */
  readonly figures: readonly Figure[];
  /** True when the memory figures stayed within both stated bounds. */
  readonly memoryWithinBound: boolean;
  readonly coldStart:
    | {
        readonly available: true;
        readonly export: string;
        readonly result: unknown;
        readonly leaves: ReadonlyArray<{ path: string; value: number }>;
      }
    | { readonly available: false; readonly reason: string };
  /** Wall time of the whole bench, ms. */
  readonly durationMs: number;
}
