/**
 * Adds `value` to `set` as its newest member and forgets the oldest past `max`: a bounded set of
 * the latest ids seen (a Set iterates in insertion order, so the first member is the oldest).
 * A value already there moves to the newest place.
 *
 * @example
 * const retired = new Set<string>();
 * addRecent(retired, "pod-1", 1_000);
 */
export function addRecent<T>(set: Set<T>, value: T, max: number): void {
  set.delete(value);
  set.add(value);
  if (set.size > max) set.delete(set.values().next().value as T);
}
