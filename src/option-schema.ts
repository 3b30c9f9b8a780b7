/**
 * The one way options are checked: a zod schema per options object (zod is already the config's
 * and the wire's validator), parsed once by {@link parseOptions}, whose error names each bad
 * option, what was expected and what came: ``maxRetries must be an integer ≥ 0, got -1``.
 */
import { z } from "zod";
import { durationProblem } from "./duration.js";
import { RunletError, type RunletErrorCode } from "./errors.js";

export { durationProblem, MAX_TIMER_MS } from "./duration.js";

/** A value as an error message shows it: strings quoted, objects and functions by kind. */
export function describeValue(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value);
  if (typeof value === "function") return "a function";
  if (typeof value === "bigint") return `${value}n`;
  if (value === null || typeof value !== "object") return String(value);
  return Array.isArray(value) ? "an array" : "an object";
}

/** A schema whose every failure reads "must be `expected`". */
function expecting<S extends z.ZodType>(expected: string, build: (error: { error: string }) => S): S {
  return build({ error: expected });
}

/**
 * A safe integer ≥ `min` (and ≤ `max` when given); `note` explains the bound in the message.
 * One schema rather than zod's chain (`z.number().int().min().max()` builds a new schema at each
 * step): a worker builds some thirty of these at every start, before its first job
 * (docs/benchmarks.md, "Cold start").
 */
export function integer(min: number, max?: number, note?: string) {
  const expected =
    (max === undefined ? `an integer ≥ ${min}` : `an integer from ${min} to ${max}`) +
    (note === undefined ? "" : ` (${note})`);
  const top = max ?? Number.MAX_SAFE_INTEGER;
  return z.custom<number>(
    (value) => typeof value === "number" && Number.isSafeInteger(value) && value >= min && value <= top,
    { error: expected },
  );
}

/**
 * A duration option checked by hand (a per-call option, outside a schema): `fallback` when left
 * out; else it must pass {@link durationProblem}, or RUNLET_CONFIG_INVALID names it.
 *
 * @example
 * const pollMs = checkDuration("pollIntervalMs", options.pollIntervalMs, 0, 1_000);
 */
export function checkDuration(name: string, value: unknown, min: number, fallback: number): number {
  if (value === undefined) return fallback;
  const problem = durationProblem(value, min);
  if (problem === undefined) return value as number;
  throw new RunletError("RUNLET_CONFIG_INVALID", `${name} must be ${problem}, got ${describeValue(value)}`, {
    details: { option: name, value },
  });
}

/** A duration in ms: an integer from `min` to {@link MAX_TIMER_MS} (see {@link durationProblem}). */
export function duration(min: number) {
  return z.custom<number>((value) => durationProblem(value, min) === undefined, {
    error: (issue) => durationProblem(issue.input, min) ?? `an integer ≥ ${min}`,
  });
}

/** An optional {@link duration} that is `fallback` when left out. */
export function durationOption(min: number, fallback: number) {
  return duration(min).default(fallback);
}

/** An optional integer ≥ `min` that is `fallback` when left out. */
export function integerOption(min: number, fallback: number, max?: number, note?: string) {
  return integer(min, max, note).default(fallback);
}

/** A boolean. */
export function boolean() {
  return expecting("true or false", (e) => z.boolean(e));
}

/** A string with at least one character (one schema, as {@link integer}). */
export function nonEmptyString() {
  return z.custom<string>((value) => typeof value === "string" && value.length > 0, {
    error: "a non-empty string",
  });
}

/** An optional boolean that is `fallback` when left out. */
export function booleanOption(fallback: boolean) {
  return boolean().default(fallback);
}

/** A path as options name it: `limits.runBytes`, `endpoints[0].minWorkers`. */
function pathOf(path: readonly PropertyKey[]): string {
  let out = "";
  for (const key of path) {
    if (typeof key === "number") out += `[${key}]`;
    else out += out.length === 0 ? String(key) : `.${String(key)}`;
  }
  return out;
}

/**
 * Parses `value` with `schema`. A failure throws `code`, its message `<prefix><option> must be
 * <expected>, got <value>` for each bad option (joined by "; "); `details.issues` lists them.
 */
export function parseOptions<S extends z.ZodType>(
  schema: S,
  value: unknown,
  code: RunletErrorCode,
  prefix = "",
): z.output<S> {
  // Options are parsed once each: zod compiling a fast path for the object (its JIT, `new
  // Function`) costs more than that one parse; at start-up it was most of defineHandler's time.
  const result = schema.safeParse(value, { reportInput: true, jitless: true });
  if (result.success) return result.data;
  const issues = result.error.issues.map((issue) => {
    const name = pathOf(issue.path);
    const got = "input" in issue ? `, got ${describeValue(issue.input)}` : "";
    const what = issue.message.startsWith("Invalid")
      ? issue.message.replace(/^Invalid input: /, "")
      : `must be ${issue.message}`;
    return `${name === "" ? "options" : name} ${what}${got}`;
  });
  throw new RunletError(code, `${prefix}${issues.join("; ")}`, { details: { issues } });
}
