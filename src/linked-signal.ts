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
  const unsubscribe = parent.aborted ? undefined : onAbort(parent, () => controller.abort(parent.reason));
  if (parent.aborted) controller.abort(parent.reason);
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
    unsubscribe?.();
  }
}

/** The one real listener on a signal and the callbacks it fans out to. */
interface Subscription {
  readonly callbacks: Set<() => void>;
  readonly listener: () => void;
}

const subscriptions = new WeakMap<AbortSignal, Subscription>();

/**
 * Calls `fn` once when `signal` aborts; returns the unsubscribe, to call in `finally`. However many
 * callers wait on one long-lived signal at once (a worker's every in-flight post waits on its one
 * give-up signal), the signal holds a single listener: one each would pass Node's limit of 10
 * and print MaxListenersExceededWarning under a burst, though none leaks. A signal already aborted
 * is the caller's to check first; `fn` is not called for it.
 */
export function onAbort(signal: AbortSignal, fn: () => void): () => void {
  let subscription = subscriptions.get(signal);
  if (subscription === undefined) {
    const callbacks = new Set<() => void>();
    const listener = (): void => {
      subscriptions.delete(signal);
      for (const callback of callbacks) callback();
      callbacks.clear();
    };
    subscription = { callbacks, listener };
    subscriptions.set(signal, subscription);
    signal.addEventListener("abort", listener, { once: true });
  }
  // A wrapper per call: the same function subscribed twice is unsubscribed one call at a time.
  const entry = (): void => fn();
  const { callbacks, listener } = subscription;
  callbacks.add(entry);
  return () => {
    callbacks.delete(entry);
    if (callbacks.size === 0 && subscriptions.get(signal)?.listener === listener) {
      subscriptions.delete(signal);
      signal.removeEventListener("abort", listener);
    }
  };
}
