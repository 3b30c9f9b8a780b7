import { RunletError, type RunletErrorCode } from "./errors.js";

/**
 * An integer option with a default: returns `value ?? fallback`, or throws `code` with a message
 * naming the option, what was expected and what came (``retryBaseMs must be an integer ≥ 1, got 0``).
 */
export function integerOption(
  code: RunletErrorCode,
  name: string,
  value: number | undefined,
  fallback: number,
  min: number,
): number {
  const resolved = value ?? fallback;
  if (!Number.isInteger(resolved) || resolved < min) {
    throw new RunletError(code, `${name} must be an integer ≥ ${min}, got ${String(value)}`);
  }
  return resolved;
}
