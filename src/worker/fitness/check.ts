/**
 * One fitness check (docs/fitness.md): a name (the unhealthy ping's `check`) and a probe that either
 * resolves with its figure, for the one log line each check writes, or throws {@link FitnessFailure}.
 */

/** What a check that did not fail found. */
export interface CheckOutcome {
  /** `skipped`: nothing to check here (a CPU-only machine for a GPU check), which is no failure. */
  readonly status: "passed" | "skipped";
  /** One line with the figure: `22.8 GB available (of 23.5 GB; needs 4 GB)`. */
  readonly figure: string;
  /** The figure's numbers as log fields. */
  readonly fields?: Readonly<Record<string, number | string>>;
}

/** A built-in check's failure: `reason` is what the unhealthy ping carries. */
export class FitnessFailure extends Error {
  constructor(reason: string, options: { cause?: unknown } = {}) {
    super(reason, options);
    this.name = "FitnessFailure";
  }
}

/** One check of the start-up sequence. */
export interface FitnessCheck {
  /** The `check=` name of the unhealthy ping: `memory`, `disk`, `network`, `cuda`, `gpu`. */
  readonly name: string;
  /** Runs the probe; `signal` aborts when the worker closes meanwhile. */
  run(signal: AbortSignal): Promise<CheckOutcome>;
}

/** Bytes as GB with two decimals, counted as the Python SDK counts them (1024³). */
export function gb(bytes: number): string {
  return `${(bytes / 1024 ** 3).toFixed(2)} GB`;
}
