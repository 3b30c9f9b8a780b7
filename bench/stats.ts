/** Small statistics for the bench: every figure is a median over repeated runs, with min and max. */

/** A measured figure as `bench/results.json` stores it. */
export interface Figure {
  /** Stable key, e.g. `throughput.c8`. */
  readonly id: string;
  /** What it is, for the table. */
  readonly label: string;
  /** `jobs/s`, `ms`, `MB/s`, `MiB`, `items/s`, `x`. */
  readonly unit: string;
  readonly median: number;
  readonly min: number;
  readonly max: number;
  /** Every run's value, in run order. */
  readonly runs: readonly number[];
  /** Anything the figure needs said next to it (a bound, a baseline). */
  readonly note?: string;
}

/** The median of `values` (mean of the middle two for an even count). */
export function median(values: readonly number[]): number {
  if (values.length === 0) throw new RangeError("median of no values");
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** The `p`-th percentile (0–100) by nearest rank. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) throw new RangeError("percentile of no values");
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1]!;
}

/** Rounds for display and storage: 3 significant digits below 100, whole numbers above. */
export function round(value: number): number {
  if (!Number.isFinite(value)) return value;
  if (Math.abs(value) >= 100) return Math.round(value);
  return Number(value.toPrecision(3));
}

/** A figure from its runs. */
export function figure(
  id: string,
  label: string,
  unit: string,
  runs: readonly number[],
  note?: string,
): Figure {
  return {
    id,
    label,
    unit,
    median: round(median(runs)),
    min: round(Math.min(...runs)),
    max: round(Math.max(...runs)),
    runs: runs.map(round),
    ...(note === undefined ? {} : { note }),
  };
}

/** Runs `once` `times` times, one after another, and returns each result. */
export async function repeat<T>(times: number, once: (run: number) => Promise<T>): Promise<T[]> {
  const out: T[] = [];
  for (let i = 0; i < times; i++) out.push(await once(i));
  return out;
}

/** The two checkouts a comparison measures: the one given as `--before`, and this one. */
export type Side = "before" | "after";
export const SIDES: readonly Side[] = ["before", "after"];

/**
 * Runs `once` for each side in `rounds` rounds, alternating their order A B, B A, A B, … (ABBA),
 * so both sides meet the same drift of a shared machine's load; returns each side's results in
 * run order.
 */
export async function alternate<T>(
  rounds: number,
  once: (side: Side, round: number) => Promise<T>,
): Promise<Record<Side, T[]>> {
  const out: Record<Side, T[]> = { before: [], after: [] };
  for (let round = 0; round < rounds; round++) {
    for (const side of round % 2 === 0 ? SIDES : [...SIDES].reverse())
      out[side].push(await once(side, round));
  }
  return out;
}
