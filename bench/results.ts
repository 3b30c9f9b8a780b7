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
  /** With `--before <checkout>`: that checkout's worker against this one's. */
  readonly compare?: CompareResults;
}

/**
 * One checkout of a comparison, by commit and name only: its path is this machine's, and
 * bench/results.json is committed.
 */
export interface CompareTree {
  /** `git rev-parse HEAD` where the checkout is a git work tree's top, else null. */
  readonly commit: string | null;
  /** The commit's first 7 characters, or the path's last name. */
  readonly name: string;
}

/** One figure of a comparison: each side's runs, as a {@link Figure}. */
export interface CompareFigure {
  readonly id: string;
  readonly label: string;
  readonly unit: string;
  readonly before: Figure;
  readonly after: Figure;
}

/** What `npm run bench -- --before <checkout>` adds to the results (`compare`). */
export interface CompareResults {
  readonly before: CompareTree;
  /** This checkout. */
  readonly after: CompareTree;
  /** The sizes and rounds used. */
  readonly options: BenchOptions["compare"];
  /** Every figure, in the order measured. */
  readonly figures: readonly CompareFigure[];
  /** Wall time of the comparison, ms. */
  readonly durationMs: number;
}
