import { getEventListeners } from "node:events";
import { abortCallbackCount } from "../../src/linked-signal.js";
import { dependantsOf } from "./signal-dependants.js";

/**
 * A census of what abort signals hold, in the thread that installs it: every AbortSignal that gets
 * an "abort" listener or is passed to `AbortSignal.any` is remembered (weakly), and
 * {@link signalCensus} reports the most any one still-reachable signal holds — its listeners, its
 * `onAbort` callbacks (linked-signal.ts) and its dependant signals (AbortSignal.any). A part that
 * keeps one of those per job on a signal that outlives the job shows as a number that grows with
 * the jobs run; one that releases them shows the same number after 5 jobs and after 50.
 */

const INSTALLED = Symbol.for("runlet.test.signalCensus");

interface Census {
  readonly seen: Set<WeakRef<AbortSignal>>;
}

function census(): Census | undefined {
  return (globalThis as Record<symbol, Census | undefined>)[INSTALLED];
}

/** Starts remembering signals in this thread (idempotent). Wraps, and otherwise leaves alone, two methods. */
export function installSignalCensus(): void {
  if (census() !== undefined) return;
  const state: Census = { seen: new Set() };
  (globalThis as Record<symbol, Census | undefined>)[INSTALLED] = state;
  const known = new WeakSet<AbortSignal>();
  const remember = (signal: unknown): void => {
    if (!(signal instanceof AbortSignal) || known.has(signal)) return;
    known.add(signal);
    state.seen.add(new WeakRef(signal));
  };
  const add = EventTarget.prototype.addEventListener;
  EventTarget.prototype.addEventListener = function (this: EventTarget, type, listener, options) {
    if (type === "abort") remember(this);
    return add.call(this, type, listener, options);
  };
  const any = AbortSignal.any.bind(AbortSignal);
  AbortSignal.any = (signals: AbortSignal[]) => {
    for (const signal of signals) remember(signal);
    return any(signals);
  };
}

/** What the census found: the most one reachable signal holds, and how many signals it still sees. */
export interface SignalCount {
  /** Listeners + onAbort callbacks + dependants of the signal that holds most. */
  readonly most: number;
  /** Reachable signals remembered (0 before {@link installSignalCensus}). */
  readonly signals: number;
}

/** Counts what the reachable signals of this thread hold now. */
export function signalCensus(): SignalCount {
  const state = census();
  if (state === undefined) return { most: 0, signals: 0 };
  let most = 0;
  for (const ref of state.seen) {
    const signal = ref.deref();
    if (signal === undefined) {
      state.seen.delete(ref);
      continue;
    }
    const held =
      getEventListeners(signal, "abort").length + abortCallbackCount(signal) + dependantsOf(signal);
    most = Math.max(most, held);
  }
  return { most, signals: state.seen.size };
}
