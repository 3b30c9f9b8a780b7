import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

/**
 * What the soak suite measures in its own process: listeners left on signals that have not
 * aborted (every AbortSignal's add/removeEventListener counted while installed), live Node timers,
 * and the heap after a full collection.
 */

/** Net "abort" listeners per signal, counted from install() on. */
export function countSignalListeners(): { live(): number; uninstall(): void } {
  const net = new Map<AbortSignal, number>();
  const proto = EventTarget.prototype;
  const add = proto.addEventListener;
  const remove = proto.removeEventListener;
  const seen = new WeakMap<AbortSignal, Set<unknown>>();
  proto.addEventListener = function (this: EventTarget, type: string, listener: unknown, options?: unknown) {
    if (this instanceof AbortSignal && type === "abort" && listener !== null) {
      const set = seen.get(this) ?? new Set();
      seen.set(this, set);
      if (!set.has(listener)) {
        set.add(listener);
        net.set(this, (net.get(this) ?? 0) + 1);
      }
    }
    return add.call(this, type, listener as Parameters<typeof add>[1], options as Parameters<typeof add>[2]);
  };
  proto.removeEventListener = function (
    this: EventTarget,
    type: string,
    listener: unknown,
    options?: unknown,
  ) {
    if (this instanceof AbortSignal && type === "abort" && seen.get(this)?.delete(listener) === true) {
      net.set(this, (net.get(this) ?? 1) - 1);
    }
    return remove.call(
      this,
      type,
      listener as Parameters<typeof remove>[1],
      options as Parameters<typeof remove>[2],
    );
  };
  return {
    live() {
      let total = 0;
      for (const [signal, count] of net) {
        // An aborted signal has let go of its listeners (they were once-only or it is done).
        if (signal.aborted) net.delete(signal);
        else total += count;
      }
      return total;
    },
    uninstall() {
      proto.addEventListener = add;
      proto.removeEventListener = remove;
    },
  };
}

/** Node timers keeping the event loop alive now. */
export function liveTimers(): number {
  return process.getActiveResourcesInfo().filter((r) => r === "Timeout").length;
}

let collect: (() => void) | undefined;

/** Heap used after a full collection, bytes. */
export function heapAfterGc(): number {
  if (collect === undefined) {
    setFlagsFromString("--expose-gc");
    collect = runInNewContext("gc") as () => void;
  }
  collect();
  collect();
  return process.memoryUsage().heapUsed;
}

/** The deepest stack seen by {@link recordStackDepth}. */
export const stackDepth = { max: 0 };

/** Records how deep the stack is here (frames), for a bound on recursion. */
export function recordStackDepth(): void {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = Number.POSITIVE_INFINITY;
  const frames = (new Error().stack ?? "").split("\n").length - 1;
  Error.stackTraceLimit = limit;
  stackDepth.max = Math.max(stackDepth.max, frames);
}
