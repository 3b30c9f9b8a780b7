import { setTimeout as sleep } from "node:timers/promises";

/**
 * A simulated accelerator. It stands for a GPU's cost model: every call pays a fixed launch cost
 * (kernel launch, weights through the memory hierarchy, a host–device round trip) whatever its
 * size, plus a little per input. One call on 32 inputs costs about as much as one call on one,
 * which is why batching pays. It sleeps rather than computes, so it takes no CPU from the worker.
 */

/** The cost of one call, in ms. */
export interface DeviceCost {
  /** Paid once per call. @default 20 */
  readonly launchMs: number;
  /** Paid per input. @default 0.2 */
  readonly perItemMs: number;
}

/** 20 ms a call plus 0.2 ms an input: the figures the example and the bench use. */
export const DEFAULT_COST: DeviceCost = Object.freeze({ launchMs: 20, perItemMs: 0.2 });

/** How long one call on `size` inputs takes, in ms. */
export function callMs(cost: DeviceCost, size: number): number {
  return cost.launchMs + cost.perItemMs * size;
}

/** The fastest a device with `cost` can serve jobs in calls of `size`: jobs per second. */
export function idealJobsPerSecond(cost: DeviceCost, size: number): number {
  return (size / callMs(cost, size)) * 1000;
}

/** A simulated embedding device. */
export interface Device {
  /** One vector of `dims` numbers per text, in one call. Rejects when `signal` fires first. */
  embed(texts: readonly string[], dims: number, signal?: AbortSignal): Promise<number[][]>;
  /** Calls made so far, and the inputs each took. */
  readonly calls: readonly number[];
}

/** A deterministic stand-in for an embedding model: the same text always gives the same unit vector. */
function vectorOf(text: string, dims: number): number[] {
  const out = new Array<number>(dims).fill(0);
  for (let i = 0; i < text.length; i++) out[i % dims]! += text.charCodeAt(i) * (1 + (i % 7));
  const norm = Math.hypot(...out) || 1;
  return out.map((v) => Math.round((v / norm) * 1e6) / 1e6);
}

/** The simulated device: a class, so a test can watch its calls with a spy on `embed`. */
export class SimulatedDevice implements Device {
  readonly #cost: DeviceCost;
  readonly #calls: number[] = [];
  constructor(cost: DeviceCost = DEFAULT_COST) {
    this.#cost = cost;
  }
  get calls(): readonly number[] {
    return this.#calls;
  }
  async embed(texts: readonly string[], dims: number, signal?: AbortSignal): Promise<number[][]> {
    this.#calls.push(texts.length);
    if (this.#calls.length > 1_000) this.#calls.shift();
    await sleep(callMs(this.#cost, texts.length), undefined, signal === undefined ? undefined : { signal });
    return texts.map((text) => vectorOf(text, dims));
  }
}

/** Creates a device with `cost` (keeps the last 1 000 call sizes, so a long run stays bounded). */
export function createDevice(cost: DeviceCost = DEFAULT_COST): Device {
  return new SimulatedDevice(cost);
}
