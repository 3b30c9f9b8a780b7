import { RunletError } from "../errors.js";

/** Named numbers and strings for one job (`ctx.metrics`). */
export interface JobMetrics {
  /** Sets `name` to a finite number or a string. */
  set(name: string, value: number | string): void;
  /** Adds `by` (default 1) to the number `name` (starting from 0). */
  increment(name: string, by?: number): void;
  /** The current value of `name`. */
  get(name: string): number | string | undefined;
  /** A plain copy of every metric, e.g. for logging. */
  toJSON(): Record<string, number | string>;
}

function check(name: unknown, value: unknown): void {
  if (typeof name !== "string" || name === "") {
    throw new RunletError("RUNLET_JOB_FAILED", `metric names must be non-empty strings, got ${String(name)}`);
  }
  if (!((typeof value === "number" && Number.isFinite(value)) || typeof value === "string")) {
    throw new RunletError(
      "RUNLET_JOB_FAILED",
      `metric "${name}" must be a finite number or a string, got ${typeof value === "number" ? value : typeof value}`,
    );
  }
}

/** Creates an empty metrics record for one job. */
export function createJobMetrics(): JobMetrics {
  const values = new Map<string, number | string>();
  return {
    set(name, value) {
      check(name, value);
      values.set(name, value);
    },
    increment(name, by = 1) {
      const current = values.get(name) ?? 0;
      if (typeof current !== "number") {
        throw new RunletError(
          "RUNLET_JOB_FAILED",
          `metric "${name}" holds a string and cannot be incremented`,
        );
      }
      check(name, current + by);
      values.set(name, current + by);
    },
    get: (name) => values.get(name),
    toJSON: () => Object.fromEntries(values),
  };
}
