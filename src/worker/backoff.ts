/**
 * The worker's back-off between attempts: capped exponential with jitter. The abortable sleep and
 * `Retry-After` parsing are shared with the clients, in src/wait.ts.
 */

/** Back-off bounds, in ms. */
export interface BackoffOptions {
  /** First delay's upper bound. @default 250 */
  readonly baseMs?: number;
  /** Largest delay. @default 15_000 */
  readonly capMs?: number;
}

/** The delay before retry number `attempt` (0-based): uniform in [bound/2, bound], bound = min(cap, base·2^attempt). */
export function backoffDelayMs(attempt: number, options: BackoffOptions = {}): number {
  const base = options.baseMs ?? 250;
  const cap = options.capMs ?? 15_000;
  const bound = Math.min(cap, base * 2 ** Math.min(attempt, 30));
  return Math.round(bound / 2 + Math.random() * (bound / 2));
}

/** The longest `Retry-After` the worker honours on its polls, ms; a longer one is cut to this. */
export const MAX_RETRY_AFTER_MS = 60_000;
