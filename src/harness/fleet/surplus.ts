/**
 * The workers a fleet stops when it has more than it may keep (above a lowered maximum): the
 * newest first, and only those `stoppable` says may go now (one with work in hand stays until it
 * has none). Shared by the queue scaler and the load-balancing fleet.
 */
export function newestStoppable<S>(
  slots: readonly S[],
  surplus: number,
  stoppable: (slot: S) => boolean,
): S[] {
  const chosen: S[] = [];
  for (let at = slots.length - 1; at >= 0 && chosen.length < surplus; at--) {
    const slot = slots[at]!;
    if (stoppable(slot)) chosen.push(slot);
  }
  return chosen;
}
