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
  const linked = anySignal([parent]);
  const timer =
    timeoutMs === undefined
      ? undefined
      : setTimeout(
          () => linked.abort(new DOMException("The operation was aborted due to timeout", "TimeoutError")),
          timeoutMs,
        );
  try {
    return await fn(linked.signal);
  } finally {
    clearTimeout(timer);
    linked.unlink();
  }
}

/**
 * `AbortSignal.any(signals)` without its Node 20 leak: a signal that aborts when any of `signals`
 * does (with that one's reason), linked by one fan-out callback each, which `unlink()` removes.
 * Call `unlink()` in `finally` once the signal is no longer needed. Undefined entries are skipped.
 *
 * @example
 * const deadline = AbortSignal.timeout(timeoutMs);
 * const linked = anySignal([options.signal, deadline]);
 * try { await poll(linked.signal); } finally { linked.unlink(); }
 */
export function anySignal(signals: readonly (AbortSignal | undefined)[]): {
  readonly signal: AbortSignal;
  /** Aborts the linked signal itself (a caller's own timer). */
  abort(reason: unknown): void;
  unlink(): void;
} {
  const controller = new AbortController();
  const unlinks: Array<() => void> = [];
  for (const signal of signals) {
    if (signal === undefined) continue;
    if (signal.aborted) {
      controller.abort(signal.reason);
      break;
    }
    unlinks.push(onAbort(signal, () => controller.abort(signal.reason)));
  }
  return {
    signal: controller.signal,
    abort: (reason) => controller.abort(reason),
    unlink: () => {
      for (const unlink of unlinks) unlink();
    },
  };
}

/** The callbacks the one real listener on a signal fans out to. */
const subscriptions = new WeakMap<AbortSignal, Set<() => void>>();

/**
 * Calls `fn` once when `signal` aborts; returns the unsubscribe, to call in `finally`. However many
 * callers wait on one long-lived signal at once (a worker's every in-flight post waits on its one
 * give-up signal), the signal holds a single listener, from the first call until it aborts: one
 * each would pass Node's limit of 10 and print MaxListenersExceededWarning under a burst, though
 * none leaks. The listener stays while no callback is left: a worker links one request at a time
 * to its give-up signal, and adding and removing the listener each time cost more than the
 * request's own bookkeeping; it holds only the empty set and goes with the signal. A signal
 * already aborted is the caller's to check first; `fn` is not called for it.
 */
export function onAbort(signal: AbortSignal, fn: () => void): () => void {
  let callbacks = subscriptions.get(signal);
  if (callbacks === undefined) {
    const fanOut = new Set<() => void>();
    callbacks = fanOut;
    subscriptions.set(signal, fanOut);
    signal.addEventListener(
      "abort",
      () => {
        subscriptions.delete(signal);
        for (const callback of fanOut) callback();
        fanOut.clear();
      },
      { once: true },
    );
  }
  // A wrapper per call: the same function subscribed twice is unsubscribed one call at a time.
  const entry = (): void => fn();
  callbacks.add(entry);
  const subscribed = callbacks;
  return () => {
    subscribed.delete(entry);
  };
}
