/**
 * A short-lived signal tied to a long-lived one, without `AbortSignal.any`: on Node 20 every
 * `AbortSignal.any([longLived, …])` leaves an entry in the long-lived signal's dependants that is
 * never removed (nodejs/node#55351), so a loop that links one per request grows for ever. Here the
 * link is one listener, removed in `finally`.
 */

/** The reason a {@link withLinkedSignal} signal aborts with when its own time runs out. */
export function timeoutReason(): DOMException {
  return new DOMException("The operation was aborted due to timeout", "TimeoutError");
}

/** True when `signal` aborted because its own time ran out ({@link timeoutReason}). */
export function timedOut(signal: AbortSignal): boolean {
  return signal.aborted && (signal.reason as { name?: unknown } | undefined)?.name === "TimeoutError";
}

/**
 * The one way runlet ties a short-lived signal to a long-lived one and a deadline. Runs `fn` with
 * a signal that aborts when `parent` aborts (with its reason) or, when `timeoutMs` is given, after
 * that many ms (with a `TimeoutError`, as `AbortSignal.timeout` does). The listener on `parent`
 * and the timer are removed when `fn` settles, so a finished call holds nothing until its
 * deadline: not `AbortSignal.timeout`, which Node keeps alive with every listener on it until it
 * fires (a job client's 10-minute wait() default held ~3 KiB per finished call).
 *
 * @example
 * const answer = await withLinkedSignal(closing, takeTimeoutMs, (signal) => http.get(url, { signal }));
 */
export async function withLinkedSignal<T>(
  parent: AbortSignal | undefined,
  timeoutMs: number | undefined,
  fn: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const linked = anySignal([parent]);
  const timer =
    timeoutMs === undefined ? undefined : setTimeout(() => linked.abort(timeoutReason()), timeoutMs);
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

/** The one real listener on a signal and the callbacks it fans out to. */
interface FanOut {
  readonly callbacks: Set<() => void>;
  readonly listener: () => void;
}
const subscriptions = new WeakMap<AbortSignal, FanOut>();

/**
 * Calls `fn` once when `signal` aborts; returns the unsubscribe, to call in `finally`. However many
 * callers wait on one long-lived signal at once (a worker's every in-flight post waits on its one
 * give-up signal), the signal holds a single listener: one each would pass Node's limit of 10 and
 * print MaxListenersExceededWarning under a burst. The listener is removed with the last
 * callback, so a signal keeps nothing for callers that are done: a listener left on an
 * `AbortSignal.timeout` keeps that signal and its timer alive until it fires (Node holds a timeout
 * signal that has abort listeners). A signal already aborted is the caller's to check first; `fn`
 * is not called for it.
 */
export function onAbort(signal: AbortSignal, fn: () => void): () => void {
  let fanOut = subscriptions.get(signal);
  if (fanOut === undefined) {
    const callbacks = new Set<() => void>();
    const listener = (): void => {
      subscriptions.delete(signal);
      for (const callback of callbacks) callback();
      callbacks.clear();
    };
    fanOut = { callbacks, listener };
    subscriptions.set(signal, fanOut);
    signal.addEventListener("abort", listener, { once: true });
  }
  // A wrapper per call: the same function subscribed twice is unsubscribed one call at a time.
  const entry = (): void => fn();
  fanOut.callbacks.add(entry);
  const subscribed = fanOut;
  return () => {
    if (!subscribed.callbacks.delete(entry) || subscribed.callbacks.size > 0) return;
    if (subscriptions.get(signal) === subscribed) subscriptions.delete(signal);
    signal.removeEventListener("abort", subscribed.listener);
  };
}

/**
 * How many {@link onAbort} callbacks wait on `signal` now (its one real listener fans out to
 * them). Diagnostics: tests count what a long-lived signal holds after many jobs.
 */
export function abortCallbackCount(signal: AbortSignal): number {
  return subscriptions.get(signal)?.callbacks.size ?? 0;
}
