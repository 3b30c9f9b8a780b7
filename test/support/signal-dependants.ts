/**
 * Entries the runtime keeps in `signal`'s set of dependant signals (Node's internal
 * kDependantSignals): on Node 20, every `AbortSignal.any([signal, …])` leaves one there for ever
 * (nodejs/node#55351), so a long-lived signal shows a leak as a count that grows per call.
 */
export function dependantsOf(signal: AbortSignal): number {
  const symbol = Object.getOwnPropertySymbols(signal).find((s) => s.description === "kDependantSignals");
  const set = symbol === undefined ? undefined : (signal as unknown as Record<symbol, unknown>)[symbol];
  // Node's internal SafeSet: read its size rather than test `instanceof Set`.
  const size = (set as { size?: unknown } | undefined)?.size;
  return typeof size === "number" ? size : 0;
}
