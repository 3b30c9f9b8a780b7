/**
 * A short-lived signal tied to a long-lived one, without `AbortSignal.any`: on Node 20 every
 * `AbortSignal.any([longLived, …])` leaves an entry in the long-lived signal's dependants that is
 * never removed (nodejs/node#55351), so a loop that links one per request grows for ever. Here the
 * link is one listener, removed in `finally`.
 */

/**
 * Runs `fn` with a signal that aborts when `parent` aborts (with its reason) or, when `timeoutMs`
 * is given, after that many ms (with a `TimeoutError`, as `AbortSignal.timeout` does). The listener
 * on `parent` and the timer are removed when `fn` settles.
 *
 * @example
 * const answer = await withLinkedSignal(closing, takeTimeoutMs, (signal) => http.get(url, { signal }));
 */
export async function withLinkedSignal<T>(
  parent: AbortSignal,
  timeoutMs: number | undefined,
  fn: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const controller = new AbortController();
  const onAbort = (): void => controller.abort(parent.reason);
  if (parent.aborted) controller.abort(parent.reason);
  else parent.addEventListener("abort", onAbort, { once: true });
  const timer =
    timeoutMs === undefined
      ? undefined
      : setTimeout(
          () =>
            controller.abort(new DOMException("The operation was aborted due to timeout", "TimeoutError")),
          timeoutMs,
        );
  try {
    return await fn(controller.signal);
  } finally {
    clearTimeout(timer);
    parent.removeEventListener("abort", onAbort);
  }
}
